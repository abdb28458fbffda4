"""Training throughput of hmde train's joint stage (lower encoder trained): pairs per second, side by side.

Arms, each on the same pairs and the same model, loaded afresh in its own process (so each
arm's peak memory is its own), in alternating rounds:
- ``before``: hmde before issue 17: segmentation and tokenisation inside every step, dense
  token-embedding gradients, gradient checkpointing on (the default);
- ``cached``: the default now: units and token ids from PAIRS.units-<key>.parquet, made once
  (its one-time cost is printed), lower-encoder batches planned by the step loader, sparse
  token-embedding gradients summed once per step (:mod:`hmde.training.sparse_embeddings`);
- ``cached, dense embeddings``: as cached, with dense token-embedding gradients (isolates that change);
- ``cached, no checkpointing``: as cached, without gradient checkpointing (memory for speed);
- ``cached, N workers``: as cached, with N DataLoader workers (``--workers``; on a GPU machine).

With ``--lower-trainable all,no-embeddings,top-4`` the arms are instead the cached default (gradient
checkpointing off, as ``hmde recipe e5`` trains) with each of those parts of the lower encoder
updated (``hmde train --lower-trainable``), and ratios are to the first: what a fixed time budget
buys in steps for each choice of which layers learn.

Prints per round each arm's pairs/s, peak RSS and ratio to ``before``, then best and median.
On a GPU it also samples utilisation (``nvidia-smi``) during the cached arm. Not a test:

    python benchmarks/train_throughput.py PAIRS.parquet --model hmde-mini --steps 4 --rounds 3
    python benchmarks/train_throughput.py PAIRS.parquet --model labse-shape --steps 2   # random BERT-base shape
    python benchmarks/train_throughput.py runs/e5/pairs.parquet --model runs/e5/hmde-frozen --steps 1 \
        --rounds 2 --lower-trainable all,no-embeddings,top-4
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch


LABSE_VOCABULARY = 501_153  # rows of LaBSE's token-embedding matrix


def model_source(name: str) -> str:
    """What each arm's process loads: an hmde model name, or a LaBSE-shaped folder built here once
    (BERT-base, 501,153 embedding rows, CLS -> Dense -> Normalize, random weights)."""
    if name != "labse-shape":
        return name
    from hmde.encoders.random_models import build_random_sentence_encoder

    folder = Path(tempfile.mkdtemp()) / "labse-shape"
    texts = [f"sentence number {i} about topic {i % 17}" for i in range(400)]
    build_random_sentence_encoder(folder, texts, hidden_size=768, num_layers=12, num_heads=12, vocab_size=4000,
                                  style="labse", embedding_rows=LABSE_VOCABULARY)
    return str(folder)


def load_model(source: str, device: str, seed: int, sentence_encoder: bool):
    """``sentence_encoder``: ``source`` is a bare sentence encoder (labse-shape), given a new upper encoder."""
    from hmde import HierarchicalEncoder

    torch.manual_seed(seed)  # the same upper-encoder initialisation in every arm
    if sentence_encoder:
        return HierarchicalEncoder.from_sentence_encoder(source, device=device)
    return HierarchicalEncoder.from_pretrained(source, device=device)


class GpuSampler:
    """Mean GPU utilisation (nvidia-smi, every 0.2 s) while the block runs; None without a GPU."""

    def __enter__(self):
        self.samples, self.stop = [], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        if torch.cuda.is_available():
            self.thread.start()
        return self

    def _run(self):
        while not self.stop.wait(0.2):
            out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True).stdout.split()
            if out:
                self.samples.append(float(out[0]))

    def __exit__(self, *exc):
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join()

    @property
    def mean(self):
        return statistics.mean(self.samples) if self.samples else None


def run_arm(source: str, args, cached: bool, checkpointing: bool, sparse: bool, workers: int,
            lower_trainable: str = "all") -> dict:
    """One arm in this (child) process: pairs/s, mean GPU utilisation, peak RSS."""
    import resource

    from hmde.pretraining.pairs import read_pairs
    from hmde.pretraining.prepared import prepare_units
    from hmde.pretraining.trainer import HmdeTrainer, PretrainingConfig

    model = load_model(source, args.device, args.seed, args.model == "labse-shape")
    pairs, docs, _ = read_pairs(args.pairs)
    prepared = prepare_units(args.pairs, docs, model, model.config.max_sentences, show_progress=False) \
        if cached else None
    config = PretrainingConfig(batch_size=args.batch_size, grad_accum=args.grad_accum, lr=1e-5, warmup=0,
                               max_steps=args.steps, save_every=0, log_every=10**9, bf16="off",
                               gradient_checkpointing=checkpointing, sparse_embedding_gradients=sparse,
                               loader_workers=workers, seed=args.seed, lower_trainable=lower_trainable)
    with tempfile.TemporaryDirectory() as out:
        trainer = HmdeTrainer(model, pairs, docs, config, out, show_progress=False, prepared=prepared)
        trainer.validate = lambda: {}  # no validation pass inside the timing
        model.save_pretrained = lambda *a, **k: None  # nor the final save
        with GpuSampler() as gpu:
            t = time.perf_counter()
            trainer.train()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            seconds = time.perf_counter() - t
    return {"rate": args.steps * args.batch_size * args.grad_accum / seconds, "gpu": gpu.mean,
            "rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}


def in_child(source: str, args, *settings) -> dict:
    """run_arm in a fresh spawned process; a killed child (out of memory) reads as None."""
    import concurrent.futures
    import multiprocessing

    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        try:
            return pool.submit(run_arm, source, args, *settings).result()
        except concurrent.futures.process.BrokenProcessPool:
            return None


def main() -> int:
    from hmde.pretraining.pairs import read_pairs
    from hmde.pretraining.prepared import prepare_units

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("pairs")
    p.add_argument("--model", default="hmde-mini", help="an hmde model, or labse-shape (random BERT-base LaBSE)")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--grad-accum", type=int, default=8)
    p.add_argument("--workers", type=int, default=0, help="also run the cached arm with this many loader workers")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lower-trainable", default=None, metavar="PARTS,...",
                   help="compare these choices of trainable lower-encoder parts instead (e.g. all,no-embeddings,top-4)")
    args = p.parse_args()
    source = model_source(args.model)
    pairs, docs, _ = read_pairs(args.pairs)
    t = time.perf_counter()
    model = load_model(source, "cpu", args.seed, args.model == "labse-shape")
    prepared = prepare_units(args.pairs, docs, model, model.config.max_sentences, show_progress=False)
    del model  # each arm loads its own
    print(f"units cache: {'built' if prepared.built else 'read'} in {time.perf_counter() - t:.1f} s "
          f"({len(prepared.units)} documents) -> {prepared.path}")
    # arm: (units cache, gradient checkpointing, sparse embedding gradients, loader workers)
    arms = {"before": (False, True, False, 0), "cached": (True, True, True, 0),
            "cached, dense embeddings": (True, True, False, 0), "cached, no checkpointing": (True, False, True, 0)}
    if args.workers:
        arms[f"cached, {args.workers} workers"] = (True, True, True, args.workers)
    if args.lower_trainable:
        arms = {f"lower {spec}": (True, False, True, 0, spec) for spec in args.lower_trainable.split(",")}
    base_arm = next(iter(arms))
    rates: dict[str, list[float]] = {a: [] for a in arms}
    print(f"{args.model} on {args.device}, {torch.get_num_threads()} threads; {args.steps} steps of "
          f"{args.batch_size} x {args.grad_accum} pairs per arm and round")
    for r in range(args.rounds):
        row = []
        for arm, settings in arms.items():
            result = in_child(source, args, *settings)
            if result is None:
                rates[arm].append(float("nan"))
                row.append(f"{arm}: killed (out of memory?)")
                continue
            rates[arm].append(result["rate"])
            row.append(f"{arm} {result['rate']:.3f} pairs/s, peak RSS {result['rss_gb']:.1f} GB"
                       + (f", GPU {result['gpu']:.0f}%" if result["gpu"] is not None else ""))
        base_rate = rates[base_arm][-1]
        print(f"round {r + 1}: " + "; ".join(row) + " | ratios: " +
              ", ".join(f"{a} {rates[a][-1] / base_rate:.2f}x" for a in arms if a != base_arm), flush=True)
    for arm in arms:
        ok = [x for x in rates[arm] if x == x]  # rounds whose process was not killed
        ratios = [x / y for x, y in zip(rates[arm], rates[base_arm]) if x == x and y == y]
        base = [x for x in rates[base_arm] if x == x]
        if not ok:
            print(f"{arm}: killed in every round")
            continue
        print(f"{arm}: best {max(ok):.3f} pairs/s, median {statistics.median(ok):.3f}" + (
            f"; vs {base_arm} best/best {max(ok) / max(base):.2f}x, per-round median {statistics.median(ratios):.2f}x"
            if base and ratios else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
