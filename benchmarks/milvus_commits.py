"""What commits cost a Milvus-stored index (issue 61): the same writes by the code before them (a git worktree of
``--before``, default 8869c49: an upsert deleted a batch's old rows, then inserted the new ones) and by this
checkout's (generations, a committed record, retired rows removed after the commit), each side in its own process on
its own Milvus Lite folder, on the same synthetic documents (tests/store_contract.py's world: 16-d vectors, 2-4
sentences and metadata each). Times a build of ``--docs`` documents, an upsert of ``--upsert`` of them, an add of as
many new ones and a delete of ``--delete``, each with its own process start excluded. Not a test:

    python benchmarks/milvus_commits.py --docs 10000 --upsert 2000 --delete 500
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

CHILD = r"""
import json, sys, time
sys.path.insert(0, {tests!r})
from store_contract import world, batch, meta_for
try:
    from hmde.index.milvus_client import collection_prefix
except ImportError:  # the code before the split
    from hmde.index.milvus_store import collection_prefix
from hmde.index.mutations import delete_documents
from hmde.index.store import DocumentIndex

path, n, m, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
from pathlib import Path
store = dict(store="milvus", store_uri=str(Path(path).parent / "m.db"), store_prefix=collection_prefix(Path(path)))
docs = world(n, seed=1, version=1)
out = {{}}

def timed(name, write):
    started = time.perf_counter()
    write()
    out[name] = time.perf_counter() - started

meta = meta_for("", **store)
timed("build", lambda: DocumentIndex.write_batches(path, meta, [batch(docs[i:i + 500]) for i in range(0, n, 500)]).close())
new = world(m, seed=2, version=2)
timed("upsert", lambda: DocumentIndex.write_batches(path, meta, [batch(new[i:i + 500]) for i in range(0, m, 500)],
                                                     add=True, replace=True).close())
extra = world(n + m, seed=3, version=3)[n:]
timed("add", lambda: DocumentIndex.write_batches(path, meta, [batch(extra[i:i + 500]) for i in range(0, m, 500)],
                                                  add=True).close())
timed("delete", lambda: delete_documents(path, [d["doc_id"] for d in docs[:k]]))
print(json.dumps(out))
"""


def main() -> None:
    sys.path.insert(0, str(HERE))
    from ranking_layer import worktree

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--upsert", type=int, default=2_000)
    parser.add_argument("--delete", type=int, default=500)
    parser.add_argument("--before", default="8869c49")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hmde-commits-") as tmp:
        tmp = Path(tmp)
        before = worktree(args.before, tmp / "before")
        try:
            results = {}
            for name, src in (("before (no commits)", before), ("after (commits)", HERE.parent / "src")):
                work = tmp / name.split()[0]
                work.mkdir(exist_ok=True)
                # the old code reads the synthetic world from this checkout's tests (the old tests lack it)
                child = CHILD.format(tests=str(HERE.parent / "tests"))
                env = {**os.environ, "PYTHONPATH": str(src)}
                done = subprocess.run([sys.executable, "-c", child, str(work / "idx"), str(args.docs), str(args.upsert),
                                       str(args.delete)], env=env, capture_output=True, text=True, check=True)
                results[name] = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"Milvus Lite, {args.docs:,} documents; upsert and add {args.upsert:,}; delete {args.delete:,} "
                  "(seconds)\n")
            print("| code | build | upsert | add | delete |")
            print("|---|---|---|---|---|")
            for name, row in results.items():
                print(f"| {name} | {row['build']:.1f} | {row['upsert']:.1f} | {row['add']:.1f} | {row['delete']:.1f} |")
        finally:
            subprocess.run(["git", "-C", str(HERE.parent), "worktree", "remove", "--force", str(tmp / "before")],
                           capture_output=True)


if __name__ == "__main__":
    main()
