"""``hmde build-pairs``: (page, translation, hard negative) triples from a comparable corpus."""

from __future__ import annotations

import argparse


def register(sub) -> None:
    p = sub.add_parser(
        "build-pairs", help="build cross-lingual training pairs with hard negatives (DuckDB, out of core)",
        description="Read pages (doc_id, concept, lang, text, categories) from JSONL(.gz) or Parquet files and write "
        "PAIRS.parquet (+ PAIRS.docs.parquet): every cross-lingual pair of pages of a concept, each side with a "
        "same-language page sharing a category as hard negative.")
    p.add_argument("corpus", nargs="+", metavar="CORPUS",
                   help="JSONL(.gz)/Parquet files, or folders of them (e.g. ../shared/data/docs/libreoffice); a "
                   "folder is a source, and a file's source is the folder it lies in")
    p.add_argument("--output", "-o", required=True, help="PAIRS.parquet")
    p.add_argument("--languages", help="comma-separated language codes to keep (compared normalised: deu keeps de)")
    p.add_argument("--exclude-languages", metavar="LANGS",
                   help="comma-separated language codes to leave out, e.g. held-out languages (normalised: est also "
                   "drops ekk)")
    p.add_argument("--min-sentences", type=int, default=0, help="drop pages with fewer sentences (public code: 6)")
    p.add_argument("--deny-category", action="append", default=[],
                   help="drop a category (SQL LIKE pattern, e.g. 'Articles with %%'); repeatable")
    p.add_argument("--alpha", type=float, help="sample language pairs with probability ~ count^alpha (public code: 0.3)")
    p.add_argument("--max-pairs", type=int, help="at most this many pairs (sampled, with --alpha if given)")
    p.add_argument("--source-max-pairs", action="append", default=[], type=source_cap, metavar="[SOURCE=]N",
                   help="at most N pairs from each source (N) or from one (SOURCE=N, over N); each source is "
                   "sampled on its own (with --alpha within it), so that none drowns the others; repeatable")
    p.add_argument("--max-per-language-pair", type=int, metavar="N",
                   help="at most N pairs of any one language pair of a source")
    p.add_argument("--no-negative", choices=["drop", "keep"], default="drop",
                   help="pairs for which no hard negative exists: drop them (default) or keep them (in-batch only)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--wiki40b-categories", help="Wiki-40B input: TSV/CSV/parquet table with columns concept, category")
    p.add_argument("--wiki40b-lang", help="Wiki-40B input: the files' language (default: the folder they lie in)")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run)


SHOWN_LANGUAGE_PAIRS = 30


def source_cap(text: str) -> tuple[str | None, int]:
    name, _, number = text.rpartition("=")
    try:
        cap = int(number)
    except ValueError:
        cap = 0
    if cap <= 0:
        raise argparse.ArgumentTypeError(f"expected N or SOURCE=N with N a positive whole number, got {text!r}")
    return name or None, cap


def run(args: argparse.Namespace) -> int:
    from ..pretraining.pairs import PairOptions, build_pairs

    every = [cap for name, cap in args.source_max_pairs if name is None]
    options = PairOptions(languages=args.languages.split(",") if args.languages else None,
                          exclude_languages=args.exclude_languages.split(",") if args.exclude_languages else (),
                          source_max_pairs=every[-1] if every else None,
                          source_caps={name: cap for name, cap in args.source_max_pairs if name},
                          max_per_language_pair=args.max_per_language_pair,
                          min_sentences=args.min_sentences, deny_categories=args.deny_category, alpha=args.alpha,
                          max_pairs=args.max_pairs, seed=args.seed, no_negative=args.no_negative,
                          wiki40b_categories=args.wiki40b_categories, wiki40b_lang=args.wiki40b_lang)
    summary = build_pairs(args.corpus, args.output, options, show_progress=not args.no_progress)
    print(f"{summary.pairs} pairs from {summary.pages} pages written to {args.output}")
    covered = summary.pairs + summary.dropped_without_negative
    print(f"hard negatives: {covered - summary.without_negative}/{covered} pairs "
          f"({summary.without_negative} without one, {summary.dropped_without_negative} dropped)")
    print("pairs per source: " + ", ".join(f"{source} {n}" for source, n in summary.per_source.items()))
    print("pairs with a page in each language: " + ", ".join(f"{lang} {n}" for lang, n in summary.per_language.items()))
    shown = sorted(summary.per_language_pair.items(), key=lambda kv: (-kv[1], kv[0]))[:SHOWN_LANGUAGE_PAIRS]
    rest = len(summary.per_language_pair) - len(shown)
    print(f"pairs per language pair ({len(summary.per_language_pair)} language pairs"
          + (f"; the {rest} others are in {args.output}'s metadata" if rest else "") + "):")
    for lp, n in shown:
        print(f"  {lp}\t{n}")
    return 0
