"""ONNX Runtime (fp32 and dynamic int8) vs PyTorch on real documents: speed-up and cosine.

Exports a model (default: the bundled hmde-mini) with `hmde.export.onnx.export_onnx`, then
encodes the same Bible chapters from ../shared/data (English and Spanish, first N chapters)
with PyTorch, ONNX fp32 and ONNX int8 on the CPU, and prints documents/s, the speed-ups
over PyTorch and the mean (and minimum) cosine similarity between the PyTorch vectors and
each exported model's. Targets (issue 7): mean cosine >= 0.99, >= 1.5x faster on CPU.
Not a test: timings depend on the machine.

    python benchmarks/onnx_speed.py --docs 64 --threads 2
"""

from __future__ import annotations

import argparse
import gzip
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "bible"


def load_chapters(n: int) -> tuple[list[list[str]], list[str]]:
    docs, langs = [], []
    for lang in ("eng", "spa"):
        path = SHARED / f"{lang}.jsonl.gz"
        if not path.exists():
            raise SystemExit(f"needs the shared data: {path} is missing")
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for i, line in enumerate(f):
                if i == n // 2:
                    break
                docs.append(json.loads(line)["verses"][:32])
                langs.append(lang)
    return docs, langs


def timed(fn, repeats: int) -> tuple[np.ndarray, float]:
    fn()  # warm-up (allocations, graph optimisation)
    t0 = time.perf_counter()
    for _ in range(repeats):
        out = fn()
    return out, (time.perf_counter() - t0) / repeats


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=1, keepdims=True).clip(1e-12)
    b = b / np.linalg.norm(b, axis=1, keepdims=True).clip(1e-12)
    return (a * b).sum(1)


def main() -> None:
    from hmde import HierarchicalEncoder
    from hmde.export.onnx import OnnxHierarchicalEncoder, export_onnx

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="hmde-mini")
    parser.add_argument("--docs", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    docs, langs = load_chapters(args.docs)
    sentences = sum(len(d) for d in docs)
    model = HierarchicalEncoder.from_pretrained(args.model, device="cpu")
    if next(model.parameters()).dtype != torch.float32:
        model = model.float()
    with tempfile.TemporaryDirectory() as tmp:
        export_onnx(model, tmp, int8=True)
        runs = {"pytorch": lambda: model.encode_documents(docs, langs=langs)}
        for name, int8 in (("onnx fp32", False), ("onnx int8", True)):
            onnx_model = OnnxHierarchicalEncoder(tmp, int8=int8, threads=args.threads)
            runs[name] = (lambda m: lambda: m.encode_documents(docs, langs))(onnx_model)
        results = {name: timed(fn, args.repeats) for name, fn in runs.items()}
    base_vectors, base_time = results["pytorch"]
    print(f"{len(docs)} Bible chapters (eng+spa), {sentences} sentences, {args.threads} threads, model {args.model}")
    for name, (vectors, seconds) in results.items():
        cos = cosine(base_vectors, vectors)
        print(f"  {name:10s} {len(docs) / seconds:8.1f} docs/s  speed-up {base_time / seconds:5.2f}x  "
              f"cosine to pytorch mean {cos.mean():.5f} min {cos.min():.5f}")


if __name__ == "__main__":
    main()
