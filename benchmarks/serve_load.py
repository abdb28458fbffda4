"""`hmde serve` under load, beside the same work done in-process (localhost only, bounded).

Starts `hmde serve` on a 10,000-document multi-vector index (default model, hmde-e5) and drives it with
1, 4, 16 and 64 concurrent clients (asyncio + httpx, each sending its next request when the last one
returned; --requests-per-client of them, at least --min-requests in all):

- POST /search, one query each (the demo's queries, in six languages), k=10: p50/p99 latency, requests/s;
- POST /v1/embeddings, one text each (the demo collection's documents, through the document path):
  p50/p99 latency and texts/s.

In-process, on the same texts and the same model: `Index.search` one query at a time (query embedding +
search), and `ServedModel.encode` on batches of --batch texts (what one big `hmde encode` does).

The index: 10,000 documents of 8 sentences whose vectors are synthetic (noisy copies of 1,000 topic
centres, 384-d), recorded as built with the served model so that the server loads it; the query is
embedded by the real model, and FAISS, the sentence table and the scoring do the same work whatever
the vectors hold. Run:

    python benchmarks/serve_load.py            # about 5 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

import numpy as np

DEMO = resources.files("hmde") / "demo"


def demo_texts() -> tuple[list[str], list[str]]:
    docs = [json.loads(line)["text"] for line in (DEMO / "collection.jsonl").read_text("utf-8").splitlines()]
    queries = [json.loads(line)["text"] for line in (DEMO / "queries.jsonl").read_text("utf-8").splitlines()]
    return docs, queries


def build_index(path: Path, model: str, docs: int, per_doc: int, seed: int = 0) -> None:
    from hmde.evaluation.provenance import model_hash
    from hmde.index.build import write_batches
    from hmde.index.store import DocumentBatch, IndexMeta
    from hmde.encoders.registry import resolve_model_path

    texts, _ = demo_texts()
    rng = np.random.default_rng(seed)
    dim = 384
    centres = rng.standard_normal((1000, dim)).astype(np.float32)
    meta = IndexMeta(model=model, model_sha256=model_hash(resolve_model_path(model)), dim=dim, method="mean",
                     index_type="flat", count=0, multi_vector=True, sentence_vectors="lower")

    def batches():
        for start in range(0, docs, 2000):
            n = min(2000, docs - start)
            topic = centres[rng.integers(0, 1000, n)]
            sents = topic[:, None, :] + 0.5 * rng.standard_normal((n, per_doc, dim)).astype(np.float32)
            sents /= np.linalg.norm(sents, axis=2, keepdims=True)
            body = [texts[(start + i) % len(texts)] for i in range(n)]
            yield DocumentBatch([f"d{start + i}" for i in range(n)], ["eng"] * n, body, sents.mean(1),
                                [[f"{body[i]} ({j})" for j in range(per_doc)] for i in range(n)], list(sents))

    write_batches(path, meta, batches(), add=False).close()


@contextlib.contextmanager
def running_server(argv: list[str], port: int, env: dict | None = None, quiet: bool = False):
    """``hmde serve ARGV --port PORT`` started (``env``: its environment, default this process's; no API key), its
    URL yielded once /health answers, stopped after."""
    import httpx

    server = subprocess.Popen([sys.executable, "-m", "hmde", "serve", *argv, "--port", str(port)],
                              env={**(os.environ if env is None else env), "HMDE_API_KEY": ""},
                              **({"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL} if quiet else {}))
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(60)


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values) * 1000, q))


async def load(url: str, path: str, bodies: list[dict], clients: int, per_client: int, minimum: int) -> dict:
    import httpx

    total = max(minimum, clients * per_client)
    latencies: list[float] = []
    errors = 0
    counter = iter(range(total))

    async def client(http):
        nonlocal errors
        for i in counter:
            started = time.perf_counter()
            reply = await http.post(url + path, json=bodies[i % len(bodies)])
            latencies.append(time.perf_counter() - started)
            errors += reply.status_code != 200

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=300, limits=limits) as http:
        started = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(clients)))
        wall = time.perf_counter() - started
    return {"requests": total, "errors": errors, "p50_ms": percentile(latencies, 50),
            "p99_ms": percentile(latencies, 99), "per_s": total / wall}


def in_process(index: Path, model: str, texts: list[str], queries: list[str], batch: int) -> dict:
    from hmde.serve.served import load_served

    served = load_served(model, [str(index)], "cpu")
    opened = next(iter(served.indexes.values())).current()
    opened.search(queries[:2])  # warm-up
    times = []
    for q in queries * 3:
        started = time.perf_counter()
        opened.search([q], 10)
        times.append(time.perf_counter() - started)
    m = served.model
    m.encode(m.document_method, texts[:batch], [None] * batch)  # warm-up
    started = time.perf_counter()
    for s in range(0, len(texts), batch):
        chunk = texts[s:s + batch]
        m.encode(m.document_method, chunk, [None] * len(chunk))
    rate = len(texts) / (time.perf_counter() - started)
    served.close()
    return {"search_p50_ms": percentile(times, 50), "search_p99_ms": percentile(times, 99), "encode_texts_per_s": rate}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="hmde-e5")
    p.add_argument("--documents", type=int, default=10_000)
    p.add_argument("--per-doc", type=int, default=8)
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16, 64])
    p.add_argument("--requests-per-client", type=int, default=4)
    p.add_argument("--min-requests", type=int, default=96)
    p.add_argument("--batch", type=int, default=32, help="in-process encode batch (default 32, `hmde encode`'s --batch-size)")
    p.add_argument("--texts", type=int, default=384, help="texts of the in-process encode measurement")
    p.add_argument("--texts-per-request", type=int, nargs="+", default=[1, 8],
                   help="texts in each /v1/embeddings request (clients of embedding APIs send lists)")
    p.add_argument("--max-wait-ms", type=float, default=None, help="the server's --max-wait-ms (default: its own)")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--work", default=None, help="folder for the index (default: a temporary one)")
    args = p.parse_args()

    docs, queries = demo_texts()
    texts = [f"{docs[i % len(docs)]} ({i})" for i in range(args.texts)]  # unique: nothing is embedded twice
    work = Path(args.work or tempfile.mkdtemp(prefix="hmde-serve-load-"))
    index = work / "load-index"
    if not (index / "index.json").exists():
        t = time.perf_counter()
        build_index(index, args.model, args.documents, args.per_doc)
        print(f"built {index} ({args.documents:,} documents x {args.per_doc} sentences) in {time.perf_counter() - t:.0f} s",
              flush=True)
    reference = in_process(index, args.model, texts, queries, args.batch)
    print(f"in-process: search p50 {reference['search_p50_ms']:.1f} ms, p99 {reference['search_p99_ms']:.1f} ms; "
          f"encode {reference['encode_texts_per_s']:.1f} texts/s (batches of {args.batch})", flush=True)
    argv = [str(index), "--model", args.model, "--log-level", "warning", "--device", "cpu",
            *(["--max-wait-ms", str(args.max_wait_ms)] if args.max_wait_ms is not None else [])]
    with running_server(argv, args.port) as url:
        search_bodies = [{"query": q, "top_k": 10, "include_text": False} for q in queries]
        asyncio.run(load(url, "/search", search_bodies, 1, 4, 8))  # warm-up
        runs = [("/search", 1, search_bodies)]
        for n in args.texts_per_request:
            runs.append(("/v1/embeddings", n, [{"input": texts[i:i + n], "model": args.model, "encoding_format": "base64"}
                                               for i in range(0, len(texts) - n + 1, n)]))
        rows = []
        for route, per_request, bodies in runs:
            for clients in args.concurrency:
                r = asyncio.run(load(url, route, bodies, clients, args.requests_per_client,
                                     max(8, args.min_requests // per_request)))
                r["texts_per_s"] = r["per_s"] * per_request
                rows.append((route, per_request, clients, r))
                print(f"{route} ({per_request} per request) x{clients}: p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, "
                      f"{r['per_s']:.1f} requests/s, {r['errors']} errors", flush=True)
    ref_rate = reference["encode_texts_per_s"]
    print("\n| route | texts per request | clients | requests | p50 ms | p99 ms | requests/s | texts/s | vs in-process |")
    print("|---|---|---|---|---|---|---|---|---|")
    for route, per_request, clients, r in rows:
        if route == "/search":
            versus = f"p50 {r['p50_ms'] / reference['search_p50_ms']:.2f}x of {reference['search_p50_ms']:.1f} ms"
        else:
            versus = f"{r['texts_per_s'] / ref_rate:.2f}x of {ref_rate:.1f} texts/s"
        print(f"| {route} | {per_request} | {clients} | {r['requests']} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | "
              f"{r['per_s']:.1f} | {r['texts_per_s']:.1f} | {versus} |")
    s1 = next((r for route, _, c, r in rows if route == "/search" and c == 1), None)
    for route, per_request, clients, r in rows:
        if route == "/v1/embeddings" and clients == 16:
            print(f"target: /v1/embeddings, 16 clients x {per_request} text(s): {r['texts_per_s'] / ref_rate:.2f}x "
                  "in-process (>= 0.8)")
    if s1:
        print(f"target: /search p50 at 1 client {s1['p50_ms']:.1f} ms (<= 50)")


if __name__ == "__main__":
    main()
