"""Memory and latency of a multi-vector index (`hmde index build --multi-vector`) against a single-vector one.

Builds real hmde indexes with DocumentIndex.write_batches from synthetic vectors (documents
of --sentences-per-doc sentences, 512-d like USE-m; each sentence a noisy copy of its
document's topic centre, so neighbourhoods exist), then times `DocumentIndex.search` (the
code `hmde search` runs: FAISS, the sentence-to-document table in DuckDB, scoring, and the
evidence of every hit), single queries, k=10. Prints files on disk, the process's peak RSS
after opening and searching, and p50/p99 latency for: the document vectors alone, the
multi-vector index scored by the best sentence, and by the best sentence plus 0.5 x the
document vector. Not a test: run

    python benchmarks/multi_vector_search.py --sentences 1000000 --queries 200

Each size runs in its own process (peak RSS is per process).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def build(path: Path, sentences: int, per_doc: int, dim: int, multi_vector: bool, seed: int = 0,
          index_type: str = "flat") -> float:
    from hmde.index.store import DocumentBatch, DocumentIndex, IndexMeta

    rng = np.random.default_rng(seed)
    docs = sentences // per_doc
    centres = unit(rng.standard_normal((1000, dim)).astype(np.float32))
    meta = IndexMeta(model="synthetic", model_sha256=None, dim=dim, method="hmde", index_type=index_type, count=0,
                     multi_vector=multi_vector)

    def batches(chunk: int = 5000):
        for start in range(0, docs, chunk):
            n = min(chunk, docs - start)
            topic = centres[rng.integers(0, len(centres), n)]
            sents = unit(np.repeat(topic, per_doc, axis=0) + 0.8 * rng.standard_normal((n * per_doc, dim)) / np.sqrt(dim) * 8)
            sents = sents.astype(np.float32).reshape(n, per_doc, dim)
            yield DocumentBatch([f"d{start + i}" for i in range(n)], ["eng"] * n, [f"document {start + i}" for i in range(n)],
                                sents.mean(1), [[f"sentence {j}" for j in range(per_doc)]] * n, list(sents))

    t = time.perf_counter()
    DocumentIndex.write_batches(path, meta, batches()).close()
    return time.perf_counter() - t


def measure(args) -> dict:
    from hmde.index.store import DocumentIndex

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "index"
        seconds = build(path, args.sentences, args.per_doc, args.dim, args.mode != "single", index_type=args.type)
        files = {p.name: round(p.stat().st_size / 2**20, 1) for p in path.iterdir() if p.is_file()}
        rng = np.random.default_rng(1)
        queries = unit(rng.standard_normal((args.queries, args.dim)).astype(np.float32))
        index = DocumentIndex.open(path)
        kwargs = {"single": {"multi_vector": False}, "best": {"multi_vector": True},
                  "best+doc": {"multi_vector": True, "doc_weight": 0.5}}[args.mode]
        index.search(queries[:2], 10, **kwargs)  # warm-up: the sentence table is read once
        times = []
        for q in queries:
            t = time.perf_counter()
            index.search(q[None], 10, **kwargs)
            times.append((time.perf_counter() - t) * 1000)
        index.close()
    return {"mode": args.mode, "type": args.type, "sentences": args.sentences, "build_s": round(seconds, 1), "files_mb": files,
            "p50_ms": round(float(np.percentile(times, 50)), 2), "p99_ms": round(float(np.percentile(times, 99)), 2),
            "peak_rss_mb": round(rss_mb())}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sentences", type=int, nargs="+", default=[100_000, 1_000_000])
    p.add_argument("--per-doc", type=int, default=20)
    p.add_argument("--dim", type=int, default=512)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--type", choices=["flat", "hnsw"], default="flat", help="FAISS index of documents and sentences")
    p.add_argument("--mode", choices=["single", "best", "best+doc"], help="(internal: one measurement)")
    args = p.parse_args()
    if args.mode:
        args.sentences = args.sentences[0]
        print(json.dumps(measure(args)))
        return 0
    for n in args.sentences:
        for mode in ("single", "best", "best+doc"):
            out = subprocess.run([sys.executable, __file__, "--mode", mode, "--sentences", str(n), "--per-doc",
                                  str(args.per_doc), "--dim", str(args.dim), "--queries", str(args.queries),
                                  "--type", args.type],
                                 check=True, capture_output=True, text=True).stdout
            print(out.strip().splitlines()[-1], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
