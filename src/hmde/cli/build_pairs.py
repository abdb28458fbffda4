"""``hmde build-pairs``: (page, translation, hard negative) triples from a comparable corpus."""

from __future__ import annotations

import argparse


def register(sub) -> None:
    p = sub.add_parser(
        "build-pairs", help="build cross-lingual training pairs with hard negatives (DuckDB, out of core)",
        description="Read pages (doc_id, concept, lang, text, categories) from JSONL(.gz) or Parquet files and write "
        "PAIRS.parquet (+ PAIRS.docs.parquet): every cross-lingual pair of pages of a concept, each side with a "
        "same-language page sharing a category as hard negative.")
    p.add_argument("corpus", nargs="+", metavar="CORPUS")
    p.add_argument("--output", "-o", required=True, help="PAIRS.parquet")
    p.add_argument("--languages", help="comma-separated language codes to keep")
    p.add_argument("--min-sentences", type=int, default=0, help="drop pages with fewer sentences (public code: 6)")
    p.add_argument("--deny-category", action="append", default=[],
                   help="drop a category (SQL LIKE pattern, e.g. 'Articles with %%'); repeatable")
    p.add_argument("--alpha", type=float, help="sample language pairs with probability ~ count^alpha (public code: 0.3)")
    p.add_argument("--max-pairs", type=int, help="at most this many pairs (sampled, with --alpha if given)")
    p.add_argument("--no-negative", choices=["drop", "keep"], default="drop",
                   help="pairs for which no hard negative exists: drop them (default) or keep them (in-batch only)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--wiki40b-categories", help="Wiki-40B input: TSV/CSV/parquet table with columns concept, category")
    p.add_argument("--wiki40b-lang", help="Wiki-40B input: the files' language (default: the folder they lie in)")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..pretraining.pairs import PairOptions, build_pairs

    options = PairOptions(languages=args.languages.split(",") if args.languages else None,
                          min_sentences=args.min_sentences, deny_categories=args.deny_category, alpha=args.alpha,
                          max_pairs=args.max_pairs, seed=args.seed, no_negative=args.no_negative,
                          wiki40b_categories=args.wiki40b_categories, wiki40b_lang=args.wiki40b_lang)
    summary = build_pairs(args.corpus, args.output, options, show_progress=not args.no_progress)
    print(f"{summary.pairs} pairs from {summary.pages} pages written to {args.output}")
    covered = summary.pairs + summary.dropped_without_negative
    print(f"hard negatives: {covered - summary.without_negative}/{covered} pairs "
          f"({summary.without_negative} without one, {summary.dropped_without_negative} dropped)")
    for lp, n in summary.per_language_pair.items():
        print(f"  {lp}\t{n}")
    return 0
