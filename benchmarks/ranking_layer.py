"""What the ranking layer above the store protocol costs hmde's own index (issue 61): the same searches by the code
before the split (a git worktree of ``--before``, default 8869c49, the last commit whose ``DocumentIndex`` held the
ranking) and by this checkout's, side by side in one run. Each side builds its own flat multi-vector index from the
same synthetic 384-d sentences (benchmarks/multi_vector_search.py's generator, 16 a document, half of the documents
``eng`` and half ``deu``, so that the language subspace and the query-language calibration are on: a new index's
defaults) in its own process, then the two processes search the same queries in alternating rounds; p50 and p99 per
query, for the defaults (``query_langs=["en"]``: calibrated) and without a query language. Not a test:

    python benchmarks/ranking_layer.py --sentences 1000000 --queries 100 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

CHILD = r"""
import json, sys, time
import numpy as np
sys.path.insert(0, {benchmarks!r})
from multi_vector_search import generated, queries
from hmde.index.build import write_batches
from hmde.index.store import DocumentBatch, DocumentIndex, IndexMeta

path, sentences, per_doc, dim, n_queries = sys.argv[1], int(sys.argv[2]), 16, 384, int(sys.argv[3])
meta = IndexMeta(model="synthetic", model_sha256=None, dim=dim, method="mean", index_type="flat", count=0,
                 multi_vector=True, sentence_vectors="lower", language_debias="subspace+calibrate")

def batches():
    for start, sents in generated(sentences // per_doc, per_doc, dim):
        n = len(sents)
        langs = ["eng" if (start + i) % 2 else "deu" for i in range(n)]
        yield DocumentBatch([f"d{{start + i}}" for i in range(n)], langs, [""] * n, sents.mean(1),
                            [[f"s{{j}}" for j in range(per_doc)]] * n, list(sents))

write_batches(path, meta, batches(), add=False).close()
index = DocumentIndex.open(path)
q = queries(n_queries, dim)
index.search(q[:2], 10, query_langs=["en", "en"])  # warm-up: tables and the calibration sample read once
print("ready", flush=True)
for line in sys.stdin:
    setting = line.strip()
    times, found = [], []
    for v in q:
        started = time.perf_counter()
        hits = index.search(v[None], 10, query_langs=["en"] if setting == "calibrated" else None)[0]
        times.append((time.perf_counter() - started) * 1000)
        found.append([h.doc_id for h in hits])
    print(json.dumps({{"times": times, "found": found}}), flush=True)
"""


def worktree(rev: str, folder: Path) -> Path:
    subprocess.run(["git", "-C", str(HERE.parent), "worktree", "add", "--detach", str(folder), rev], check=True,
                   capture_output=True)
    return folder / "src"


def start(src: Path, work: Path, sentences: int, n_queries: int):
    env = {**os.environ, "PYTHONPATH": str(src)}
    proc = subprocess.Popen([sys.executable, "-c", CHILD.format(benchmarks=str(HERE)), str(work), str(sentences),
                             str(n_queries)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    return proc


def ask(proc, setting: str) -> dict:
    proc.stdin.write(setting + "\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", default="8869c49")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hmde-ranking-") as tmp:
        tmp = Path(tmp)
        sides = {"before (DocumentIndex ranks)": worktree(args.before, tmp / "before"),
                 "after (hmde.index.ranking)": HERE.parent / "src"}
        procs = {}
        try:
            for name, src in sides.items():  # one build at a time: two would share the 2 cores
                started = time.perf_counter()
                procs[name] = start(src, tmp / f"idx-{len(procs)}", args.sentences, args.queries)
                assert procs[name].stdout.readline().strip() == "ready"
                print(f"{name}: built and opened in {time.perf_counter() - started:.0f} s", flush=True)
            print(f"\n{args.sentences:,} sentences, flat, {args.queries} queries x {args.rounds} rounds (alternating)\n")
            print("| setting | code | p50 ms | p99 ms | same hits as before |")
            print("|---|---|---|---|---|")
            for setting in ("calibrated", "no query language"):
                times = {name: [] for name in procs}
                found = {}
                for _ in range(args.rounds):
                    for name, proc in procs.items():
                        answer = ask(proc, setting)
                        times[name] += answer["times"]
                        found[name] = answer["found"]
                first = next(iter(found.values()))
                for name in procs:
                    same = np.mean([a == b for a, b in zip(found[name], first)])
                    print(f"| {setting} | {name} | {np.percentile(times[name], 50):.1f} | "
                          f"{np.percentile(times[name], 99):.1f} | {same:.3f} |", flush=True)
        finally:
            for proc in procs.values():
                proc.stdin.close()
                proc.wait(timeout=60)
            subprocess.run(["git", "-C", str(HERE.parent), "worktree", "remove", "--force", str(tmp / "before")],
                           capture_output=True)


if __name__ == "__main__":
    main()
