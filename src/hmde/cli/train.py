"""``hmde train``: contrastive pretraining of HMDE on a pairs file."""

from __future__ import annotations

import argparse
from pathlib import Path

from .arg_types import lower_trainable, positive_float, positive_int
from ..pretraining.lower_parts import CHOICES_HELP
from ..errors import HmdeError
from .train_checks import check_resume_arguments, check_run_output, starting_model_name
from ..encoders.length_settings import apply_length_overrides
from .length_arguments import add_length_arguments, length_overrides
from .common import add_device_argument, add_model_argument, pick_device


def register(sub) -> None:
    p = sub.add_parser("train", help="pretrain HMDE contrastively on PAIRS.parquet (from build-pairs)",
                       description="Train HMDE with the paper's cross-lingual InfoNCE loss. MODEL is a sentence "
                       "encoder (a new, untrained upper encoder is put on top) or a saved hmde model to continue. "
                       "OUTPUT becomes a saved hmde model folder (plus checkpoint/ and train_log.jsonl).")
    add_model_argument(p)
    p.add_argument("pairs", metavar="PAIRS")
    p.add_argument("--output", "-o", required=True)
    p.add_argument("--batch-size", type=positive_int, default=2, help="pairs per micro-batch (paper: 2)")
    p.add_argument("--grad-accum", type=int, default=64, help="micro-batches per optimizer step (paper: 64)")
    p.add_argument("--cache-chunk", type=int, help="GradCache: one contrastive batch of batch-size x grad-accum "
                   "pairs, encoded in chunks of this many documents")
    p.add_argument("--lr", type=positive_float, default=1e-5)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--warmup", type=int, default=1000)
    p.add_argument("--epochs", type=float, default=1.0)
    p.add_argument("--max-steps", type=int)
    p.add_argument("--time-budget", type=positive_float, metavar="MINUTES",
                   help="end the optimisation after about this many minutes (a GPU lease): the step count and the "
                   "learning-rate schedule are fitted to the rate of steps 3-5, and again at a quarter, a half and three "
                   "quarters of the run (capped by --epochs/--max-steps)")
    p.add_argument("--temperature", type=positive_float, default=0.05)
    p.add_argument("--symmetric", action="store_true", help="public code's loss: both directions")
    p.add_argument("--negatives-across-processes", action="store_true",
                   help="multi-process runs: a micro-batch's anchors also contrast with every other process's pairs "
                   "(a contrastive batch of batch-size x processes); default: the paper's batch, each micro-batch "
                   "alone, so N processes train exactly as one")
    p.add_argument("--anchor-side", choices=["random", "a"], default="random",
                   help="one-directional loss: random (default) draws each pair's anchor side per step, so every "
                   "language is anchor and candidate; a: always the pair's first page (lang_a < lang_b), as earlier hmde did")
    p.add_argument("--no-hard-negatives", action="store_true")
    p.add_argument("--freeze-lower", action="store_true", help="train the upper encoder only (paper ablation)")
    p.add_argument("--frozen-vectors", metavar="FILE",
                   help="with --freeze-lower: start from another run's sentence vectors (its checkpoint/"
                   "frozen_vectors.safetensors; same lower encoder, pairs and sentences; checked on a sample)")
    p.add_argument("--lower-trainable", type=lower_trainable, default="all", metavar="PARTS",
                   help="joint runs: which lower-encoder weights learn: " + CHOICES_HELP)
    p.add_argument("--no-gradient-checkpointing", action="store_true")
    p.add_argument("--bf16", choices=["auto", "on", "off"], default="auto")
    p.add_argument("--save-every", type=int, default=500)
    p.add_argument("--validation-pairs", type=int, default=0, help="hold out this many pairs for validation accuracy")
    p.add_argument("--max-sentences", type=int, help="upper-encoder sentences (new models only; default 32)")
    p.add_argument("--residual-sentences", action="store_true",
                   help="not in the paper (new models only): contextualised sentence vector = lower-encoder vector + "
                        "a learned gate (starting at 0) x the upper encoder's output, so training starts from the "
                        "mean of the sentence vectors")
    p.add_argument("--covered-pairs-only", action="store_true",
                   help="train only on pairs whose two pages are in languages the lower encoder was trained on "
                   "(the paper's Wikipedia pairs all were, in LaBSE's); the others are dropped, and counted on stderr")
    p.add_argument("--train-max-sentences", type=int,
                   help="train on each document's first N sentences (default: the model's max_sentences, 32, as the "
                   "paper; 0: every sentence, in windows of 32, all through the lower encoder with gradients)")
    add_length_arguments(p)
    p.add_argument("--query-loss-weight", type=float, default=0.0,
                   help="not in the paper (default 0): add this weight x InfoNCE from one random sentence of the "
                        "translation, through the lower encoder alone, to the document (the CLIR protocol's "
                        "query-document comparison)")
    p.add_argument("--sentence-loss-weight", type=float, default=0.0,
                   help="not in the paper (default 0): add this weight x a sentence-level loss on the contextualised "
                        "sentence vectors of pairs whose pages carry aligned sentence lists (pseudo-documents, Bible "
                        "verses): InfoNCE between a sentence's and its translation's, plus the cosine distance to its "
                        "own lower-encoder vector; trains the vectors of encode_documents(output=\"sentences\") and "
                        "index build --multi-vector")
    p.add_argument("--sentence-lists", action="store_true",
                   help="segment each page that carries its own sentence list (pseudo-documents' sentences, Bible "
                        "verses) by that list instead of the sentence splitter; implied by --sentence-loss-weight")
    p.add_argument("--loader-workers", type=int, metavar="N",
                   help="DataLoader worker processes that prepare the next steps' batches (default: 2 on a GPU, 0 on "
                        "CPUs, where they would take cores from the model)")
    p.add_argument("--no-units-cache", action="store_true",
                   help="segment and tokenise inside each step instead of once into PAIRS.units-<key>.parquet")
    p.add_argument("--seed", type=int, default=0)
    add_device_argument(p)
    p.add_argument("--resume", action="store_true", help="continue from OUTPUT/checkpoint with the same arguments: "
                   "the result equals an uninterrupted run, bit for bit")
    p.add_argument("--overwrite", action="store_true", help="replace the model, checkpoint and log of an earlier run "
                   "in OUTPUT (without it, an OUTPUT holding a run needs --resume)")
    p.add_argument("--stop-at-step", type=int, metavar="N", help="stop after step N of the planned run (writing a "
                   "checkpoint there); continue later with --resume")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import torch

    from ..encoders.hierarchical import HierarchicalEncoder
    from ..encoders.model_folder import is_hmde_folder
    from ..pretraining.pairs import read_pairs
    from ..pretraining.trainer import HmdeTrainer, PretrainingConfig
    from ..encoders.registry import resolve_model_path

    check_run_output(Path(args.output), args.resume, args.overwrite)
    if args.resume:
        check_resume_arguments(Path(args.output), args)
    if args.frozen_vectors and not args.freeze_lower:
        raise HmdeError("--frozen-vectors needs --freeze-lower: a lower encoder that learns changes its vectors")
    if args.frozen_vectors and not Path(args.frozen_vectors).is_file():
        raise HmdeError(f"--frozen-vectors {args.frozen_vectors}: no such file")
    if (args.query_loss_weight or args.sentence_loss_weight) and args.cache_chunk:
        raise HmdeError("--query-loss-weight and --sentence-loss-weight are not available with --cache-chunk; use "
                        "--batch-size/--grad-accum")
    pairs, docs, _ = read_pairs(args.pairs, presplit=args.sentence_lists or args.sentence_loss_weight > 0)
    missing = {d for p in pairs for d in (p["doc_a"], p["doc_b"]) if d not in docs}
    if missing:
        raise HmdeError(f"{args.pairs}: {len(missing)} documents missing from its .docs.parquet (e.g. {min(missing)})")
    from ..training.distributed import local_device

    device = local_device(pick_device(args.device))  # under torchrun: this process's GPU
    torch.manual_seed(args.seed)
    output = Path(args.output)
    if args.resume and is_hmde_folder(output) and (output / "checkpoint").exists():
        model = HierarchicalEncoder.from_pretrained(output, device=device)
    else:
        try:
            path = resolve_model_path(args.model)
        except HmdeError:
            path = None
        if path is not None and is_hmde_folder(path):
            model = HierarchicalEncoder.from_pretrained(path, device=device)
        else:
            overrides = {"max_sentences": args.max_sentences} if args.max_sentences else {}
            if args.residual_sentences:
                overrides["residual_sentences"] = True
            model = HierarchicalEncoder.from_sentence_encoder(str(path or args.model), device=device, **overrides)
    apply_length_overrides(model, length_overrides(args))  # saved with the model: it encodes as it was trained
    if args.covered_pairs_only:
        pairs = covered_pairs(args.model, model, pairs, docs)
    else:
        warn_uncovered_pages(args.model, model, pairs, docs)
    config = PretrainingConfig(
        batch_size=args.batch_size, grad_accum=args.grad_accum, lr=args.lr, weight_decay=args.weight_decay,
        warmup=args.warmup, epochs=args.epochs, max_steps=args.max_steps, temperature=args.temperature,
        symmetric=args.symmetric, anchor_side=args.anchor_side,
        negatives_across_processes=args.negatives_across_processes, hard_negatives=not args.no_hard_negatives, freeze_lower=args.freeze_lower,
        lower_trainable=args.lower_trainable,
        cache_chunk=args.cache_chunk, gradient_checkpointing=not args.no_gradient_checkpointing, bf16=args.bf16,
        save_every=args.save_every, validation_pairs=args.validation_pairs, seed=args.seed,
        max_units=args.train_max_sentences, query_weight=args.query_loss_weight,
        sentence_weight=args.sentence_loss_weight, loader_workers=args.loader_workers,
        start_model=starting_model_name(args.model), time_budget_minutes=args.time_budget)
    prepared = None
    if not args.no_units_cache:
        from ..pretraining.prepared import prepare_units

        limit = model.config.max_sentences if config.max_units is None else config.max_units
        prepared = prepare_units(args.pairs, docs, model, limit, presplit=args.sentence_lists or
                                 args.sentence_loss_weight > 0, show_progress=not args.no_progress)
    trainer = HmdeTrainer(model, pairs, docs, config, output, show_progress=not args.no_progress, prepared=prepared)
    trainer.train(resume=args.resume, stop_at_step=args.stop_at_step, seed_vectors=args.frozen_vectors)
    from ..training.distributed import is_main

    if is_main() and trainer.stopped_at is not None:
        print(f"stopped after step {trainer.stopped_at}; the checkpoint is in {output / 'checkpoint'}: continue "
              "with the same arguments and --resume")
    elif is_main():
        print(f"saved the trained hmde model to {output}")
    return 0


def warn_uncovered_pages(name: str, model, pairs: list[dict], docs: dict) -> None:
    """Say how many training pages are in languages the lower encoder was not trained on: its vectors
    there are close to random, so pairs of such pages can only be matched by what survives in them
    (length, names, numbers), and the upper encoder learns that instead of meaning."""
    from collections import Counter

    from ..text.coverage import warn_uncovered

    from ..pretraining.pairs import page_languages

    warn_uncovered(name, model, Counter(page_languages(pairs, docs).values()), "training pages")


def covered_pairs(name: str, model, pairs: list[dict], docs: dict) -> list[dict]:
    """The pairs whose two pages are in the lower encoder's languages (``--covered-pairs-only``), in
    their order (so a resumed run trains on the same pairs); said on stderr."""
    import sys

    from ..pretraining.pairs import pairs_in_languages
    from ..text.coverage import model_languages

    known = model_languages(model)
    if known is None:
        raise HmdeError(f"--covered-pairs-only: hmde cannot tell which languages {name}'s lower encoder was trained "
                        "on (it knows those of USE-m and multilingual-e5-small)")
    label, covered = known
    kept = pairs_in_languages(pairs, docs, covered)
    print(f"hmde: --covered-pairs-only: training on the {len(kept):,} of {len(pairs):,} pairs whose two pages are in "
          f"languages {label} was trained on", file=sys.stderr)
    return kept
