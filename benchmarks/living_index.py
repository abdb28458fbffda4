"""The living index (issue 53): what a write costs, side by side in one run.

``--throughput``: real documents (XQuAD's 240 paragraphs, 12 languages taken in turn, from ../shared/data) with
a real model (default hmde-e5): one `index build` of all of them (``hmde.Index.create``), then the same
documents upserted onto it (each replacing its own first version) in calls of 1, 10 and 100 documents. Prints
documents/s of each and the ratio to the build: the embedding is the same, the difference is what each commit
costs (every commit writes a new version of the folder).

``--delete``: a synthetic multi-vector IVF-PQ index of --sentences sentence vectors (384-d, the generator of
benchmarks/multi_vector_search.py); deletes 1% of its documents at random in one call, then compacts. Prints
the seconds of each, the search p50/p99 (single queries, k=10, default fusion) before the delete, after it
(masked rows) and after compact, and the overlap of each ranking with the one before (less the deleted).

    python benchmarks/living_index.py --throughput --data ../shared/data
    python benchmarks/living_index.py --delete --sentences 1000000
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))


def xquad_paragraphs(data: Path) -> list[dict]:
    langs = ["en", "de", "es", "el", "ru", "tr", "ar", "vi", "th", "zh", "hi", "ro"]
    by_lang = {}
    for lang in langs:
        with open(data / "eval" / "xquad" / f"xquad.{lang}.json", encoding="utf-8") as f:
            by_lang[lang] = [p["context"] for article in json.load(f)["data"] for p in article["paragraphs"]]
    n = len(by_lang["en"])
    return [{"doc_id": f"p{i}", "text": by_lang[langs[i % len(langs)]][i], "lang": langs[i % len(langs)]}
            for i in range(n)]


def throughput(args) -> None:
    from hmde.index.search import Index

    docs = xquad_paragraphs(Path(args.data))
    work = Path(tempfile.mkdtemp(prefix="living-"))
    try:
        Index.create(str(work / "warm"), docs[:20], model=args.model, device="cpu").close()  # the model loaded, warm
        t = time.perf_counter()
        index = Index.create(str(work / "idx"), docs, model=args.model, device="cpu")
        build_s = time.perf_counter() - t
        rows = [("index build (one commit)", len(docs), build_s)]
        for size in (100, 10, 1):
            t = time.perf_counter()
            done = 0
            for start in range(0, len(docs) if size > 1 else args.single, size):
                done += index.upsert(docs[start:start + size])
            rows.append((f"upsert, {size} per call", done, time.perf_counter() - t))
        info = index.info()
        index.close()
        print(f"{len(docs)} XQuAD paragraphs, {args.model}, 2 cores; the index ends with {info['documents']} live and "
              f"{info['deleted_documents']} masked documents")
        print("| write | documents | seconds | documents/s | against the build |\n|---|---|---|---|---|")
        base = len(docs) / build_s
        for name, n, s in rows:
            print(f"| {name} | {n} | {s:.1f} | {n / s:.2f} | {n / s / base:.2f} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def timed_search(index, q, **options):
    times, found = [], []
    index.search(q[:2], 10, **options)
    for v in q:
        t = time.perf_counter()
        hits = index.search(v[None], 10, **options)[0]
        times.append((time.perf_counter() - t) * 1000)
        found.append([h.doc_id for h in hits])
    return float(np.percentile(times, 50)), float(np.percentile(times, 99)), found


def delete(args) -> None:
    import multi_vector_search as mvs

    from hmde.index.mutations import compact_index, delete_documents
    from hmde.index.store import DocumentIndex

    work = Path(args.work or tempfile.mkdtemp(prefix="living-"))
    path = work / f"ivfpq-{args.sentences}"
    build_args = argparse.Namespace(sentences=args.sentences, per_doc=16, dim=384, type="ivfpq", ivf_lists=1024,
                                    pq_m=48, path=str(path))
    try:
        if not (path / "index.json").exists():
            built = mvs.build(build_args)
            print(f"built {args.sentences:,} sentences in {built['build_s']} s")
        q = mvs.queries(args.queries, 384)
        docs = args.sentences // 16
        rng = np.random.default_rng(0)
        gone = [f"d{i}" for i in rng.choice(docs, size=docs // 100, replace=False)]
        rows = []
        with DocumentIndex.open(path) as index:
            p50, p99, before = timed_search(index, q)
        rows.append(("before", "", p50, p99, 1.0))
        t = time.perf_counter()
        n = delete_documents(path, gone)
        delete_s = time.perf_counter() - t
        gone_set = set(gone)
        expected = [[d for d in hits if d not in gone_set] for hits in before]

        def overlap(found):
            return sum(len(set(f) & set(e)) for f, e in zip(found, expected)) / max(1, sum(len(e) for e in expected))

        with DocumentIndex.open(path) as index:
            p50, p99, after = timed_search(index, q)
            assert not any(d in gone_set for hits in after for d in hits)
        rows.append((f"after deleting {n:,} documents (masked)", f"{delete_s:.2f}", p50, p99, overlap(after)))
        t = time.perf_counter()
        compact_index(path)
        compact_s = time.perf_counter() - t
        with DocumentIndex.open(path) as index:
            p50, p99, compacted = timed_search(index, q)
        rows.append(("after compact", f"{compact_s:.1f}", p50, p99, overlap(compacted)))
        print(f"IVF-PQ multi-vector index, {args.sentences:,} synthetic 384-d sentences ({docs:,} documents), "
              f"{args.queries} single queries, 2 cores, warm page cache")
        print("| state | write s | p50 ms | p99 ms | top-10 overlap with before (less the deleted) |\n|---|---|---|---|---|")
        for name, s, a, b, o in rows:
            print(f"| {name} | {s} | {a:.1f} | {b:.1f} | {o:.3f} |")
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--throughput", action="store_true")
    p.add_argument("--delete", action="store_true")
    p.add_argument("--data", default="../shared/data")
    p.add_argument("--model", default="hmde-e5")
    p.add_argument("--single", type=int, default=60, help="documents upserted one per call")
    p.add_argument("--sentences", type=int, default=1_000_000)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--work", help="keep the synthetic index here (and reuse it)")
    args = p.parse_args()
    if args.throughput:
        throughput(args)
    if args.delete:
        delete(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
