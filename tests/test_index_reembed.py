"""`hmde index reembed` (issue 48): an index's stored documents embedded again into a new index, streamed
chunk by chunk, and resumed after an interruption with the same result."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hmde.cli.main import main
from hmde.index.store import DocumentIndex

DOCS = [(f"d{i}", "eng" if i % 2 else "deu", f"Sentence {i} is here. Another one about topic {i % 3}.")
        for i in range(25)]


@pytest.fixture()
def source(tmp_path, hmde_dir):
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"doc_id": i, "lang": lang, "text": t}) + "\n" for i, lang, t in DOCS))
    assert main(["index", "build", str(hmde_dir), str(src), "-o", str(tmp_path / "src"), "--single-vector",
                 "--no-progress"]) == 0
    assert main(["index", "build", str(hmde_dir), str(src), "-o", str(tmp_path / "direct"), "--no-progress"]) == 0
    return tmp_path / "src"


def contents(path):
    with DocumentIndex.open(path) as index:
        return index.doc_ids(), index.index.reconstruct_n(0, index.meta.count), np.asarray(index.sentence_vectors), \
            index.meta


@pytest.mark.smoke  # the smoke tier: this command once
def test_reembedding_equals_building_from_the_source_files(source, hmde_dir, tmp_path):
    assert main(["index", "reembed", str(source), str(hmde_dir), "-o", str(tmp_path / "new"), "--chunk", "7",
                 "--no-progress"]) == 0
    ids, vectors, sentences, meta = contents(tmp_path / "new")
    want_ids, want_vectors, want_sentences, want_meta = contents(tmp_path / "direct")
    assert ids == want_ids and meta.multi_vector is False  # the source's mode (one vector per document)
    np.testing.assert_allclose(vectors, want_vectors, atol=1e-5)
    assert not (tmp_path / "new" / "reembed.json").exists()
    assert main(["index", "reembed", str(source), str(hmde_dir), "-o", str(tmp_path / "new")]) == 2  # not again
    # issue 57: MODEL first, as every command takes it; the order above (INDEX_DIR MODEL) is still understood
    assert main(["index", "reembed", str(hmde_dir), str(source), "-o", str(tmp_path / "model-first"), "--chunk", "7",
                 "--no-progress"]) == 0
    assert contents(tmp_path / "model-first")[0] == want_ids


def test_an_interrupted_reembedding_resumes_where_it_stopped(source, hmde_dir, tmp_path, monkeypatch):
    import hmde.index.build

    real, commits = hmde.index.build.write_batches, []

    def killed_on_the_third(*args, **kwargs):
        commits.append(kwargs.get("add"))
        if len(commits) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(hmde.index.build, "write_batches", killed_on_the_third)
    argv = ["index", "reembed", str(source), str(hmde_dir), "-o", str(tmp_path / "new"), "--chunk", "5",
            "--no-progress"]
    assert main(argv) == 130
    assert (tmp_path / "new" / "reembed.json").exists() and len(contents(tmp_path / "new")[0]) == 10
    monkeypatch.setattr(hmde.index.build, "write_batches", real)
    assert main(argv) == 0
    ids, vectors, _, _ = contents(tmp_path / "new")
    want_ids, want_vectors, _, _ = contents(tmp_path / "direct")
    assert ids == want_ids
    np.testing.assert_allclose(vectors, want_vectors, atol=1e-5)


def test_reembed_refuses_a_folder_of_the_user_and_another_runs_output(source, tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    assert main(["index", "reembed", str(source), "hmde-mini", "-o", str(mine)]) == 2
    assert "is not an hmde index" in capsys.readouterr().err and (mine / "notes.txt").exists()
