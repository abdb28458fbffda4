"""``hmde pseudo-documents``: parallel documents from document-ordered sentence pairs."""

from __future__ import annotations

import argparse


def register(sub) -> None:
    p = sub.add_parser("pseudo-documents", help="chunk document-ordered parallel sentences (WMT newstest) into "
                       "parallel documents for build-pairs",
                       description="N consecutive sentence pairs become one document per language; the category "
                       "of a chunk is its block of neighbouring chunks (hard negatives from the same stretch).")
    p.add_argument("files", nargs="+", metavar="TSV", help="xxx-yyy.tsv(.gz) files whose lines keep document order")
    p.add_argument("--output", "-o", required=True, help="documents .jsonl.gz")
    p.add_argument("--lines", type=int, default=5, help="sentence pairs per document (default 5)")
    p.add_argument("--block", type=int, default=8, help="chunks per category block (default 8)")
    p.add_argument("--max-documents", type=int, help="at most this many documents per file (whole blocks, sampled)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..pretraining.pseudo_documents import write_pseudo_documents

    counts = write_pseudo_documents(args.files, args.output, args.lines, args.block, args.max_documents, args.seed)
    print(f"wrote {sum(counts.values())} parallel documents from {len(counts)} files to {args.output}")
    return 0
