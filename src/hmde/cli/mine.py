"""``hmde mine [MODEL] SRC TGT -o OUT``: the translation pairs of two collections of sentences, by margin over the
nearest neighbours both ways (:mod:`hmde.align.miner`, :mod:`hmde.align.mining`; docs/mining.md)."""

from __future__ import annotations

import argparse

from .arg_types import language_code, positive_int
from .common import add_device_argument, add_model_argument, finite_float


def register(sub) -> None:
    from ..align.miner import FORMATS
    from ..align.mining import MiningOptions
    from ..align.similarity import DIRECTIONS

    defaults = MiningOptions()
    p = sub.add_parser("mine", help="mine translation pairs from two collections of sentences (margin scoring, "
                       "as LASER and LaBSE mine)",
                       description="SRC and TGT hold one sentence each per line (.txt), JSONL objects with 'text' "
                       "and an optional 'id', or an hmde representation Parquet file (`hmde encode -o X.parquet`: "
                       "nothing is embedded twice). Each sentence's nearest neighbours on the other side give every "
                       "candidate pair's ratio margin; the pairs of both directions are taken best first, each "
                       "sentence at most once, where the margin reaches --threshold.")
    add_model_argument(p, default=None, default_help="the model of a Parquet side's vectors, else hmde-e5-bitext, "
                       "hmde-e5's lower encoder trained for translation: docs/mining.md")
    p.add_argument("src", metavar="SRC")
    p.add_argument("tgt", metavar="TGT")
    p.add_argument("--output", "-o", required=True, help="OUT.jsonl (or .tsv, .tmx with --format; moses: OUT.SRC "
                   "and OUT.TGT)")
    p.add_argument("--format", choices=FORMATS, default="jsonl", help="jsonl (default: one object a pair: src and "
                   "tgt line numbers, score, src_text, tgt_text, and the ids of JSONL inputs), tsv (a two-column "
                   "bitext), moses (two files named by the languages), tmx (a TMX 1.4b translation memory)")
    p.add_argument("--threshold", type=finite_float, help="the ratio margin a pair needs (default: the one "
                   f"measured for the model, recorded in its folder's mining.json; else {defaults.threshold}, "
                   "hmde-e5's: docs/mining.md)")
    p.add_argument("--min-cosine", type=finite_float, help="the cosine a pair needs besides its margin (default: "
                   "the one recorded in the model folder's mining.json; else 0, none: hmde-e5 mines best by the "
                   "margin alone, an encoder trained for translation with a floor: docs/mining.md)")
    p.add_argument("--direction", choices=DIRECTIONS, default=defaults.direction, help="max (default: both "
                   "directions' best, each sentence once), intersection (mutual best), forward, backward")
    p.add_argument("--k", type=positive_int, default=defaults.k, help=f"neighbours of the margin (default "
                   f"{defaults.k})")
    p.add_argument("--candidates", type=positive_int, default=defaults.candidates, help="nearest neighbours "
                   f"re-scored per sentence (default {defaults.candidates})")
    p.add_argument("--max-length-ratio", type=finite_float, default=defaults.max_length_ratio, help="drop pairs "
                   f"whose longer side has more than this many times the shorter's characters (default "
                   f"{defaults.max_length_ratio}; 0: keep every length)")
    p.add_argument("--keep-copies", action="store_true", help="keep pairs whose two sides are the same text "
                   "(untranslated copies are dropped)")
    p.add_argument("--src-lang", type=language_code, help="the source's language: mined pairs whose source hmde's "
                   "language identifier reads as another are dropped (and Moses/TMX name it)")
    p.add_argument("--tgt-lang", type=language_code, help="the target's language (as --src-lang)")
    p.add_argument("--exact-limit", type=positive_int, default=defaults.exact_limit, help="sentences a side searched "
                   f"exactly (default {defaults.exact_limit:,}); beyond, an IVF index of 8-bit codes whose candidates are "
                   "re-scored exactly")
    p.add_argument("--batch-size", type=positive_int, default=64, help="sentences embedded at once (default 64)")
    add_device_argument(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..align.miner import mine
    from ..align.mining import MiningOptions
    from ..io.alignments import output_paths
    from .preflight import check_output_file

    for path in output_paths(args.output, args.format, args.src_lang, args.tgt_lang):
        check_output_file(str(path), (args.src, args.tgt))
    options = MiningOptions(threshold=args.threshold, k=args.k, candidates=args.candidates, direction=args.direction,
                            max_length_ratio=args.max_length_ratio, keep_copies=args.keep_copies,
                            exact_limit=args.exact_limit, min_cosine=args.min_cosine).check()
    pairs = mine(args.src, args.tgt, args.output, args.model, args.format, args.src_lang, args.tgt_lang, args.device,
                 args.batch_size, options, progress=not args.no_progress)  # the inputs are read before the model
    options = pairs.options  # a threshold or floor not given: the model's measured one
    floor = f", cosine >= {options.min_cosine}" if options.min_cosine else ""
    print(f"mined {len(pairs)} pairs ({args.direction}, margin >= {options.threshold}{floor}) into {args.output}")
    return 0
