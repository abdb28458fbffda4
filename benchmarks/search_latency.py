"""Search latency (p50/p99), memory and HNSW recall@10 against exact search.

Random unit vectors stand in for document vectors (dimension 768, LaBSE's); queries
are random too. Prints one row per (collection size, index type). Not a test: run

    python benchmarks/search_latency.py --sizes 100000 1000000 --queries 200

Measured here (2 CPU cores, 100k vectors, 200 single queries, k=10): exact p50 37 ms,
p99 81 ms, 293 MB; HNSW (M=32, efConstruction 80, efSearch 128) build 128 s, p50 3.3 ms,
p99 4.2 ms, 319 MB, recall@10 0.19. Uniform random 768-d vectors have no neighbourhood
structure, the worst case for graph search; real document vectors cluster, so expect far
higher recall on them, and raise efSearch where recall matters.
"""

from __future__ import annotations

import argparse
import resource
import time

import faiss
import numpy as np


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build(kind: str, vectors: np.ndarray, m: int, ef_construction: int):
    dim = vectors.shape[1]
    if kind == "exact":
        index = faiss.IndexFlatIP(dim)
    else:
        index = faiss.IndexHNSWFlat(dim, m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = ef_construction
        index.hnsw.efSearch = 128
    t0 = time.perf_counter()
    index.add(vectors)
    return index, time.perf_counter() - t0


def latencies(index, queries: np.ndarray, k: int) -> np.ndarray:
    out = []
    for q in queries:
        t0 = time.perf_counter()
        index.search(q[None], k)
        out.append((time.perf_counter() - t0) * 1000)
    return np.array(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--hnsw-m", type=int, default=32)
    ap.add_argument("--ef-construction", type=int, default=80)
    ap.add_argument("--threads", type=int, default=0, help="FAISS threads (0: library default)")
    args = ap.parse_args()
    if args.threads:
        faiss.omp_set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    print("size\tindex\tbuild_s\tp50_ms\tp99_ms\tindex_mb\trecall@10")
    for n in args.sizes:
        vectors = unit(rng.standard_normal((n, args.dim), dtype=np.float32))
        queries = unit(rng.standard_normal((args.queries, args.dim), dtype=np.float32))
        exact, t_exact = build("exact", vectors, args.hnsw_m, args.ef_construction)
        truth = exact.search(queries, args.k)[1]
        for kind in ("exact", "hnsw"):
            index, t_build = (exact, t_exact) if kind == "exact" else build(kind, vectors, args.hnsw_m, args.ef_construction)
            lat = latencies(index, queries, args.k)
            found = index.search(queries, args.k)[1]
            recall = np.mean([len(set(f) & set(t)) / args.k for f, t in zip(found, truth)])
            size_mb = faiss.serialize_index(index).nbytes / 2**20
            print(f"{n}\t{kind}\t{t_build:.1f}\t{np.percentile(lat, 50):.2f}\t{np.percentile(lat, 99):.2f}\t"
                  f"{size_mb:.0f}\t{recall:.3f}", flush=True)
        print(f"# peak resident memory of this process so far: {rss_mb():.0f} MB", flush=True)


if __name__ == "__main__":
    main()
