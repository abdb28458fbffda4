"""``hmde recipe NAME``: the flags of the recipes that build the bundled models; the pipelines live in
:mod:`hmde.recipes` (each step runs here as an ``hmde`` command of this process)."""

from __future__ import annotations

import argparse
import dataclasses

from ..recipes.e5_eval import ROWS
from .common import add_device_argument


def register(sub) -> None:
    p = sub.add_parser("recipe", help="rebuild a bundled model from the shared open data",
                       description="mini: hmde-mini, a sentence encoder trained here plus HMDE; use: hmde-use, "
                       "HMDE on the frozen USE multilingual v3 encoder (see hmde.recipes.use); e5: hmde-e5, HMDE trained "
                       "jointly with multilingual-e5-small (see hmde.recipes.e5)")
    p.add_argument("name", choices=["mini", "use", "e5"])
    p.add_argument("--data", default="../shared/data", help="the shared data folder (parallel/, bible/, eval/)")
    p.add_argument("--output", "-o", help="run folder (default: runs/NAME)")
    p.add_argument("--lower-epochs", type=float, default=0.6, help="epochs of the sentence-encoder stage")
    p.add_argument("--frozen-epochs", type=float, default=3.0, help="epochs of the frozen-lower HMDE stage")
    p.add_argument("--joint-steps", type=int, default=60, help="optimizer steps of the joint HMDE stage")
    p.add_argument("--lower-batch-size", type=int, default=128, help="sentence pairs per batch of the sentence-encoder "
                   "stage (shipped model: 256, on a GPU)")
    p.add_argument("--lower-max-length", type=int, default=32,
                   help="training sentences are cut to this many tokens (shipped model: 64)")
    p.add_argument("--lower-time-budget", type=float, default=None, metavar="MINUTES",
                   help="fit the sentence-encoder stage to this many minutes (shipped model: 6.3 on one H100)")
    p.add_argument("--frozen-max-sentences", type=int, default=12,
                   help="training documents cropped to this many sentences in the frozen stage (shipped model: 32)")
    p.add_argument("--query-loss-weight", type=float, default=1.0,
                   help="weight of the sentence-query -> document loss (not in the paper; 0 turns it off)")
    p.add_argument("--trained-on", default="2 CPU cores", help="where the stages ran, for the model card")
    p.add_argument("--skip-eval", action="store_true")
    p.add_argument("--preset", choices=["paper"], help="paper: the paper's document-length settings in every HMDE "
                   "training and evaluation step (see hmde train --preset)")
    p.add_argument("--install", action="store_true", help="copy the exported model into the package (hmde-NAME)")
    add_device_argument(p)
    add_use_arguments(p)
    add_e5_arguments(p)
    p.set_defaults(func=run)



def add_use_arguments(p) -> None:
    g = p.add_argument_group("recipe use")
    g.add_argument("--use-news-documents", type=int, default=2000,
                   help="use: WMT pseudo-documents per file for training (default 2000)")
    g.add_argument("--use-epochs", type=float, default=1.0, help="use: epochs of the frozen-lower stage (default 1)")
    g.add_argument("--use-paper-upper", action="store_true",
                   help="use: the paper's upper encoder instead of --residual-sentences (see docs/hmde-use.md)")
    g.add_argument("--use-max-sentences", type=int, default=32,
                   help="use: training documents cropped to this many sentences (default 32, the paper's)")
    g.add_argument("--use-lr", type=float, default=2e-4, help="use: learning rate of the upper encoder")
    g.add_argument("--use-sentence-loss-weight", type=float, default=0.0,
                   help="use: weight of the contextualised-sentence loss (hmde train --sentence-loss-weight; "
                   "docs/sentences.md); default 0, as the shipped hmde-use was trained")



def add_e5_arguments(p) -> None:
    g = p.add_argument_group("recipe e5")
    g.add_argument("--e5-bible-pairs", type=int, default=2000,
                   help="e5: Bible chapter pairs, language pairs sampled with p^0.3 (default 2000, the 2-core budget)")
    g.add_argument("--e5-news-pairs", type=int, default=1000,
                   help="e5: WMT pseudo-document pairs (default 1000; sampled with the Bible pairs they would be 1 in 50)")
    g.add_argument("--e5-docs-pairs", type=int, default=0, metavar="N",
                   help="e5: also pairs of ../shared/data/docs (LibreOffice and GNOME help, tldr pages, UDHR articles), "
                   "at most N from each source, in e5's languages, language pairs sampled with p^0.3 (default 0: "
                   "the shipped hmde-e5's Bible and news pairs only)")
    g.add_argument("--e5-docs-sources", default="libreoffice,gnome,tldr,udhr", metavar="NAME,...",
                   help="e5: the docs/ sources --e5-docs-pairs reads")
    g.add_argument("--e5-control", action=argparse.BooleanOptionalAction, default=True,
                   help="e5: train the Table 3 control (stage 1 continued with e5 frozen; default on)")
    g.add_argument("--e5-query-loss-weight", type=float, default=0.0,
                   help="e5: weight of the sentence-query -> document loss (not in the paper; default 0)")
    g.add_argument("--e5-residual", action="store_true",
                   help="e5: stage 1 builds the upper encoder with --residual-sentences (not in the paper; default "
                   "off); with --e5-frozen-lr 2e-5 it keeps mean's figures on every task measured, no better "
                   "(docs/hmde-e5.md)")
    g.add_argument("--e5-covered-pairs", action=argparse.BooleanOptionalAction, default=True,
                   help="e5: train every stage on the pairs whose two pages are in e5's languages only (hmde train "
                   "--covered-pairs-only; 1,034 of the 3,069 pairs, 945 of them news), as the paper's Wikipedia "
                   "pairs all were in LaBSE's and as the shipped hmde-e5 (default). --no-e5-covered-pairs trains on "
                   "all 45 trained Bible languages, 37 of them unknown to e5 (worse on every task: docs/hmde-e5.md)")
    g.add_argument("--e5-news-documents", type=int, default=300, help="e5: WMT pseudo-documents per file")
    g.add_argument("--e5-frozen-epochs", type=float, default=3.0, help="e5: epochs of stage 1 (frozen lower)")
    g.add_argument("--e5-frozen-lr", type=float, default=2e-4,
                   help="e5: stage 1 learning rate (a new upper encoder on a frozen lower; the paper's 1e-5 is "
                   "for the joint stage)")
    g.add_argument("--e5-joint-steps", type=int, default=60,
                   help="e5: optimizer steps of stage 2 (the joint stage; the paper: one epoch of 1.1M pairs)")
    g.add_argument("--e5-grad-accum", type=int, default=8,
                   help="e5: stage 2 micro-batches of 2 pairs per step (paper: 64; 8 on 2 CPU cores)")
    g.add_argument("--e5-joint-warmup", type=int, default=6,
                   help="e5: stage 2 warm-up steps (paper: 1000 of its ~17k; here 10%% of the steps)")
    g.add_argument("--e5-lower-trainable", default="all",
                   help="e5: which lower-encoder weights stage 2 updates (hmde train --lower-trainable)")
    g.add_argument("--e5-sentence-stage", action=argparse.BooleanOptionalAction, default=True,
                   help="e5: after stage 2, train the lower encoder on help-page titles and headings against their "
                   "pages in other languages, with translation pairs (hmde sentence-stage, as the shipped hmde-e5; "
                   "not in the paper: "
                   "--no-e5-sentence-stage or --preset paper leave it out)")
    g.add_argument("--e5-eval-only", action="store_true",
                   help="e5: train nothing; evaluate the rows whose models exist (beside a training process)")
    g.add_argument("--e5-eval-rows", type=eval_rows, default=None, metavar="ROW,...",
                   help=f"e5: evaluate only these rows (of {', '.join(ROWS)}), e.g. one process for hmde-e5 and "
                   "one for the rows on frozen e5, side by side")




def eval_rows(text: str) -> tuple[str, ...]:
    rows = tuple(r for r in text.split(",") if r)
    unknown = [r for r in rows if r not in ROWS]
    if unknown or not rows:
        raise argparse.ArgumentTypeError(f"rows are {', '.join(ROWS)}; got {text!r}")
    return rows




def run(args: argparse.Namespace) -> int:
    from ..recipes import RecipeOptions, run as run_recipe
    from ..recipes.steps import commands
    from .main import main

    args.output = args.output or f"runs/{args.name}"
    options = RecipeOptions(**{f.name: getattr(args, f.name) for f in dataclasses.fields(RecipeOptions)})
    with commands(main):
        return run_recipe(args.name, options)
