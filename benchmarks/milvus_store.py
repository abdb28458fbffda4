"""hmde's retrieval in Milvus against hmde's own index, on the same vectors, side by side in one run.

Synthetic 384-d sentence vectors (the generator of benchmarks/multi_vector_search.py: documents of 16
sentences around 1,000 topics), indexed three ways from the same batches: hmde's own flat multi-vector index,
hmde's IVF-PQ one, and Milvus (``--store milvus:FILE``: Milvus Lite, the embedded engine, FLAT or HNSW). Each
is searched with the same single queries by hmde's fusion (best sentence + 0.5 x the document vector's cosine,
k=10). Prints the build's seconds, p50/p99 per query, the seconds of all queries in one call (as ``hmde search
--queries FILE`` and the server's batches search), recall@10 of the documents against the exact ranking, and the
process's peak RSS after building and searching (each index in its own process).

    python benchmarks/milvus_store.py --sentences 100000 1000000 --queries 200
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

sys.path.insert(0, str(Path(__file__).parent))


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def one(args) -> dict:
    import multi_vector_search as mvs

    from hmde.index.build import write_batches
    from hmde.index.builder import IndexSettings, new_meta
    from hmde.index.store import DocumentBatch, DocumentIndex

    docs, per_doc, dim = args.sentences[0] // 16, 16, 384
    kind, store = args.kind.split(":", 1) if ":" in args.kind else (args.kind, "")
    settings = IndexSettings(index_type=kind, ivf_lists=1024, pq_m=48, multi_vector=True,
                             store=f"milvus:{Path(args.path).parent / 'milvus.db'}" if store else "")
    meta = new_meta(settings, "synthetic", None, dim, "mean", args.path)

    def batches():
        for start, sents in mvs.generated(docs, per_doc, dim):
            n = len(sents)
            yield DocumentBatch([f"d{start + i}" for i in range(n)], ["eng"] * n, [""] * n, sents.mean(1),
                                [[f"s{j}" for j in range(per_doc)]] * n, list(sents))

    t = time.perf_counter()
    write_batches(args.path, meta, batches(), add=False).close()
    build_s = time.perf_counter() - t
    q = mvs.queries(args.queries, dim)
    index = DocumentIndex.open(args.path)
    index.search(q[:2], 10)
    times, found = [], []
    for v in q:
        t = time.perf_counter()
        hits = index.search(v[None], 10)[0]
        times.append((time.perf_counter() - t) * 1000)
        found.append([int(h.doc_id[1:]) for h in hits])
    t = time.perf_counter()
    index.search(q, 10)
    batch_s = time.perf_counter() - t
    index.close()
    return {"build_s": round(build_s, 1), "batch_s": round(batch_s, 2), "p50_ms": round(float(np.percentile(times, 50)), 1),
            "p99_ms": round(float(np.percentile(times, 99)), 1), "rss_mb": round(rss_mb()), "found": found}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sentences", type=int, nargs="+", default=[100_000, 1_000_000])
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--kinds", default="flat,ivfpq,flat:milvus,hnsw:milvus")
    p.add_argument("--kind", help="(internal)")
    p.add_argument("--path", help="(internal)")
    args = p.parse_args()
    if args.kind:
        print(json.dumps(one(args)))
        return 0
    import multi_vector_search as mvs

    print(f"| sentences | index | build s | p50 ms | p99 ms | {args.queries} queries in one call, s | recall@10 | peak RSS MB |"
          "\n|---|---|---|---|---|---|---|---|")
    for n in args.sentences:
        exact = mvs.exact(argparse.Namespace(sentences=n, per_doc=16, dim=384, queries=args.queries))["exact"]
        for kind in args.kinds.split(","):
            with tempfile.TemporaryDirectory(prefix="milvus-bench-") as work:
                out = subprocess.run([sys.executable, __file__, "--kind", kind, "--path", str(Path(work) / "idx"),
                                      "--sentences", str(n), "--queries", str(args.queries)],
                                     capture_output=True, text=True)
                if out.returncode:
                    print(f"| {n:,} | {kind} | failed: {out.stderr.strip().splitlines()[-1][:120]} ||||||")
                    continue
                r = json.loads(out.stdout.strip().splitlines()[-1])
            recall = np.mean([len(set(f) & set(e)) / 10 for f, e in zip(r["found"], exact)])
            print(f"| {n:,} | {kind} | {r['build_s']} | {r['p50_ms']} | {r['p99_ms']} | {r['batch_s']} | {recall:.3f} | "
                  f"{r['rss_mb']} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
