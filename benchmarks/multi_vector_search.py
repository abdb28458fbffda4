"""Multi-vector indexes at scale: exact (flat) against compressed (IVF-PQ, exact re-scoring), side by side.

Builds real hmde indexes with ``hmde.index.build.write_batches`` (the code `hmde index build` runs, batch
by batch) from synthetic vectors: documents of --per-doc sentences, 384-d like hmde-e5; each sentence a
noisy copy of its document's topic centre, so that neighbourhoods exist. Then times
``DocumentIndex.search`` (FAISS, the sentence-to-document table, scoring, the evidence of every hit)
with the default fusion of `hmde search` (best sentence + 0.25 x document vector), single queries, k=10.

For each size and index type it prints: the build's time and peak RSS (streaming: memory should not
grow with the collection), the files on disk, the search process's peak RSS after opening the index and
answering every query, p50/p99 latency, and recall@10 of the documents against the exact ranking
(every sentence scored, brute force over the same generated vectors, regenerated from the seed so that
no exact index needs to fit in memory). Each step runs in its own process. Not a test: run

    python benchmarks/multi_vector_search.py --sentences 100000 1000000 10000000 --queries 200

``--types flat`` alone reproduces the earlier table; a flat index of 10M 384-d sentences needs 15 GB of
memory, so the default measures flat up to --flat-max sentences.

``--languages 6``: the documents' languages in rotation over six codes and the index built as `hmde index build`
builds one now (``subspace+calibrate``, issue 56); each query is then searched twice in the same process, as
an English query (calibrated) and with no language (``query_langs=None``: the subspace alone), and the first
calibrated search's time (it reads every row's language and the 256 sampled documents once per snapshot) is
printed apart. Recall@10 is the uncalibrated search's against the exact uncalibrated ranking. Measured (stop 61,
2 cores, 100 queries, 16 sentences a document, `--languages 6`):

    sentences  index   p50 / p99 ms, subspace alone   calibrated (English)   first calibrated search
    100,000    flat    24.3 / 40.5                    24.7 / 44.2            79 ms
    1,000,000  flat    104.3 / 126.4                  109.2 / 120.7          154 ms
    1,000,000  ivfpq   10.5 / 26.1                    12.9 / 25.2            76 ms

The calibration costs each query the 256 sampled documents' scores (about 2 ms here, where a query's vector is
given) and each snapshot one read of its rows' languages.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

TOPICS, CHUNK = 1000, 5000  # topic centres; documents per generated batch
LANGUAGES = ["eng", "deu", "ell", "hin", "vie", "rus"]  # --languages: the documents' in rotation


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


DOC_NOISE, SENTENCE_NOISE = 0.8, 0.8  # norms of the noise around a topic (documents) and a document (sentences)


def _noise(rng, rows: int, dim: int, norm: float) -> np.ndarray:
    return rng.standard_normal((rows, dim), dtype=np.float32) * np.float32(norm / np.sqrt(dim))


def generated(docs: int, per_doc: int, dim: int, seed: int = 0):
    """(first document, sentences (n, per_doc, dim)), batch by batch, the same for every caller: a document
    is a noisy copy of one of 1,000 topic centres, its sentences noisy copies of it (a sentence's cosine
    with its document's centre is about 0.8, with its topic's about 0.6, with another topic's about 0)."""
    rng = np.random.default_rng(seed)
    centres = unit(rng.standard_normal((TOPICS, dim)).astype(np.float32))
    for start in range(0, docs, CHUNK):
        n = min(CHUNK, docs - start)
        doc = unit(centres[rng.integers(0, TOPICS, n)] + _noise(rng, n, dim, DOC_NOISE))
        sents = unit(np.repeat(doc, per_doc, axis=0) + _noise(rng, n * per_doc, dim, SENTENCE_NOISE))
        yield start, sents.astype(np.float32).reshape(n, per_doc, dim)


def queries(n: int, dim: int) -> np.ndarray:
    """Queries as far from a topic as a document is (a new document's sentence, in effect)."""
    rng = np.random.default_rng(0)  # the same centres as the documents
    centres = unit(rng.standard_normal((TOPICS, dim)).astype(np.float32))
    rng = np.random.default_rng(1)
    doc = unit(centres[rng.integers(0, TOPICS, n)] + _noise(rng, n, dim, DOC_NOISE))
    return unit(doc + _noise(rng, n, dim, SENTENCE_NOISE))


def build(args) -> dict:
    from hmde.index.build import write_batches
    from hmde.index.store import DocumentBatch, IndexMeta

    docs = args.sentences // args.per_doc
    ivf = args.type == "ivfpq"
    meta = IndexMeta(model="synthetic", model_sha256=None, dim=args.dim, method="mean", index_type=args.type, count=0,
                     multi_vector=True, sentence_vectors="lower", ivf_lists=args.ivf_lists if ivf else 0,
                     pq_m=args.pq_m if ivf else 0, language_debias="subspace+calibrate" if args.languages > 1 else "")

    def batches():
        for start, sents in generated(docs, args.per_doc, args.dim):
            n = len(sents)
            langs = [LANGUAGES[(start + i) % args.languages] for i in range(n)]
            yield DocumentBatch([f"d{start + i}" for i in range(n)], langs, [""] * n, sents.mean(1),
                                [[f"s{j}" for j in range(args.per_doc)]] * n, list(sents))

    t = time.perf_counter()
    write_batches(args.path, meta, batches(), add=False).close()
    files = {p.name: round(p.stat().st_size / 2**20, 1) for p in Path(args.path).iterdir() if p.is_file()}
    return {"build_s": round(time.perf_counter() - t, 1), "build_rss_mb": round(rss_mb()), "files_mb": files}


def search(args) -> dict:
    from hmde.index.store import DocumentIndex

    q = queries(args.queries, args.dim)
    index = DocumentIndex.open(args.path)
    options = {"nprobe": args.nprobe} if args.type == "ivfpq" and args.nprobe else {}
    if args.candidates:
        options["candidates"] = args.candidates
    index.search(q[:2], 10, **options)  # warm-up: the sentence table is read once
    out = {}
    if args.languages > 1:  # the first calibrated search builds what every later one reads (per snapshot)
        t = time.perf_counter()
        index.search(q[:1], 10, query_langs=["en"], **options)
        out["setup_ms"] = round((time.perf_counter() - t) * 1000, 1)
    times, found, calibrated = [], [], []
    for v in q:
        t = time.perf_counter()
        hits = index.search(v[None], 10, **options)[0]
        times.append((time.perf_counter() - t) * 1000)
        found.append([int(h.doc_id[1:]) for h in hits])
        if args.languages > 1:
            t = time.perf_counter()
            index.search(v[None], 10, query_langs=["en"], **options)
            calibrated.append((time.perf_counter() - t) * 1000)
    index.close()
    if calibrated:
        out.update(calibrated_p50_ms=round(float(np.percentile(calibrated, 50)), 1),
                   calibrated_p99_ms=round(float(np.percentile(calibrated, 99)), 1))
    return {"p50_ms": round(float(np.percentile(times, 50)), 1), "p99_ms": round(float(np.percentile(times, 99)), 1),
            "search_rss_mb": round(rss_mb()), "found": found, **out}


def exact(args) -> dict:
    """Every document's exact score (best sentence + the default weight x its mean vector), streamed over the
    batches."""
    from hmde.index.multivector import DEFAULT_DOC_WEIGHT

    q = queries(args.queries, args.dim)
    best = np.full((len(q), 10), -np.inf, np.float32)
    ids = np.zeros((len(q), 10), np.int64)
    for start, sents in generated(args.sentences // args.per_doc, args.per_doc, args.dim):
        n = len(sents)
        sims = (sents.reshape(-1, args.dim) @ q.T).reshape(n, args.per_doc, len(q)).max(1).T  # (Q, n)
        scores = sims + DEFAULT_DOC_WEIGHT * (q @ unit(sents.mean(1)).T)
        both = np.concatenate([best, scores], 1)
        both_ids = np.concatenate([ids, np.broadcast_to(np.arange(start, start + n), (len(q), n))], 1)
        top = np.argsort(-both, axis=1)[:, :10]
        best, ids = np.take_along_axis(both, top, 1), np.take_along_axis(both_ids, top, 1)
    return {"exact": ids.tolist()}


def run_step(step: str, args, n: int, kind: str, path: Path) -> dict:
    out = subprocess.run([sys.executable, __file__, "--step", step, "--sentences", str(n), "--per-doc", str(args.per_doc),
                          "--dim", str(args.dim), "--queries", str(args.queries), "--types", kind, "--path", str(path),
                          "--ivf-lists", str(args.ivf_lists), "--pq-m", str(args.pq_m), "--nprobe", str(args.nprobe),
                          "--candidates", str(args.candidates), "--languages", str(args.languages)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sentences", type=int, nargs="+", default=[100_000, 1_000_000])
    p.add_argument("--per-doc", type=int, default=16)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--types", default="flat,ivfpq")
    p.add_argument("--flat-max", type=int, default=2_000_000, help="largest collection measured with a flat index")
    p.add_argument("--ivf-lists", type=int, default=1024, help="document lists (the sentences get 4 times as many)")
    p.add_argument("--pq-m", type=int, default=48, help="bytes per compressed vector")
    p.add_argument("--nprobe", type=int, default=0, help="lists searched per query (0: the index's default, lists/8)")
    p.add_argument("--candidates", type=int, default=0,
                   help="sentences scored per query (0: the index's default, hmde.index.store.SENTENCE_POOL)")
    p.add_argument("--languages", type=int, default=1, choices=range(1, len(LANGUAGES) + 1), metavar="N",
                   help="documents in N languages in rotation; N > 1: the index calibrates by the query's language, "
                   "and the calibrated search is timed beside the uncalibrated one")
    p.add_argument("--work", default=None, help="folder for the indexes (default: a temporary one)")
    p.add_argument("--keep", action="store_true", help="keep the indexes in --work and reuse those found there "
                   "(so that --candidates and --nprobe can be compared on one 10M build)")
    p.add_argument("--drop-caches", action="store_true", help="empty the page cache before each search (root; "
                   "Linux): every candidate read then comes from the disk, as on a machine whose memory cannot "
                   "hold sentences.npy")
    p.add_argument("--step", choices=["build", "search", "exact"], help="(internal: one step in its own process)")
    p.add_argument("--path", help="(internal)")
    args = p.parse_args()
    if args.step:
        args.sentences, args.type = args.sentences[0], args.types
        print(json.dumps({"build": build, "search": search, "exact": exact}[args.step](args)))
        return 0
    if args.keep and not args.work:
        p.error("--keep needs --work")
    with (contextlib.nullcontext(args.work) if args.keep else tempfile.TemporaryDirectory(dir=args.work)) as tmp:
        extra = " calibrated p50 / p99 ms | first calibrated search ms |" if args.languages > 1 else ""
        print("| sentences | index | build s | build RSS MB | files MB | search RSS MB | p50 ms | p99 ms | recall@10 |"
              + extra)
        print("|---|---|---|---|---|---|---|---|---|" + ("---|---|" if extra else ""))
        for n in args.sentences:
            from hmde.index.multivector import DEFAULT_DOC_WEIGHT

            truth_file = Path(tmp) / f"exact-{n}-{args.queries}-w{DEFAULT_DOC_WEIGHT}.json"
            if args.keep and truth_file.exists():
                truth = json.loads(truth_file.read_text())["exact"]
            else:
                truth = run_step("exact", args, n, "flat", Path(tmp))["exact"]
                if args.keep:
                    truth_file.write_text(json.dumps({"exact": truth}))
            for kind in args.types.split(","):
                if kind == "flat" and n > args.flat_max:
                    continue
                path = Path(tmp) / f"{kind}-{n}"
                reused = args.keep and (path / "index.json").exists()
                built = {"build_s": "(reused)", "build_rss_mb": 0, "files_mb": {}} if reused else \
                    run_step("build", args, n, kind, path)
                if args.drop_caches:
                    os.sync()
                    Path("/proc/sys/vm/drop_caches").write_text("1\n")
                found = run_step("search", args, n, kind, path)
                recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(found["found"], truth)])
                label = kind if kind == "flat" else f"{kind} (m={args.pq_m}, nprobe={args.nprobe or 'lists/8'}" \
                    f", candidates={args.candidates or 'default'})"
                print(f"| {n:,} | {label} "
                      f"| {built['build_s']} | {built['build_rss_mb']:,} | {sum(built['files_mb'].values()):,.0f} "
                      f"| {found['search_rss_mb']:,} | {found['p50_ms']} | {found['p99_ms']} | {recall:.3f} |"
                      + (f" {found['calibrated_p50_ms']} / {found['calibrated_p99_ms']} | {found['setup_ms']} |"
                         if args.languages > 1 else ""), flush=True)
                if not args.keep:
                    import shutil

                    shutil.rmtree(path, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
