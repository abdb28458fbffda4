"""``hmde index build|add|upsert|delete|compact|info|reembed`` and ``hmde search``: a FAISS + DuckDB index of
documents."""

from __future__ import annotations

import argparse
import math
import json
import sys


from .arg_types import language_code, nonnegative_int, positive_int
from ..errors import HmdeError, InputError
from .common import (
    add_device_argument,
    add_backend_argument,
    add_sentence_scoring_arguments,
    warn,
)
from ..index.search_once import search_index
from ..index.multivector import DEFAULT_DOC_WEIGHT, DEFAULT_TOP_SENTENCES
from .index_arguments import add_build_arguments
from .index_from_vectors import run_build_any


def register(sub) -> None:
    p = sub.add_parser("index", help="build a searchable document index; add, replace and delete its documents")
    isub = p.add_subparsers(dest="index_command", metavar="ACTION")
    isub.required = True
    b = isub.add_parser("build", help="embed INPUT and write (or, with --add, extend) INDEX_DIR",
                        description="Documents go through the model's recommended method (hmde-e5: mean), and every "
                        "sentence's vector is indexed too, so that `hmde search` ranks by the best sentence fused with "
                        "the document vector and shows it (--single-vector: one vector per document).")
    add_build_arguments(b)
    b.set_defaults(func=run_build_any)

    from .index_reembed import register as register_reembed
    from .index_sync import register as register_sync
    from .index_write import register as register_writes

    register_writes(isub)
    register_sync(isub)
    register_reembed(isub)

    s = sub.add_parser("search", help="search an index with a query (through the sentence encoder)")
    s.add_argument("index", metavar="INDEX_DIR")
    s.add_argument("query", nargs="*", help="query texts: each argument is one query (quote a query of several words)")
    s.add_argument("--queries", metavar="FILE", help="queries as TSV (qid<TAB>text) or JSONL (qid, text)")
    s.add_argument("--run", metavar="OUT", help="write a TREC run file (qid Q0 docid rank score tag) for trec_eval or "
                   "ir-measures; hits are then not printed unless --json")
    s.add_argument("--qrels", help="TREC qrels: print the run's ir-measures metrics (over the --top-k hits retrieved)")
    s.add_argument("--measures", default="AP,RR,nDCG@10,R@100", help="ir-measures names, with --qrels")
    s.add_argument("--tag", default="hmde", help="the run tag column of --run")
    s.add_argument("--group-by", metavar="FIELD", default=None, help="one hit per value of this metadata field (the "
                   "source a chunk came from: path, source, url...), its best document with its evidence")
    s.add_argument("--hybrid", action="store_true",
                   help="BM25 counts too (index built with --bm25): each document in the query's own language gains "
                   "0.05 x its BM25 score over the best, never passing one of another language (the dense ranking "
                   "kept across languages; docs/defaults.md)")
    s.add_argument("--hybrid-fusion", choices=["lexical", "rrf"], default="lexical",
                   help="--hybrid: lexical (above, default) or rrf (the document vectors' ranking fused with BM25's by "
                   "reciprocal rank, the way before issue 95)")
    s.add_argument("--hybrid-weights", default="1,1", metavar="DENSE,BM25",
                   help="--hybrid-fusion rrf: weights of the two rankings in the fusion (default 1,1)")
    s.add_argument("--rrf-k", type=nonnegative_int, default=60, help="reciprocal rank fusion constant (default 60)")
    s.add_argument("--top-k", type=int, default=None, help="hits per query (default 10; with --qrels, the deepest "
                   "cutoff of --measures (Success@1,RR@10: 10; R@1000: 1000), at least 100 where a measure has no "
                   "cutoff (AP, RR))")
    add_sentence_scoring_arguments(s, "multi-vector index", DEFAULT_TOP_SENTENCES, DEFAULT_DOC_WEIGHT)
    s.add_argument("--single-vector", action="store_true",
                   help="on a multi-vector index, rank by the document vectors alone")
    s.add_argument("--lang", type=language_code, help="only documents of this language")
    s.add_argument("--filter", metavar="EXPR", help="only documents whose metadata match, e.g. 'section == \"sport\" "
                   "and date >= \"2024-01-01\"' (==, !=, <, <=, >, >=, in [...], not in, and, or, not; fields: the "
                   "documents' other input fields, lang, doc_id): the top hits of those")
    s.add_argument("--query-lang", metavar="CODE", help="the queries' language, where the index calibrates by it "
                   "(built with --language-debias subspace+calibrate, the default): default each query's own, "
                   "detected; none: not calibrated")
    s.add_argument("--model", help="model to embed the query with (default: the one the index was built with)")
    s.add_argument("--json", action="store_true", help="one JSON object per hit, for machines")
    add_device_argument(s)
    add_backend_argument(s, default=None, help_suffix="; default: auto, or onnx-int8 for an index built with it")
    s.add_argument("--ef-search", type=positive_int, help="HNSW: candidates explored per query (default 128; more: higher recall)")
    s.add_argument("--nprobe", type=positive_int, help="IVF: lists searched per query (default lists/8; more: higher recall)")
    s.add_argument("--candidates", type=positive_int, help="multi-vector index: nearest sentences scored per query "
                   "(default 1000; ivfpq 2000, re-scored exactly; more: higher recall, slower)")
    s.set_defaults(func=run_search)


def print_hits(query: str, hits, as_json: bool, out=None, qid: str | None = None) -> None:
    """Hits as text, or (``as_json``) one JSON object per hit with the query's id and text apart."""
    out = out or sys.stdout
    if as_json:
        for h in hits:
            out.write(json.dumps({**({"qid": qid} if qid is not None else {}), "query": query, "rank": h.rank,
                                  "score": round(h.score, 5), "doc_id": h.doc_id,
                                  "lang": h.lang, "best_sentence": h.best_sentence,
                                  "sentence_score": round(h.sentence_score, 5),
                                  "evidence": [{"sentence": t, "score": round(v, 5), **place} for (t, v), place
                                               in zip(h.evidence, h.places or [{}] * len(h.evidence))],
                                  "metadata": h.metadata},
                                 ensure_ascii=False) + "\n")
        return
    out.write(f"query: {query}\n")
    if not hits:
        out.write("  (no hits)\n")
    for h in hits:
        where = f"  ({h.where()})" if h.where() else ""
        out.write(f"  {h.rank:>2}. {h.score:.3f}  {h.doc_id}  [{h.lang}]{where}  {h.snippet()}\n")


def check_run_ids(index_dir: str, query_ids: list[str], tag: str) -> None:
    """Before the model loads: every id the run would hold can be read back from a TREC run."""
    from ..evaluation.clir import check_run_field
    from ..index.store import DocumentIndex

    check_run_field(tag, "run tag (--tag)")
    for qid in query_ids:
        check_run_field(qid, "query id")
    with DocumentIndex.open(index_dir) as index:
        spaced = index.ids_with_whitespace()
    if spaced:
        check_run_field(spaced, f"document id (index {index_dir})")


def deepest_cutoff(measures) -> int:
    """Hits a scored run retrieves by default: the deepest cutoff of the measures (Success@1,RR@10 -> 10; R@1000 ->
    1000), and at least 100 where a measure has none (AP, RR: the whole ranking counts)."""
    import ir_measures

    cutoffs = [int(ir_measures.parse_measure(str(m)).params.get("cutoff") or 0) for m in measures]
    return max(cutoffs) if cutoffs and all(cutoffs) else max([QRELS_DEPTH] + cutoffs)


QRELS_DEPTH = 100


def run_search(args: argparse.Namespace) -> int:
    """Queries from arguments (each its own) or a file; hits printed, or written as a TREC run and scored."""
    from ..evaluation import clir
    from .preflight import check_output_file

    if args.queries and args.query:
        raise HmdeError("give queries as arguments or with --queries, not both")
    if args.queries:
        topics = clir.read_topics(args.queries)
        ids, texts = topics.ids, topics.texts
    else:
        if not args.query:
            raise HmdeError("the query is empty: give one or more queries, or --queries FILE")
        ids, texts = [str(i) for i in range(1, len(args.query) + 1)], list(args.query)
    qrels = clir.read_qrels(args.qrels) if args.qrels else None  # checked before any model is loaded
    measures = clir.parse_measures(args.measures) if qrels is not None else []
    if args.top_k is None:
        args.top_k = deepest_cutoff(measures) if qrels is not None else 10
    if qrels is not None and not set(qrels) & set(ids):
        raise InputError("no query has relevance judgements: check that the qrels and the query ids match",
                         path=str(args.qrels))
    if args.run:
        check_output_file(args.run, (args.queries, args.qrels))
        check_run_ids(args.index, ids, args.tag)
    try:
        weights = tuple(float(w) for w in args.hybrid_weights.split(","))
    except ValueError:
        weights = ()
    if len(weights) != 2 or not all(math.isfinite(w) and w >= 0 for w in weights) or sum(weights) == 0:
        raise HmdeError(f"--hybrid-weights takes two finite numbers >= 0, not both 0, DENSE,BM25; "
                        f"got '{args.hybrid_weights}'")
    hybrid = "rrf" if args.hybrid and args.hybrid_fusion == "rrf" else args.hybrid
    hits = search_index(args.index, texts, args.top_k, args.lang, args.model, args.device, args.ef_search,
                        args.nprobe, hybrid, weights, args.rrf_k, args.backend,
                        False if args.single_vector else None, args.top_sentences, args.doc_weight, args.candidates,
                        args.query_lang, args.filter, args.group_by)
    run = {qid: {h.doc_id: h.score for h in qhits} for qid, qhits in zip(ids, hits)}
    if args.run:
        clir.write_run(args.run, run, tag=args.tag)
        print(f"wrote {sum(len(v) for v in run.values())} hits of {len(run)} queries to {args.run}")
    if not args.run or args.json:
        for qid, text, qhits in zip(ids, texts, hits):
            print_hits(text if args.json or not args.queries else f"{qid}: {text}", qhits, args.json, qid=qid)
    if qrels is not None:
        unasked = sorted(set(qrels) - set(ids))
        if unasked:
            warn(f"the qrels judge {len(unasked)} query id(s) not asked (e.g. '{unasked[0]}'); they score 0")
        import ir_measures

        deeper = sorted({m for m in measures if (ir_measures.parse_measure(m).params.get("cutoff") or 0) > args.top_k})
        if deeper:
            warn(f"{', '.join(deeper)} count{'s' if len(deeper) == 1 else ''} only the {args.top_k} hits retrieved per "
                 f"query (--top-k {args.top_k}); raise --top-k to measure deeper")
        scores = clir.score_run(qrels, run, measures)
        judged = sum(1 for q in ids if q in qrels)
        print(f"{judged} of {len(ids)} queries judged: " + "  ".join(f"{m} {v:.4f}" for m, v in scores.items()))
    return 0
