"""Many callers on one index, in-process beside `hmde serve` (issue 92), side by side in one run on one machine.

Collection: the dev data's 48 XQuAD articles, article i in German, Greek, Hindi or English (benchmarks/integrations.py's
mixed collection), indexed with hmde-e5 (the defaults); queries: the first question of each paragraph, in English
and in Greek (480). For 1, 4, 16 and 64 concurrent callers, each sending its next query when its last returned
(``--requests-per-caller`` each, at least ``--min-requests`` in all), k=10:

- **threads**: one :class:`hmde.Index` shared by N threads calling ``Index.search`` (the queries of searches waiting at
  the same moment are embedded together on the model thread);
- **asyncio**: N tasks on one event loop awaiting ``Index.asearch``;
- **served**: N asyncio + httpx clients of ``hmde serve`` on the same index (``POST /search``; benchmarks/serve_load.py's
  load generator, on the same 2 cores as the server).

Each row: p50 / p99 latency, queries/s, errors, and results that differ from the same query searched alone (must be 0).

    python benchmarks/concurrency.py --data ../shared/data     # about 6 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from integrations import collection  # noqa: E402  (the mixed XQuAD collection)
from serve_load import load, running_server  # noqa: E402


def percentile(values, q):
    return float(np.percentile(np.asarray(values) * 1000, q))


def threads_run(index, queries, reference, callers: int, total: int) -> dict:
    latencies, errors, wrong = [], [0], [0]
    counter, lock = iter(range(total)), threading.Lock()

    def caller():
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            query = queries[i % len(queries)]
            started = time.perf_counter()
            try:
                hits = index.search(query, top_k=10)[0]
                wrong[0] += [h.doc_id for h in hits] != reference[query]
            except Exception:  # noqa: BLE001 - counted, the run goes on
                errors[0] += 1
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    with ThreadPoolExecutor(callers) as pool:
        for future in [pool.submit(caller) for _ in range(callers)]:
            future.result()
    wall = time.perf_counter() - started
    return {"p50_ms": percentile(latencies, 50), "p99_ms": percentile(latencies, 99), "per_s": total / wall,
            "errors": errors[0], "wrong": wrong[0]}


def asyncio_run(index, queries, reference, callers: int, total: int) -> dict:
    latencies, errors, wrong = [], [0], [0]
    counter = iter(range(total))

    async def caller():
        for i in counter:
            query = queries[i % len(queries)]
            started = time.perf_counter()
            try:
                hits = (await index.asearch(query, top_k=10))[0]
                wrong[0] += [h.doc_id for h in hits] != reference[query]
            except Exception:  # noqa: BLE001
                errors[0] += 1
            latencies.append(time.perf_counter() - started)

    async def run():
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max(4, callers)))
        await asyncio.gather(*(caller() for _ in range(callers)))

    started = time.perf_counter()
    asyncio.run(run())
    wall = time.perf_counter() - started
    return {"p50_ms": percentile(latencies, 50), "p99_ms": percentile(latencies, 99), "per_s": total / wall,
            "errors": errors[0], "wrong": wrong[0]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16, 64])
    p.add_argument("--requests-per-caller", type=int, default=4)
    p.add_argument("--min-requests", type=int, default=160)
    p.add_argument("--port", type=int, default=8771)
    p.add_argument("--work", type=Path, default=None)
    args = p.parse_args()

    import hmde

    docs, by_lang = collection(args.data)
    queries = [q for lang in ("en", "el") for q, _ in by_lang[lang]]
    work = args.work or Path(tempfile.mkdtemp(prefix="hmde-concurrency-"))
    path = work / "xquad-index"
    if not (path / "index.json").exists():
        hmde.Index.create(str(path), docs).close()
    index = hmde.Index.open(str(path))
    reference = {q: [h.doc_id for h in hits] for q, hits in zip(queries, index.search(queries, top_k=10))}
    index.search(queries[:4])  # warm
    rows = []
    for callers in args.concurrency:
        total = max(args.min_requests, callers * args.requests_per_caller)
        for kind, run in (("threads", threads_run), ("asyncio", asyncio_run)):
            r = run(index, queries, reference, callers, total)
            rows.append((kind, callers, total, r))
            print(f"{kind} x{callers}: p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, {r['per_s']:.1f} queries/s, "
                  f"{r['errors']} errors, {r['wrong']} differing", flush=True)
    index.close()
    argv = [str(path), "--log-level", "warning", "--device", "cpu"]
    with running_server(argv, args.port, quiet=True) as url:
        bodies = [{"query": q, "top_k": 10, "include_text": False} for q in queries]
        asyncio.run(load(url, "/search", bodies, 1, 4, 8))  # warm-up
        for callers in args.concurrency:
            total = max(args.min_requests, callers * args.requests_per_caller)
            r = asyncio.run(load(url, "/search", bodies, callers, args.requests_per_caller, total))
            r["wrong"] = None
            rows.append(("served", callers, total, r))
            print(f"served x{callers}: p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, {r['per_s']:.1f} queries/s, "
                  f"{r['errors']} errors", flush=True)
    served = {c: r["per_s"] for kind, c, _, r in rows if kind == "served"}
    print("\n| callers | kind | queries | p50 ms | p99 ms | queries/s | vs served | errors | differing |")
    print("|---|---|---|---|---|---|---|---|---|")
    for kind, callers, total, r in sorted(rows, key=lambda x: (x[1], ["threads", "asyncio", "served"].index(x[0]))):
        versus = f"{r['per_s'] / served[callers]:.2f}x" if kind != "served" and callers in served else ""
        print(f"| {callers} | {kind} | {total} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['per_s']:.1f} | {versus} | "
              f"{r['errors']} | {'' if r['wrong'] is None else r['wrong']} |")


if __name__ == "__main__":
    main()
