"""bf16 on CPUs (and GPUs): hmde against sentence-transformers, best precision against best precision.

The same sentences (Bible verses from ../shared, else a built-in sample) go through a
randomly initialised LaBSE-sized model (BERT-base shape, CLS -> Dense -> Normalize):

  hmde fp32            SentenceEncoder.encode
  hmde bf16            encode(autocast_dtype=bfloat16): a bf16 copy of the weights
  hmde bf16 autocast   the earlier path: autocast over the fp32 weights
  ST fp32              SentenceTransformer.encode
  ST bf16 weights      the same model with .to(bfloat16)

in rounds that alternate the systems, so all see the same machine load. Printed: the best
sentences/s of each, the per-round ratio hmde bf16 / ST bf16 (median and range), cosine of
the bf16 vectors to fp32, and the share of this machine's bf16 matmul peak that hmde bf16
reaches (FLOPs counted from the layer shapes). Not a test: timings depend on the machine.

    python benchmarks/bf16_speed.py --sentences 512 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
from encode_speed import load_documents, matmul_peak, sync  # noqa: E402


def flops_per_sentence(lengths: list[int], layers: int, hidden: int, ffn: int) -> float:
    """Multiply-adds x 2 of a BERT encoder over sentences of these token lengths (attention included)."""
    total = 0.0
    for n in lengths:
        total += layers * (2 * n * (4 * hidden * hidden + 2 * hidden * ffn) + 4 * n * n * hidden)
    return total / len(lengths)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sentences", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--st-batch-size", type=int, default=32)
    args = parser.parse_args()

    from sentence_transformers import SentenceTransformer

    from hmde import SentenceEncoder
    from hmde.random_models import build_random_sentence_encoder

    sentences = [s for doc in load_documents(max(1, args.sentences // 16) + 64) for s in doc][: args.sentences]
    with tempfile.TemporaryDirectory() as tmp:
        path = build_random_sentence_encoder(Path(tmp) / "labse", sentences * 3, vocab_size=8000, style="labse",
                                             num_layers=args.layers, hidden_size=args.hidden,
                                             num_heads=args.hidden // 64, intermediate_size=4 * args.hidden)
        hmde = SentenceEncoder.load(str(path), device=args.device)
        st = SentenceTransformer(str(path), device=args.device)
        st_bf16 = SentenceTransformer(str(path), device=args.device).to(torch.bfloat16)

        def old_path(texts):  # autocast over the fp32 weights (hmde before the bf16 copy)
            copy = hmde.low_precision_copy
            hmde.low_precision_copy = lambda dtype: None
            try:
                return hmde.encode(texts, autocast_dtype=torch.bfloat16)
            finally:
                del hmde.low_precision_copy
                assert hmde.low_precision_copy == copy

        systems = {
            "hmde fp32": lambda t: hmde.encode(t),
            "hmde bf16": lambda t: hmde.encode(t, autocast_dtype=torch.bfloat16),
            "hmde bf16 autocast (before)": old_path,
            "ST fp32": lambda t: st.encode(t, batch_size=args.st_batch_size, convert_to_numpy=True),
            "ST bf16 weights": lambda t: st_bf16.encode(t, batch_size=args.st_batch_size, convert_to_numpy=True).astype(
                np.float32),
        }
        for run in systems.values():  # warm-up: allocator, kernels, the bf16 copy
            run(sentences[:32])
        times: dict[str, list[float]] = {k: [] for k in systems}
        vectors = {}
        for _ in range(args.rounds):
            for name, run in systems.items():
                sync(args.device)
                t0 = time.perf_counter()
                vectors[name] = np.asarray(run(sentences), dtype=np.float32)
                sync(args.device)
                times[name].append(time.perf_counter() - t0)
    n = len(sentences)
    for name, ts in times.items():
        print(f"{name:30s} {n / min(ts):8.1f} sentences/s (best of {len(ts)})")
    ratios = [s / h for h, s in zip(times["hmde bf16"], times["ST bf16 weights"])]
    print(f"hmde bf16 / ST bf16 weights, per round: median {statistics.median(ratios):.2f}x "
          f"(range {min(ratios):.2f}-{max(ratios):.2f}x); best / best {min(times['ST bf16 weights']) / min(times['hmde bf16']):.2f}x")
    print(f"hmde bf16 / hmde bf16 autocast (before): {min(times['hmde bf16 autocast (before)']) / min(times['hmde bf16']):.2f}x")
    ref = vectors["hmde fp32"]
    for name in ("hmde bf16", "ST bf16 weights"):
        v = vectors[name]
        cos = (ref * v).sum(1) / np.linalg.norm(ref, axis=1) / np.linalg.norm(v, axis=1)
        print(f"cosine {name} to hmde fp32: min {cos.min():.5f}, mean {cos.mean():.5f}")
    lengths = [len(x) for x in hmde.token_ids(sentences)]
    peak = matmul_peak(args.device, dtype=torch.bfloat16)
    reached = flops_per_sentence(lengths, args.layers, args.hidden, 4 * args.hidden) * n / min(times["hmde bf16"])
    print(f"hmde bf16 reaches {reached / 1e9:.1f} GFLOP/s = {100 * reached / peak:.0f}% of this machine's bf16 "
          f"matmul peak ({peak / 1e9:.1f} GFLOP/s)")


if __name__ == "__main__":
    main()
