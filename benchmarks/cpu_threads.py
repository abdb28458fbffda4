"""Embedding on a shared CPU machine: in-process vs served, by torch's threads and OpenMP's wait policy (issue 63).

A tester found ``hmde encode`` of 20 articles taking 57 s with torch's default threads and 23 s with
``OMP_NUM_THREADS=1`` on a busy 2-core machine, and the server embedding the same texts ~4x faster than
``DocumentVectorizer.encode`` in-process (identical vectors). Each row here embeds the same documents (hmde-e5,
its document path: vectors, sentences and their vectors, as an index write does) in a fresh process, so that each
sees a fresh OpenMP runtime, side by side in one run:

- ``in-process``: ``DocumentVectorizer.encode_with_sentences`` in the main thread, as ``hmde encode`` and
  ``hmde index build`` run it, under OpenMP's default wait policy (its idle threads spin) or ``PASSIVE`` (what the
  command line sets unless the user set ``OMP_WAIT_POLICY``);
- ``in-process --threads 1``: ``torch.set_num_threads(1)`` (``hmde ... --threads 1``, ``threads=1`` in Python);
- ``worker thread``: the same call from a ``ThreadPoolExecutor`` thread, as the server's model thread makes it;
- ``served``: a real ``hmde serve`` process answering ``POST /embed`` with the same texts.

``--busy K`` keeps K other processes spinning on the CPUs during every row (the "busy machine"). Not a test:
timings depend on the machine.

    python benchmarks/cpu_threads.py --busy 0
    python benchmarks/cpu_threads.py --busy 2
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from serve_load import running_server  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def documents(n: int) -> list[str]:
    path = SHARED / "eval" / "masakhanews" / "eng" / "dev.tsv.gz"
    if not path.is_file():
        sys.exit(f"needs {path} (../shared beside the checkout)")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t"))[1:n + 1]
    return [r[2] for r in rows]


def child(mode: str, n: int) -> None:
    """One row, in this (fresh) process: prints the seconds and the first vector's first values as JSON."""
    import numpy as np
    import torch

    from hmde.encoders.model_loading import load_model
    from hmde.methods.vectorizer import DocumentVectorizer, MethodOptions

    texts = documents(n)
    if mode == "threads1":
        torch.set_num_threads(1)
    _, model = load_model("hmde-e5", "cpu")
    vectorizer = DocumentVectorizer(model, "mean", MethodOptions())
    vectorizer.encode(texts[:2], [None, None])  # warm-up: first-call costs out of the timing
    run = lambda: vectorizer.encode_with_sentences(texts, [None] * len(texts))  # noqa: E731
    started = time.perf_counter()
    if mode == "worker":
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1) as pool:
            vectors = pool.submit(run).result()[0]
    else:
        vectors = run()[0]
    print(json.dumps({"seconds": time.perf_counter() - started, "head": np.asarray(vectors)[0, :4].tolist()}))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def served(n: int, env: dict) -> dict:
    import httpx

    texts, port = documents(n), free_port()
    with running_server(["--model", "hmde-e5", "--device", "cpu"], port, env, quiet=True) as url:
        body = {"input": texts, "method": "mean"}
        httpx.post(url + "/embed", json={"input": texts[:2], "method": "mean"}, timeout=600)  # warm-up
        started = time.perf_counter()
        answer = httpx.post(url + "/embed", json=body, timeout=600).json()
        return {"seconds": time.perf_counter() - started, "head": answer["vectors"][0][:4]}


def row(mode: str, n: int, policy: str) -> dict:
    """``policy`` "": OpenMP's own default (set empty, so that the command line's default does not apply)."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    env["OMP_WAIT_POLICY"] = policy
    if mode == "served":
        return served(n, env)
    out = subprocess.run([sys.executable, __file__, "--child", mode, "--docs", str(n)], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=20)
    parser.add_argument("--busy", type=int, default=0, help="other processes spinning on the CPUs meanwhile")
    parser.add_argument("--rounds", type=int, default=1, help="every row once per round; the median is reported")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.docs)
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    rows = [("in-process, OpenMP's default wait", "main", ""), ("in-process, OMP_WAIT_POLICY=PASSIVE", "main", "PASSIVE"),
            ("in-process, --threads 1", "threads1", ""), ("worker thread (the server's way)", "worker", ""),
            ("served: hmde serve, OpenMP's default", "served", ""),
            ("served, PASSIVE (the command line's)", "served", "PASSIVE")]
    times: dict = {name: [] for name, _, _ in rows}
    try:
        print(f"{args.docs} MasakhaNEWS articles, hmde-e5, {os.cpu_count()} CPUs, {args.busy} spinning process(es)")
        for round_ in range(1, args.rounds + 1):
            for name, mode, policy in rows:
                result = row(mode, args.docs, policy)
                times[name].append(result["seconds"])
                print(f"round {round_}  {name:<40} {result['seconds']:7.1f} s   first vector "
                      f"{[round(x, 4) for x in result['head']]}", flush=True)
        print("median over the rounds:")
        for name, seconds in times.items():
            print(f"  {name:<40} {statistics.median(seconds):7.1f} s")
    finally:
        for p in spinners:
            p.kill()


if __name__ == "__main__":
    main()
