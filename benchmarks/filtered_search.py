"""What a metadata filter costs a search (issue 61): the same queries unfiltered and with filters that keep 1% and
50% of the documents, side by side in one process, on an hmde multi-vector index built by the code `hmde index
build` runs (``hmde.index.build.write_batches``) from synthetic 384-d sentences (benchmarks/multi_vector_search.py's
generator: 16 sentences a document, noisy copies of 1,000 topics) whose documents carry metadata
``{"bucket": i % 100, "section": ...}``.

A filter is parsed, its rows found by DuckDB (``json_extract`` over the documents table) and handed to FAISS as an
ID selector of the matching documents' sentences: each search pays that, then searches only those sentences. Each
row's recall@10 is against brute force over the matching documents. Not a test:

    python benchmarks/filtered_search.py --sentences 100000 1000000 --queries 100
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from multi_vector_search import generated, queries, unit  # noqa: E402

FILTERS = {"no filter": None, "1% (bucket == 7)": "bucket == 7",
           "50% (bucket < 50 and section != \"x\")": 'bucket < 50 and section != "x"'}


def build(path: Path, sentences: int, per_doc: int, dim: int, kind: str) -> float:
    from hmde.index.build import write_batches
    from hmde.index.store import DocumentBatch, IndexMeta

    meta = IndexMeta(model="synthetic", model_sha256=None, dim=dim, method="mean", index_type=kind, count=0,
                     multi_vector=True, sentence_vectors="lower", ivf_lists=1024 if kind == "ivfpq" else 0,
                     pq_m=48 if kind == "ivfpq" else 0)

    def batches():
        for start, sents in generated(sentences // per_doc, per_doc, dim):
            n = len(sents)
            yield DocumentBatch([f"d{start + i}" for i in range(n)], ["eng"] * n, [""] * n, sents.mean(1),
                                [[f"s{j}" for j in range(per_doc)]] * n, list(sents),
                                [{"bucket": (start + i) % 100, "section": ["a", "b", "c"][(start + i) % 3]}
                                 for i in range(n)])

    started = time.perf_counter()
    write_batches(path, meta, batches(), add=False).close()
    return time.perf_counter() - started


def exact(sentences: int, per_doc: int, dim: int, q: np.ndarray, keep) -> list[list[int]]:
    """Brute force over the matching documents: best sentence + 0.5 x the document's mean vector."""
    from hmde.index.multivector import DEFAULT_DOC_WEIGHT

    best = np.full((len(q), 10), -np.inf, np.float32)
    ids = np.zeros((len(q), 10), np.int64)
    for start, sents in generated(sentences // per_doc, per_doc, dim):
        n = len(sents)
        rows = np.arange(start, start + n)
        mask = keep(rows)
        sims = (sents.reshape(-1, dim) @ q.T).reshape(n, per_doc, len(q)).max(1).T
        scores = np.where(mask[None, :], sims + DEFAULT_DOC_WEIGHT * (q @ unit(sents.mean(1)).T), -np.inf)
        both = np.concatenate([best, scores], 1)
        both_ids = np.concatenate([ids, np.broadcast_to(rows, (len(q), n))], 1)
        top = np.argsort(-both, axis=1)[:, :10]
        best, ids = np.take_along_axis(both, top, 1), np.take_along_axis(both_ids, top, 1)
    return ids.tolist()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, nargs="+", default=[100_000])
    parser.add_argument("--per-doc", type=int, default=16)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--types", default="flat")
    args = parser.parse_args()
    from hmde.index.store import DocumentIndex

    keeps = {None: lambda rows: np.ones(len(rows), bool), "bucket == 7": lambda rows: rows % 100 == 7,
             'bucket < 50 and section != "x"': lambda rows: rows % 100 < 50}
    q = queries(args.queries, args.dim)
    print("| sentences | index | filter | p50 ms | p99 ms | recall@10 |")
    print("|---|---|---|---|---|---|")
    for n in args.sentences:
        for kind in args.types.split(","):
            with tempfile.TemporaryDirectory(prefix="hmde-filtered-") as work:
                path = Path(work) / "idx"
                build(path, n, args.per_doc, args.dim, kind)
                index = DocumentIndex.open(path)
                index.search(q[:2], 10)  # warm-up: the sentence table is read once
                for name, expression in FILTERS.items():
                    times, found = [], []
                    for v in q:
                        started = time.perf_counter()
                        hits = index.search(v[None], 10, filter=expression)[0]
                        times.append((time.perf_counter() - started) * 1000)
                        found.append([int(h.doc_id[1:]) for h in hits])
                    truth = exact(n, args.per_doc, args.dim, q, keeps[expression])
                    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(found, truth)])
                    print(f"| {n:,} | {kind} | {name} | {np.percentile(times, 50):.1f} | {np.percentile(times, 99):.1f} "
                          f"| {recall:.3f} |", flush=True)
                index.close()


if __name__ == "__main__":
    main()
