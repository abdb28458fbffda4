"""``hmde e5-gpu pack|train|unpack``: hmde-e5's joint stage on a GPU lent for minutes (hmde.recipes.e5_gpu)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .arg_types import positive_float, positive_int
from .common import add_device_argument


def register(sub) -> None:
    p = sub.add_parser("e5-gpu", help="hmde-e5's joint stage on a lent GPU: pack here, train there, unpack here",
                       description="pack: the stage-1 model, the pairs and e5 restricted to their vocabulary, within a "
                       "device call's 64 MiB; train: the joint stage for a fixed number of minutes at the paper's "
                       "batch (2 x 64), written back in parts of 15 MiB; unpack: those parts as an hmde-e5 model "
                       "folder. docs/hmde-e5.md, 'A GPU run', gives the whole procedure.")
    gsub = p.add_subparsers(dest="e5_gpu_command", metavar="STEP")
    gsub.required = True
    k = gsub.add_parser("pack", help="write a pack of the joint stage's inputs")
    k.add_argument("pairs", metavar="PAIRS", help="pairs file of `hmde build-pairs` (its .docs.parquet beside it)")
    k.add_argument("--frozen", required=True, metavar="MODEL",
                   help="the stage-1 model (hmde recipe e5's hmde-frozen: e5 unchanged, the upper encoder trained)")
    k.add_argument("--output", "-o", required=True, metavar="PACK")
    k.add_argument("--budget-mib", type=positive_float, default=60.0,
                   help="refuse a pack larger than this (default 60: a device call carries 64 MiB with the checkout, "
                   "2.3 MiB without its bundled models)")
    k.add_argument("--max-pairs", type=positive_int, help="carry at most this many pairs (a seeded sample), "
                   "after keeping those in e5's languages: to fit the budget")
    k.add_argument("--upper-dtype", choices=["float16", "float32"], default="float16",
                   help="the upper encoder's stored precision (default float16, half the size)")
    k.add_argument("--warmup", type=int, default=20, help="warm-up steps of the joint stage (default 20)")
    k.add_argument("--lower-trainable", default="all", help="which e5 weights train (hmde train --lower-trainable)")
    k.add_argument("--query-loss-weight", type=float, default=0.0, help="hmde train --query-loss-weight (default 0, "
                   "as the shipped hmde-e5)")
    k.add_argument("--no-progress", action="store_true")
    k.set_defaults(func=run_pack)
    t = gsub.add_parser("train", help="run the joint stage on a pack (on the GPU machine)")
    t.add_argument("pack", metavar="PACK")
    t.add_argument("--minutes", type=positive_float, required=True,
                   help="training time; the schedule is fitted to the measured rate (hmde train --time-budget)")
    t.add_argument("--output", "-o", required=True, metavar="DIR", help="where the parts and the log go ($OUT there)")
    add_device_argument(t)
    t.add_argument("--work", help="folder for the run's temporary files (default: the system's)")
    t.add_argument("--train-argument", action="append", default=[], metavar="FLAG=VALUE",
                   help="an hmde train flag after the pack's own, e.g. --train-argument=--grad-accum=2 (tests on CPUs)")
    t.set_defaults(func=run_train)
    u = gsub.add_parser("unpack", help="join the parts a GPU run brought back into an hmde-e5 model folder")
    u.add_argument("parts", metavar="DIR", help="the folder holding joint.tar.00, joint.tar.01, ...")
    u.add_argument("--output", "-o", required=True, metavar="MODEL")
    u.set_defaults(func=run_unpack)


def run_pack(args: argparse.Namespace) -> int:
    from ..recipes.e5 import joint_stage_arguments
    from ..recipes.e5_gpu import pack
    from ..recipes.options import RecipeOptions

    options = RecipeOptions(e5_query_loss_weight=args.query_loss_weight)
    arguments = [*joint_stage_arguments(options, grad_accum=64, warmup=args.warmup), "--epochs", "1000",
                 "--lower-trainable", args.lower_trainable, "--no-gradient-checkpointing", "--save-every", "1000000",
                 "--no-progress"]
    summary = pack(args.pairs, args.frozen, args.output, arguments, args.budget_mib, args.upper_dtype,
                   args.max_pairs, show_progress=not args.no_progress)
    print(f"wrote {summary.path}: {summary.mib} MiB ({summary.pairs:,} pairs, {summary.documents:,} documents, "
          f"{summary.units:,} units, e5 restricted to {summary.pieces:,} pieces)")
    return 0


def run_train(args: argparse.Namespace) -> int:
    from ..recipes.e5_gpu import train
    from ..recipes.steps import commands
    from .main import main

    extra = [part for a in args.train_argument for part in a.split("=", 1)]
    with commands(main):  # hmde train in this process
        written = train(args.pack, args.output, args.minutes, args.device, extra, args.work)
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


def run_unpack(args: argparse.Namespace) -> int:
    from ..recipes.e5_gpu import unpack

    print(f"wrote {unpack(args.parts, Path(args.output))}")
    return 0
