"""The living index from Python and the command line (issue 53): `hmde.Index.create/add/upsert/delete/compact/
info` and `hmde index add|upsert|delete|compact|info` are one write path; what they write equals a fresh build."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hit_lists import assert_same_hits
from hmde.cli.main import main
from hmde.index.search import Index
from hmde.index.store import DocumentIndex

DOCS = [{"doc_id": "a", "text": "The volcano erupted last night. Ash covered the villages.", "lang": "eng"},
        {"doc_id": "b", "text": "Die Katze saß auf der Matte. Es war ein sonniger Tag.", "lang": "deu"},
        {"doc_id": "c", "text": ["Le chat était assis sur le tapis.", "Il pleuvait."], "lang": "fra"},
        {"doc_id": "d", "text": "Economic growth slowed in the third quarter."}]
NEW_B = {"doc_id": "b", "text": "Der Hund schlief auf dem Sofa. Draußen regnete es.", "lang": "deu"}
QUERIES = ["Ash covered the villages.", "Der Hund schlief", "growth"]


def hits(index, **kw):
    """Each hit's id, score and evidence; sentences within 1e-4 of the best are a tie (the tiny model scores a
    document's sentences almost alike, and another CPU's arithmetic may order such a tie the other way)."""
    def best(h):
        assert h.evidence and h.evidence[0] == (h.best_sentence, h.sentence_score)
        return sorted(s for s, v in h.evidence if v > h.sentence_score - 1e-4)

    return [[(h.doc_id, h.score, best(h)) for h in q] for q in index.search(QUERIES, top_k=4, **kw)]


def test_python_writes_equal_a_fresh_build_and_a_second_reader_sees_them(hmde_dir, tmp_path):
    with Index.create(str(tmp_path / "idx"), DOCS, model=str(hmde_dir), bm25=True) as index:
        reader = Index.open(str(tmp_path / "idx"), model=str(hmde_dir))  # another handle: sees each commit
        assert index.upsert([NEW_B, {"doc_id": "e", "text": "A new page about rivers.", "lang": "eng"}]) == 2
        assert index.delete(["a"]) == 1
        expected = [DOCS[2], DOCS[3], NEW_B, {"doc_id": "e", "text": "A new page about rivers.", "lang": "eng"}]
        with Index.create(str(tmp_path / "fresh"), expected, model=str(hmde_dir), bm25=True) as fresh:
            assert_same_hits(hits(index), hits(fresh), hits(reader))
            assert_same_hits(hits(index, hybrid=True), hits(fresh, hybrid=True))
        for q in reader.search(QUERIES, top_k=10):
            assert all(h.doc_id != "a" and "Katze" not in h.text for h in q)  # neither deleted nor replaced
        info = index.info()
        assert {k: info[k] for k in ("documents", "deleted_documents", "sentences", "deleted_sentences",
                                      "languages", "index_type", "multi_vector", "bm25")} == {
            "documents": 4, "deleted_documents": 2, "sentences": 2 + 1 + 2 + 1, "deleted_sentences": 2 + 2,
            "languages": {"eng": 2, "deu": 1, "fra": 1}, "index_type": "flat", "multi_vector": True,  # d: detected
            "bm25": True}
        before = hits(index)
        assert index.compact() == 2 and index.info()["deleted_documents"] == 0
        assert_same_hits(before, hits(index), hits(reader))
        with pytest.raises(Exception, match="already in the index"):
            index.add([DOCS[2]])
        reader.close()


def test_bad_documents_are_named_by_position_and_field(hmde_dir, tmp_path):
    from hmde.errors import InputError

    with Index.create(str(tmp_path / "idx"), DOCS[:2], model=str(hmde_dir)) as index:
        for bad, message in [([{"text": "x"}], "documents[0], field 'doc_id': missing field"),
                             ([DOCS[2], {"doc_id": "z", "text": 5}],
                              "documents[1], field 'text': must be a string or a list of strings, got int"),
                             ([{"doc_id": "z", "text": "t", "lang": "!!"}],
                              "documents[0], field 'lang': must be a language code (en, deu, zh-Hant...), got '!!'"),
                             ([DOCS[2], DOCS[2]], "documents[1], field 'doc_id': the id 'c' was already used by "
                                                  "documents[0]; ids must be unique")]:
            with pytest.raises(InputError) as caught:
                index.upsert(bad)
            assert str(caught.value) == message
        assert index.info()["documents"] == 2


def test_the_command_line_writes_through_the_same_path(hmde_dir, tmp_path, capsys):
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps(d) + "\n" for d in DOCS[:3]))
    idx = tmp_path / "idx"
    assert main(["index", "build", str(hmde_dir), str(src), "-o", str(idx), "--no-progress"]) == 0
    more = tmp_path / "more.jsonl"
    more.write_text(json.dumps(DOCS[3]) + "\n")
    assert main(["index", "add", str(idx), str(more), "--no-progress"]) == 0
    changed = tmp_path / "changed.jsonl"
    changed.write_text(json.dumps(NEW_B) + "\n")
    assert main(["index", "upsert", str(idx), str(changed), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["index", "delete", str(idx), "a", "nope", "x"]) == 2
    assert capsys.readouterr().err.strip() == f"hmde: error: index {idx} holds no document 'nope', 'x': nothing was " \
        "deleted (--ignore-missing deletes the others)"
    assert main(["index", "delete", str(idx), "a", "nope", "--ignore-missing"]) == 0
    assert "deleted 1 document" in capsys.readouterr().out
    ids = tmp_path / "ids.txt"
    ids.write_text("d\n")
    assert main(["index", "delete", str(idx), "--ids", str(ids)]) == 0
    assert main(["index", "info", str(idx), "--json"]) == 0
    info = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert (info["documents"], info["deleted_documents"]) == (2, 3)
    assert main(["index", "info", str(idx)]) == 0
    text = capsys.readouterr().out
    assert "documents    2 live, 3 replaced or deleted (masked until `hmde index compact`)" in text
    with Index.open(str(idx), model=str(hmde_dir)) as opened, \
            Index.create(str(tmp_path / "fresh"), [DOCS[2], NEW_B], model=str(hmde_dir)) as fresh:
        assert_same_hits(hits(opened), hits(fresh))
    assert main(["index", "compact", str(idx)]) == 0
    with DocumentIndex.open(idx) as index:
        assert index.doc_ids() == ["c", "b"] and index.meta.deleted == 0
        np.testing.assert_array_equal(index.live_mask("documents") is None, True)


def test_a_write_makes_the_new_versions_flat_sentence_index_after_letting_the_old_go(hmde_dir, tmp_path):
    """Issue 96: a flat index's FAISS index over its sentences is made at a version's first use, not when the write
    opens it (an add held three copies: at 10M sentences, 46 GB); an Index's writer makes it once it has swapped the
    new version in, so its next search does not wait for it, and the old version is closed by then."""
    with Index.create(str(tmp_path / "idx"), DOCS[:2], model=str(hmde_dir)) as index:
        old = index.index
        assert old._sentence_index is None  # made at the first search
        index.search(["Ash"], top_k=1)
        assert old._sentence_index is not None
        index.add([DOCS[2]])
        new = index.index
        assert new is not old and new._sentence_index is not None
        assert new._sentence_index.ntotal == len(new.sentence_vectors) == 2 + 2 + 2
        assert old._rows is None  # closed: no reader held it
        assert sorted(h.doc_id for h in index.search(["Le chat était assis sur le tapis."], top_k=5)[0]) == ["a", "b", "c"]
