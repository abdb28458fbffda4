"""What hmde's ranking costs against the FAISS searches a user would run instead, side by side in one run (issue 96).

Synthetic 384-d sentence vectors (benchmarks/multi_vector_search.py's generator, 16 a document, half the documents
``eng`` and half ``deu``: the language subspace and the query-language calibration on, a new index's defaults), one
flat multi-vector index per size. Per single query, p50 in ms, by thread count (FAISS's OpenMP and the numeric
libraries', through threadpoolctl), idle and busy (``--busy N``: N processes spinning matrix products beside it),
the searches taken in turn for each query (three passes over the queries):
- hmde's ranking alone (``query_vectors``): calibrated (``query_langs=["en"]``) and without a query language;
- FAISS over the same sentence vectors as the index keeps them (k = the candidates hmde's ranking asks for): the
  floor of a best-sentence ranking (a flat index; ``--sentence-dtype float16``: its fp16 codes);
- FAISS flat over the sentence vectors as float32 (k the same), what a user builds over them instead (the same
  search as the one before where the index keeps float32);
- FAISS flat over the document vectors (k=10): what a user builds instead of a sentence ranking.

    python benchmarks/ranking_cost.py --sentences 50000 1000000 --threads 1 2 --busy 0 2
"""

from __future__ import annotations

import argparse
import multiprocessing
import shutil
import sys
import tempfile
import time
from pathlib import Path

import hmde  # noqa: F401  (before numpy, as the command line has it: OpenBLAS's idle threads sleep, hmde.ground.idle_threads)
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def spin(stop) -> None:
    a = np.random.default_rng(0).standard_normal((400, 400)).astype(np.float32)
    while not stop.is_set():
        a = np.tanh(a @ a)


def build(path: Path, sentences: int, dim: int = 384, sentence_dtype: str = "float32") -> None:
    import multi_vector_search as mvs

    from hmde.index.build import write_batches
    from hmde.index.builder import IndexSettings, new_meta
    from hmde.index.store import DocumentBatch

    meta = new_meta(IndexSettings(index_type="flat", multi_vector=True, sentence_dtype=sentence_dtype), "synthetic",
                    None, dim, "mean", str(path))

    def batches():
        for start, sents in mvs.generated(sentences // 16, 16, dim):
            n = len(sents)
            yield DocumentBatch([f"d{start + i}" for i in range(n)], [("eng", "deu")[(start + i) % 2] for i in range(n)],
                                [""] * n, sents.mean(1), [[f"s{j}" for j in range(16)]] * n, list(sents))

    write_batches(str(path), meta, batches(), add=False).close()


def p50s(calls: dict, queries, rounds: int = 3) -> dict:
    """Each call's p50 ms over ``queries``, the calls taken in turn for every query (``rounds`` passes), so that a
    varying load weighs on each alike (measured one after another, a busy run's ratio swung from 1.0x to 1.9x)."""
    times = {name: [] for name in calls}
    for _ in range(rounds):
        for v in queries:
            for name, call in calls.items():
                began = time.perf_counter()
                call(v[None])
                times[name].append((time.perf_counter() - began) * 1000)
    return {name: float(np.percentile(t, 50)) for name, t in times.items()}


def measure(path: Path, threads: int, queries: np.ndarray) -> dict:
    import faiss
    from threadpoolctl import threadpool_limits

    from hmde.index.ranking import SENTENCE_POOL
    from hmde.index.store import DocumentIndex

    index = DocumentIndex.open(str(path))
    sentences = index.sentence_index  # the index's own: flat float32, or fp16 codes of float16 sentences
    wide = None
    if not isinstance(sentences, faiss.IndexFlat):  # what a user builds instead: float32 vectors in IndexFlatIP
        wide = faiss.IndexFlatIP(index.meta.dim)
        for start in range(0, sentences.ntotal, 1 << 16):
            wide.add(sentences.reconstruct_n(start, min(1 << 16, sentences.ntotal - start)))
    documents = faiss.IndexFlatIP(index.meta.dim)
    documents.add(np.asarray(index.document_vectors(np.arange(index.meta.count)), np.float32))
    k = min(SENTENCE_POOL, sentences.ntotal)  # the candidates a flat index's ranking asks FAISS for
    faiss.omp_set_num_threads(threads)
    calls = {"hmde, calibrated": lambda v: index.search(v, 10, query_langs=["en"]),
             "hmde, no query language": lambda v: index.search(v, 10),
             "FAISS, the index's sentences": lambda v: sentences.search(v, k),
             "FAISS flat float32, sentences": lambda v: (wide or sentences).search(v, k),
             "FAISS flat, documents (k=10)": lambda v: documents.search(v, 10)}
    if wide is None:  # float32 sentences: the index's own FAISS index is that flat one
        del calls["FAISS flat float32, sentences"]
    with threadpool_limits(threads):
        index.search(queries[:1], 10, query_langs=["en"])
        out = p50s(calls, queries)
    out.setdefault("FAISS flat float32, sentences", out["FAISS, the index's sentences"])
    index.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, nargs="+", default=[50_000, 1_000_000])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--busy", type=int, nargs="+", default=[0, 2])
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--sentence-dtype", choices=["float32", "float16"], default="float32",
                        help="how the index stores its sentence vectors (float16: FAISS over them is its fp16 codes)")
    args = parser.parse_args()
    import multi_vector_search as mvs

    queries = mvs.queries(args.queries, 384).astype(np.float32)
    work = Path(tempfile.mkdtemp(prefix="hmde-ranking-cost-"))
    print("| sentences | threads | load | hmde, calibrated | hmde, no query language | FAISS, the index's sentences | "
          "FAISS flat float32, sentences | FAISS flat, documents | hmde / FAISS, the index's | "
          "hmde / FAISS flat float32 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    try:
        for size in args.sentences:
            run_size(work / f"idx-{size}", size, args, queries)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # its own temporary folder: the 10M index is 15 GB


def run_size(path: Path, size: int, args, queries: np.ndarray) -> None:
    """One size's rows of the table: its index built, then each load and thread count measured."""
    build(path, size, sentence_dtype=args.sentence_dtype)
    for busy in args.busy:
        stop = multiprocessing.Event()
        spinners = [multiprocessing.Process(target=spin, args=(stop,), daemon=True) for _ in range(busy)]
        for s in spinners:
            s.start()
        try:
            for threads in args.threads:
                got = measure(path, threads, queries)
                mine, plain, own, wide, documents = (got[name] for name in (
                    "hmde, calibrated", "hmde, no query language", "FAISS, the index's sentences",
                    "FAISS flat float32, sentences", "FAISS flat, documents (k=10)"))
                print(f"| {size:,} | {threads} | {'idle' if not busy else f'{busy} busy'} | " +
                      " | ".join(f"{v:.2f}" for v in (mine, plain, own, wide, documents)) +
                      f" | {mine / own:.2f}x | {mine / wide:.2f}x |", flush=True)
        finally:
            stop.set()
            for s in spinners:
                s.join()


if __name__ == "__main__":
    main()
