"""``hmde sentence-queries``: a sentence-query -> long-document retrieval task from parallel documents."""

from __future__ import annotations

import argparse


def register(sub) -> None:
    p = sub.add_parser("sentence-queries", help="build a sentence-query retrieval task from parallel documents",
                       description="Each query is one sentence of a QUERY_LANG document; the collection is the "
                       "DOC_LANG documents; the translation of the query's document is relevant. Writes topics.tsv, "
                       "qrels.txt and documents.jsonl for `hmde eval clir --topics --qrels --documents`.")
    p.add_argument("files", nargs="+", metavar="DOCS", help="parallel documents .jsonl(.gz) with doc_id, concept, "
                   "lang and verses or text (Bible files, pseudo-documents)")
    p.add_argument("--query-lang", required=True)
    p.add_argument("--doc-lang", required=True)
    p.add_argument("--output", "-o", required=True, help="output folder")
    p.add_argument("--max-queries", type=int, default=2000)
    p.add_argument("--exclude", nargs="*", default=[], metavar="DOCS",
                   help="training documents: concepts sharing any sentence with them are left out")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..evaluation.sentence_queries import build_task, read_parallel_documents, write_task

    docs = [d for f in args.files for d in read_parallel_documents(f)]
    exclude = [d for f in args.exclude for d in read_parallel_documents(f)]
    topics, collection, qrels = build_task(docs, args.query_lang, args.doc_lang, args.max_queries, args.seed, exclude)
    write_task(args.output, topics, collection, qrels, args.doc_lang)
    print(f"wrote {len(topics)} queries ({args.query_lang}) and {len(collection)} documents ({args.doc_lang}) "
          f"to {args.output}")
    return 0
