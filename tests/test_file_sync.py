"""A folder kept in sync (issue 93): `hmde index sync FOLDER INDEX` after files are added, changed, renamed and
deleted gives the index a fresh build of the folder gives (ids, texts, metadata, vectors); a second sync does
nothing and says so; documents from elsewhere are never deleted, nor replaced; a sync killed with SIGKILL leaves the
version before or after, and the next one finishes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from document_files import mixed_folder
from hmde import Index
from hmde.cli.main import main


def build(hmde_dir, folder: Path, index: Path) -> None:
    assert main(["index", "build", str(hmde_dir), str(folder), "-o", str(index), "--no-progress"]) == 0


def state(index: Path, hmde_dir) -> dict:
    """Each document's text, language, metadata and stored vector."""
    with Index.open(str(index), model=str(hmde_dir), device="cpu") as opened:
        docs = {d["doc_id"]: d for d in opened.all_documents()}
        ids = sorted(docs)
        vectors = opened.document_vectors(ids)[1] if ids else np.zeros((0, 0))
    return {i: (docs[i]["text"], docs[i]["lang"], docs[i]["metadata"], vectors[k]) for k, i in enumerate(ids)}


def assert_same(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for doc_id in a:
        assert a[doc_id][:3] == b[doc_id][:3], doc_id
        np.testing.assert_allclose(a[doc_id][3], b[doc_id][3], atol=1e-5)


def test_a_sync_equals_a_fresh_build_and_a_second_one_does_nothing(tmp_path, hmde_dir, capsys):
    folder = mixed_folder(tmp_path / "docs", pdf=False)
    index = tmp_path / "idx"
    build(hmde_dir, folder, index)
    (folder / "new.md").write_text("# New\n\nThe cat sat on the mat.\n", encoding="utf-8")  # added
    (folder / "zh.txt").write_text("猫坐在垫子上。\n\n那是一个晴朗的日子。", encoding="utf-8")  # changed
    (folder / "notes.md").rename(folder / "renamed.md")  # renamed
    (folder / "report.docx").unlink()  # deleted
    capsys.readouterr()
    assert main(["index", "sync", str(folder), str(index), "--model", str(hmde_dir), "--no-progress"]) == 0
    assert capsys.readouterr().out.strip() == (f"synced {folder} into {index}: 2 added, 1 changed, 2 deleted, "
                                               "1 unchanged")
    fresh = tmp_path / "fresh"
    build(hmde_dir, folder, fresh)
    assert_same(state(index, hmde_dir), state(fresh, hmde_dir))
    written = (index / "index.json").read_bytes()
    capsys.readouterr()
    assert main(["index", "sync", str(folder), str(index), "--model", "no-such-model"]) == 0  # no model loads
    assert capsys.readouterr().out.strip() == (f"nothing to do: {index} holds the 4 file(s) of {folder} as they are "
                                               "(nothing written)")
    assert (index / "index.json").read_bytes() == written


def test_a_sync_honours_the_largest_file_it_may_read(tmp_path, hmde_dir, capsys):
    """--max-file-mb reaches the sync's reads: a new file over it stops the sync (nothing written) or, with
    --on-error skip, is listed and passed over while the rest is synced."""
    folder = mixed_folder(tmp_path / "docs", pdf=False)
    index = tmp_path / "idx"
    build(hmde_dir, folder, index)
    written = (index / "index.json").read_bytes()
    (folder / "big.md").write_text("# Big\n\n" + "The cat sat on the mat. " * 60_000, encoding="utf-8")  # 1.4 MiB
    (folder / "small.md").write_text("# Small\n\nA short page.\n", encoding="utf-8")
    sync = ["index", "sync", str(folder), str(index), "--model", str(hmde_dir), "--no-progress", "--max-file-mb", "1"]
    assert main(sync) == 2
    assert "big.md" in capsys.readouterr().err and (index / "index.json").read_bytes() == written
    assert main(sync + ["--on-error", "skip"]) == 0
    captured = capsys.readouterr()
    assert "1 added" in captured.out and "big.md" in captured.err and "too large" in captured.err
    with Index.open(str(index), model=str(hmde_dir), device="cpu") as opened:
        assert {"small.md"} <= {d["doc_id"] for d in opened.all_documents()}
        assert "big.md" not in {d["doc_id"] for d in opened.all_documents()}


def test_documents_from_elsewhere_are_never_deleted_nor_replaced(tmp_path, hmde_dir):
    folder = mixed_folder(tmp_path / "docs", pdf=False)
    index = tmp_path / "idx"
    build(hmde_dir, folder, index)
    other = tmp_path / "other"
    other.mkdir()
    (other / "elsewhere.md").write_text("# Elsewhere\n\nDie Katze saß auf der Matte.\n", encoding="utf-8")
    jsonl = tmp_path / "more.jsonl"
    jsonl.write_text(json.dumps({"doc_id": "j1", "text": "Economic growth slowed.", "lang": "en"}) + "\n")
    assert main(["index", "add", str(index), str(other), str(jsonl), "--model", str(hmde_dir), "--no-progress"]) == 0
    for name in ("notes.md", "zh.txt", "report.docx"):
        (folder / name).unlink()
    with Index.open(str(index), model=str(hmde_dir), device="cpu") as opened:
        plan = opened.sync(folder)
        assert (plan.removed, plan.added, plan.unchanged) == (["notes.md", "report.docx", "zh.txt"], [], 1)
        assert sorted(opened.document_ids()) == ["elsewhere.md", "j1", "web/finale.html"]
        (folder / "j1").write_text("A file whose name is another document's id.", encoding="utf-8")
        (folder / "j1.txt").write_text("x", encoding="utf-8")
        (folder / "j1").unlink()
        (folder / "elsewhere.md").write_text("# Here\n\nA file of this folder with another folder's id.\n")
        with pytest.raises(Exception) as caught:
            opened.sync(folder)
        assert str(caught.value) == (f"{opened.path} holds a document 'elsewhere.md' that did not come from {folder} "
                                     "(1 such id(s)): a sync never replaces it; rename the file, or delete the "
                                     "document first")
        assert sorted(opened.document_ids()) == ["elsewhere.md", "j1", "web/finale.html"]  # nothing written


SYNC = """
import sys
from hmde.cli.main import main
sys.exit(main(["index", "sync", {folder!r}, {index!r}, "--model", {model!r}, "--no-progress", "--device", "cpu"]))
"""


def test_a_sync_killed_leaves_the_version_before_or_after_and_the_next_finishes(tmp_path, hmde_dir):
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(6):
        (folder / f"old{i}.md").write_text(f"# Old {i}\n\nThe cat sat on the mat {i} times.\n", encoding="utf-8")
    index = tmp_path / "idx"
    build(hmde_dir, folder, index)
    before = sorted(f"old{i}.md" for i in range(6))
    for i in range(3):
        (folder / f"old{i}.md").unlink()
    for i in range(40):
        (folder / f"new{i}.md").write_text(f"# New {i}\n\n" + "Economic growth slowed. " * 30, encoding="utf-8")
    after = sorted([f"old{i}.md" for i in range(3, 6)] + [f"new{i}.md" for i in range(40)])
    code = SYNC.format(folder=str(folder), index=str(index), model=str(hmde_dir))
    seen = []
    for trial, delay in enumerate((1.0, 2.5, 4.0, 6.0)):  # from reading the files to the commit and after it
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        with Index.open(str(index), model=str(hmde_dir), device="cpu") as opened:
            ids = sorted(opened.document_ids())
        assert ids in (before, after), trial
        seen.append("before" if ids == before else "after")
    assert seen[0] == "before"  # killed before its commit (starting Python alone takes longer)
    assert main(["index", "sync", str(folder), str(index), "--model", str(hmde_dir), "--no-progress"]) == 0
    with Index.open(str(index), model=str(hmde_dir), device="cpu") as opened:
        assert sorted(opened.document_ids()) == after
