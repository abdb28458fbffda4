"""``hmde longformer convert|mlm``: the mLongformer baseline of the paper."""

from __future__ import annotations

import argparse

from ..errors import HmdeError


def register(sub) -> None:
    p = sub.add_parser("longformer", help="convert a BERT-style sentence encoder into a Longformer; continue MLM")
    lsub = p.add_subparsers(dest="longformer_command", metavar="ACTION")
    lsub.required = True
    c = lsub.add_parser("convert", help="positions tiled to 4,096, attention window 512, global first token")
    c.add_argument("model", metavar="MODEL", help="a BERT-style sentence encoder (folder or hub id)")
    c.add_argument("--output", "-o", required=True, help="a new folder (or a Longformer folder, with --overwrite)")
    c.add_argument("--overwrite", action="store_true", help="replace a Longformer folder at --output (a folder "
                   "holding anything else is never replaced)")
    c.add_argument("--max-positions", type=int, default=4096)
    c.add_argument("--window", type=int, default=512)
    c.set_defaults(func=run_convert)
    m = lsub.add_parser("mlm", help="continue masked-language-model training (15%%) on long documents")
    m.add_argument("folder", metavar="DIR", help="a folder written by `hmde longformer convert`")
    m.add_argument("corpus", nargs="+", metavar="CORPUS", help="documents (.jsonl/.jsonl.gz/.tsv/.txt/.parquet)")
    m.add_argument("--output", "-o", required=True, help="a new folder (or a Longformer folder, with --overwrite)")
    m.add_argument("--overwrite", action="store_true", help="replace a Longformer folder at --output (a folder "
                   "holding anything else is never replaced)")
    m.add_argument("--max-length", type=int, default=4096)
    m.add_argument("--batch-size", type=int, default=2, help="paper: 2")
    m.add_argument("--grad-accum", type=int, default=32, help="paper: 32")
    m.add_argument("--lr", type=float, default=1e-5, help="paper: 1e-5 (the public code: 3e-5)")
    m.add_argument("--weight-decay", type=float, default=0.01, help="paper: 0.01")
    m.add_argument("--warmup", type=int, default=500, help="warm-up steps (paper: 500)")
    m.add_argument("--epochs", type=float, default=1.0, help="passes over the corpus (paper: 1)")
    m.add_argument("--max-steps", type=int, default=None, help="stop after this many steps instead")
    m.add_argument("--save-every", type=int, default=200)
    m.add_argument("--mlm-probability", type=float, default=0.15)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--resume", action="store_true")
    m.add_argument("--no-progress", action="store_true")
    m.set_defaults(func=run_mlm)


def check_longformer_output(args: argparse.Namespace) -> None:
    """Before any work: the output is new, empty, or a Longformer folder with --overwrite (the swap of the
    finished folder would otherwise delete a folder of the user's)."""
    from ..ground.output_dirs import check_replaceable, check_writable_parent, is_longformer_folder

    check_writable_parent(args.output)
    check_replaceable(args.output, "hmde Longformer folder", is_longformer_folder, args.overwrite)


def run_convert(args: argparse.Namespace) -> int:
    from ..longformer import convert_to_longformer

    check_longformer_output(args)
    convert_to_longformer(args.model, args.output, args.max_positions, args.window)
    print(f"wrote the Longformer to {args.output} ({args.max_positions} positions, window {args.window})")
    return 0


def mlm_settings(args: argparse.Namespace):
    from ..longformer.mlm import MlmSettings

    return MlmSettings(max_length=args.max_length, batch_size=args.batch_size, grad_accum=args.grad_accum, lr=args.lr,
                       weight_decay=args.weight_decay, warmup=args.warmup, epochs=args.epochs,
                       max_steps=args.max_steps, save_steps=args.save_every, mlm_probability=args.mlm_probability,
                       seed=args.seed)


def run_mlm(args: argparse.Namespace) -> int:
    from ..io.documents import read_documents
    from ..longformer.mlm import continue_mlm

    if not 0 < args.mlm_probability < 1:
        raise HmdeError("--mlm-probability must be between 0 and 1")
    check_longformer_output(args)
    texts = [r.text if isinstance(r.text, str) else " ".join(r.text) for path in args.corpus for r in read_documents(path)]
    continue_mlm(args.folder, texts, args.output, mlm_settings(args), args.resume, not args.no_progress)
    print(f"wrote the adapted Longformer to {args.output}")
    return 0
