"""Training throughput of hmde train's joint stage (lower encoder trained): pairs per second, side by side.

Arms, each on the same pairs and a fresh copy of the same model, in alternating rounds:
- ``in-step``: segmentation and tokenisation inside every step (hmde before the units cache),
  gradient checkpointing on (the default);
- ``cached``: units and token ids from PAIRS.units-<key>.parquet, made once (its one-time
  cost is printed), lower-encoder batches planned by the step loader;
- ``cached, no checkpointing``: as cached, without gradient checkpointing (memory for speed);
- ``cached, N workers``: as cached, with N DataLoader workers (``--workers``; on a GPU machine).

Prints per round each arm's pairs/s and its ratio to ``in-step``, then best and median.
On a GPU it also samples utilisation (``nvidia-smi``) during the cached arm. Not a test:

    python benchmarks/train_throughput.py PAIRS.parquet --model hmde-mini --steps 4 --rounds 3
    python benchmarks/train_throughput.py PAIRS.parquet --model labse-shape --steps 2   # random BERT-base shape
"""

from __future__ import annotations

import argparse
import copy
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch


def load_model(name: str, device: str):
    from hmde import HierarchicalEncoder

    if name == "labse-shape":  # LaBSE's shape (BERT-base, CLS -> Dense -> Normalize), random weights
        from hmde.random_models import build_random_sentence_encoder

        folder = Path(tempfile.mkdtemp()) / "labse-shape"
        texts = [f"sentence number {i} about topic {i % 17}" for i in range(400)]
        build_random_sentence_encoder(folder, texts, hidden_size=768, num_layers=12, num_heads=12, vocab_size=4000,
                                      style="labse")
        return HierarchicalEncoder.from_sentence_encoder(str(folder), device=device)
    return HierarchicalEncoder.from_pretrained(name, device=device)


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


def run_arm(base, pairs, docs, prepared, args, checkpointing: bool, workers: int) -> tuple[float, float | None]:
    from hmde.pretraining.trainer import HmdeTrainer, PretrainingConfig

    model = copy.deepcopy(base)
    config = PretrainingConfig(batch_size=args.batch_size, grad_accum=args.grad_accum, lr=1e-5, warmup=0,
                               max_steps=args.steps, save_every=0, log_every=10**9, bf16="off",
                               gradient_checkpointing=checkpointing, loader_workers=workers, seed=args.seed)
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
    return args.steps * args.batch_size * args.grad_accum / seconds, gpu.mean


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
    args = p.parse_args()
    torch.manual_seed(args.seed)
    base = load_model(args.model, args.device)
    pairs, docs, _ = read_pairs(args.pairs)
    t = time.perf_counter()
    prepared = prepare_units(args.pairs, docs, base, base.config.max_sentences, show_progress=False)
    print(f"units cache: {'built' if prepared.built else 'read'} in {time.perf_counter() - t:.1f} s "
          f"({len(prepared.units)} documents) -> {prepared.path}")
    arms = {"in-step": (None, True, 0), "cached": (prepared, True, 0), "cached, no checkpointing": (prepared, False, 0)}
    if args.workers:
        arms[f"cached, {args.workers} workers"] = (prepared, True, args.workers)
    rates: dict[str, list[float]] = {a: [] for a in arms}
    print(f"{args.model} on {args.device}, {torch.get_num_threads()} threads; {args.steps} steps of "
          f"{args.batch_size} x {args.grad_accum} pairs per arm and round")
    for r in range(args.rounds):
        row = []
        for arm, (prep, checkpointing, workers) in arms.items():
            rate, gpu = run_arm(base, pairs, docs, prep, args, checkpointing, workers)
            rates[arm].append(rate)
            row.append(f"{arm} {rate:.2f} pairs/s" + (f" (GPU {gpu:.0f}%)" if gpu is not None else ""))
        base_rate = rates["in-step"][-1]
        print(f"round {r + 1}: " + "; ".join(row) + " | ratios: " +
              ", ".join(f"{a} {rates[a][-1] / base_rate:.2f}x" for a in arms if a != "in-step"), flush=True)
    for arm in arms:
        ratios = [x / y for x, y in zip(rates[arm], rates["in-step"])]
        print(f"{arm}: best {max(rates[arm]):.2f} pairs/s, median {statistics.median(rates[arm]):.2f}; vs in-step "
              f"best/best {max(rates[arm]) / max(rates['in-step']):.2f}x, per-round median {statistics.median(ratios):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
