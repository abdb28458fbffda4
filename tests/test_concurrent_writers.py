"""Several processes writing and reading one index at once (issue 15, item 2).

Writers of one index are serialised by an advisory lock held for the whole
read-modify-write, so no ``--add`` is lost; readers open a consistent snapshot while a
writer swaps the new folder in. The processes are real ones (``subprocess``), started
together, over several rounds: a lost update showed in 3 of 4 rounds before the lock.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

DIM = 8

WRITER = textwrap.dedent("""
    import sys, time
    import numpy as np
    from hmde.index.store import DocumentIndex, IndexMeta

    path, tag, n, start_at = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    rng = np.random.default_rng(abs(hash(tag)) % 2**32)
    ids = [f"{tag}-{i}" for i in range(n)]
    sentences = [[f"sentence {i} of {tag}", "another"] for i in range(n)]
    vectors = [rng.normal(size=(2, 8)).astype(np.float32) for _ in range(n)]
    meta = IndexMeta(model="m", model_sha256=None, dim=8, method="mean", index_type="flat", count=0)
    time.sleep(max(0.0, start_at - time.time()))  # both writers start together
    DocumentIndex.write(path, meta, ids, ["eng"] * n, [" ".join(s) for s in sentences],
                        np.stack([v.mean(0) for v in vectors]), sentences, vectors, add=True)
""")

READER = textwrap.dedent("""
    import sys, time
    from hmde.index.store import DocumentIndex

    path, until = sys.argv[1], float(sys.argv[2])
    seen = 0
    while time.time() < until or seen == 0:  # at least one snapshot, however slowly this interpreter started
        index = DocumentIndex.open(path)
        ids = index.doc_ids()
        rows = index.sentence_rows()
        assert index.meta.count == index.index.ntotal == len(ids), (index.meta.count, index.index.ntotal, len(ids))
        assert rows == len(index.sentence_vectors), (rows, len(index.sentence_vectors))
        index.close()
        seen += 1
    print(seen)
""")


def _initial_index(path: Path) -> None:
    from hmde.index.store import DocumentIndex, IndexMeta

    vectors = [np.ones((1, DIM), np.float32)]
    DocumentIndex.write(path, IndexMeta(model="m", model_sha256=None, dim=DIM, method="mean", index_type="flat",
                                        count=0), ["seed"], ["eng"], ["seed"], vectors[0], [["seed"]], vectors)


def _script(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_concurrent_adds_lose_nothing_and_readers_see_whole_indexes(tmp_path):
    import time

    from hmde.index.store import DocumentIndex

    index = tmp_path / "idx"
    _initial_index(index)
    writer, reader = _script(tmp_path, "writer.py", WRITER), _script(tmp_path, "reader.py", READER)
    expected = 1
    for round_ in range(4):
        start_at = time.time() + 2.0  # time for both interpreters to import
        procs = [subprocess.Popen([sys.executable, str(writer), str(index), f"r{round_}w{w}", "5", str(start_at)],
                                  stderr=subprocess.PIPE, text=True) for w in range(2)]
        watcher = subprocess.Popen([sys.executable, str(reader), str(index), str(start_at + 3.0)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
        out, err = watcher.communicate(timeout=120)
        assert watcher.returncode == 0, err  # every snapshot it opened was whole
        assert int(out) > 0
        expected += 10
        opened = DocumentIndex.open(index)
        assert opened.meta.count == expected == len(set(opened.doc_ids())), f"round {round_}"
        opened.close()
    leftovers = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".idx") and not p.name.endswith(".lock"))
    assert leftovers == []


def test_a_dead_writers_temporaries_are_cleaned_by_the_next_write(tmp_path):
    from hmde.index.store import DocumentIndex, IndexMeta

    index = tmp_path / "idx"
    _initial_index(index)
    stale_tmp, stale_old = tmp_path / ".idx.k3j9x_2a.tmp", tmp_path / ".idx.old.4242"
    for stale in (stale_tmp, stale_old):  # what a SIGKILLed writer leaves
        stale.mkdir()
        (stale / "vectors.faiss").write_bytes(b"partial")
    other = tmp_path / ".idx2.abcdefgh.tmp"  # another folder's temporary: not ours to clean
    other.mkdir()
    v = np.ones((1, DIM), np.float32)
    DocumentIndex.write(index, IndexMeta(model="m", model_sha256=None, dim=DIM, method="mean", index_type="flat",
                                         count=0), ["x"], ["eng"], ["x"], v, [["x"]], [v], add=True)
    assert not stale_tmp.exists() and not stale_old.exists() and other.exists()


def test_a_second_writer_says_it_waits(tmp_path, capsys):
    from hmde.ground.locks import exclusive_writer

    index = tmp_path / "idx"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from hmde.ground.locks import exclusive_writer
        with exclusive_writer({str(index)!r}):
            print("held", flush=True)
            time.sleep(3)
    """)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    with exclusive_writer(index):
        pass
    holder.wait(timeout=30)
    err = capsys.readouterr().err
    assert f"waiting for another hmde process writing {index}" in err and err.count("\n") == 1


def test_an_index_where_nobody_may_write_opens_without_a_lock(tmp_path, monkeypatch):
    """A read-only place (a shared model shelf, a read-only mount) has no writers to wait for
    and no room for lock files: the index opens without one."""
    import hmde.ground.locks
    from hmde.index.store import DocumentIndex

    _initial_index(tmp_path / "idx")
    for lock in tmp_path.glob(".*.lock"):
        lock.unlink()
    monkeypatch.setattr(hmde.ground.locks.os, "access", lambda path, mode: False)  # as on a read-only mount
    with DocumentIndex.open(tmp_path / "idx") as opened:
        assert opened.doc_ids() == ["seed"]
    assert list(tmp_path.glob(".*.lock")) == []


def test_two_concurrent_cli_adds_both_land(tmp_path, hmde_dir):
    """The user's case: two `hmde index build --add` at once (each loads the model, encodes, writes)."""
    import json

    from hmde.index.store import DocumentIndex

    base = tmp_path / "base.jsonl"
    base.write_text(json.dumps({"doc_id": "seed", "text": "A seed.", "lang": "eng"}) + "\n")
    index = tmp_path / "idx"
    cli = [sys.executable, "-c", "import sys; from hmde.cli.main import main; sys.exit(main(sys.argv[1:]))"]
    subprocess.run([*cli, "index", "build", str(hmde_dir), str(base), "-o", str(index), "--no-progress"], check=True,
                   capture_output=True)
    procs = []
    for w in range(2):
        src = tmp_path / f"w{w}.jsonl"
        src.write_text("".join(json.dumps({"doc_id": f"w{w}-{i}", "text": f"Text {i} of writer {w}.", "lang": "eng"})
                               + "\n" for i in range(3)))
        procs.append(subprocess.Popen([*cli, "index", "build", str(src), "-o", str(index), "--add", "--no-progress"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    with DocumentIndex.open(index) as opened:
        assert sorted(opened.doc_ids()) == ["seed"] + [f"w{w}-{i}" for w in range(2) for i in range(3)]
