"""An index stored in Milvus (issue 54): a real embedded engine (Milvus Lite, a file as the database, through the
same pymilvus client code as a cluster), searched with hmde's fusion and evidence, written through the one path."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pymilvus", reason="the Milvus tests need the extra: pip install 'hmde[milvus]'")
pytest.importorskip("milvus_lite", reason="the Milvus tests need Milvus Lite: pip install 'hmde[milvus]'")

from hit_lists import assert_same_hits  # noqa: E402
from hmde.cli.main import main  # noqa: E402
from hmde.index.search import Index  # noqa: E402


def top10(index, queries):  # an index in Milvus records no language debiasing: hmde's own compared without it
    return [[(h.doc_id, h.score, tuple(t for t, _ in h.evidence)) for h in q]
            for q in index.search(queries, top_k=10, query_lang="none")]


def test_xquad_articles_in_four_languages_rank_in_milvus_as_in_hmdes_own_index(shared_data, tmp_path):
    """The real default model on the dev XQuAD articles in de, el, hi and en, Greek and English questions: both
    indexes built with defaults (the language subspace and the query-language calibration) from one Parquet file;
    every search option ranks the same documents with the same evidence and scores (benchmarks/milvus_parity.py
    measures the whole set: docs/scaling.md)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import milvus_parity

    result = milvus_parity.measure(shared_data, articles=6, questions=20, folder=tmp_path)
    assert set(result) == set(milvus_parity.SETTINGS)
    for name, row in result.items():
        assert row["same_count"] and row["hits"] >= 40, (name, row)
        assert row["same_doc"] >= 0.99 and row["same_evidence"] >= 0.99, (name, row)
        assert row["max_score_diff"] <= 1e-4, (name, row)


def test_writes_reach_milvus_and_the_next_search_sees_them(hmde_dir, tmp_path, capsys):
    docs = [{"doc_id": "a", "text": "The volcano erupted last night. Ash covered the villages.", "lang": "eng"},
            {"doc_id": "b", "text": "Die Katze saß auf der Matte. Es war ein sonniger Tag.", "lang": "deu"},
            {"doc_id": "c", "text": "Le chat était assis sur le tapis. Il pleuvait.", "lang": "fra"}]
    store = f"milvus:{tmp_path / 'm.db'}"
    with Index.create(str(tmp_path / "idx"), docs, model=str(hmde_dir), store=store) as index, \
            Index.create(str(tmp_path / "own"), docs, model=str(hmde_dir)) as own:
        assert_same_hits(top10(index, ["Ash covered the villages."]), top10(own, ["Ash covered the villages."]),
                         tol=1e-4)
        new_b = {"doc_id": "b", "text": "Der Hund schlief auf dem Sofa.", "lang": "deu"}
        assert index.upsert([new_b, {"doc_id": "d", "text": "Economic growth slowed.", "lang": "eng"}]) == 2
        own.upsert([new_b, {"doc_id": "d", "text": "Economic growth slowed.", "lang": "eng"}])
        assert index.delete(["a"]) == 1 and own.delete(["a"]) == 1
        queries = ["Der Hund schlief", "volcano ash", "growth"]
        assert_same_hits(top10(index, queries), top10(own, queries), tol=1e-4)
        hits = index.search(["Katze"], top_k=10)[0]
        assert {h.doc_id for h in hits} == {"b", "c", "d"} and all("Katze" not in h.text for h in hits)
        info = index.info()
        assert (info["documents"], info["languages"], info["store"]) == (3, {"deu": 1, "eng": 1, "fra": 1},
                                                                         f"milvus:{tmp_path / 'm.db'}")
        with pytest.raises(Exception, match="holds no document 'zz'"):
            index.delete(["zz"])
    other = tmp_path / "elsewhere" / "idx"  # another folder of the same name: its collections would be ours
    other.parent.mkdir()
    with pytest.raises(Exception, match="holds a collection hmde_idx_documents already"):
        Index.create(str(other), docs, model=str(hmde_dir), store=store)
    capsys.readouterr()
    assert main(["search", str(tmp_path / "idx"), "--json", "growth", "--top-k", "1"]) == 0
    with Index.open(str(tmp_path / "own"), model=str(hmde_dir)) as own:
        assert json.loads(capsys.readouterr().out)["doc_id"] == own.search(["growth"], top_k=1)[0][0].doc_id
    assert main(["search", str(tmp_path / "idx"), "growth", "--hybrid"]) == 2
    assert "stored in Milvus" in capsys.readouterr().err


def test_a_milvus_index_records_the_language_debiasing_asked_for(hmde_dir, tmp_path, capsys):
    """It recorded none (and said so): a collection in several languages ranked otherwise than in hmde's own index."""
    src = tmp_path / "d.jsonl"
    src.write_text("".join(json.dumps({"doc_id": f"d{i}", "text": f"Text {i}.", "lang": ["eng", "deu"][i % 2]}) + "\n"
                           for i in range(6)))
    store = f"milvus:{tmp_path / 'm.db'}"
    for choice, recorded in ((None, "subspace+calibrate"), ("subspace", "subspace"), ("none", "")):
        extra = [] if choice is None else ["--language-debias", choice]
        assert main(["index", "build", str(hmde_dir), str(src), "-o", str(tmp_path / "i"), "--store", store,
                     "--no-progress", "--overwrite", *extra]) == 0
        assert "language debiasing" not in capsys.readouterr().err
        assert json.loads((tmp_path / "i" / "index.json").read_text())["language_debias"] == recorded
        assert (tmp_path / "i" / "languages.npz").is_file() == bool(recorded)
        with Index.open(str(tmp_path / "i")) as index:
            assert index.info()["language_debias"] == (recorded or "none")


def test_ids_of_any_unicode_round_trip_through_milvus_writes_and_searches(hmde_dir, tmp_path):
    """A control character in an id ended in a MilvusException after 2,048 documents were written (JSON's \\u
    escapes are no escapes of Milvus's expressions)."""
    ids = ["a\u0001b", 'q"uote\\', "tab\there", "é—ü\u2028", "plain"]
    docs = [{"doc_id": i, "text": f"Document {n} speaks of rivers \u0002 and \"bridges\".", "lang": "eng"}
            for n, i in enumerate(ids)]
    src = tmp_path / "d.jsonl"
    src.write_text("".join(json.dumps(d) + "\n" for d in docs))
    index = tmp_path / "idx"
    assert main(["index", "build", str(hmde_dir), str(src), "-o", str(index), "--store",
                 f"milvus:{tmp_path / 'm.db'}", "--no-progress"]) == 0
    assert main(["index", "upsert", str(index), str(src), "--no-progress"]) == 0
    assert main(["index", "delete", str(index), ids[0], ids[1]]) == 0
    with Index.open(str(index)) as opened:
        hits = opened.search("rivers and bridges", top_k=10, query_lang="none")[0]
        assert sorted(h.doc_id for h in hits) == sorted(ids[2:])
        assert all("\u0002" in h.text for h in hits)
        opened.delete(ids[2:])
        assert opened.search("rivers", top_k=10, query_lang="none") == [[]]


def test_a_text_milvus_would_cut_is_refused_before_anything_is_written(hmde_dir, tmp_path, capsys):
    long_text = "यह एक लंबा वाक्य है। " * 2000  # 27-character Hindi sentences: ~110,000 bytes of UTF-8
    src = tmp_path / "d.jsonl"
    src.write_text(json.dumps({"doc_id": "short", "text": "A short text."}) + "\n"
                   + json.dumps({"doc_id": "long", "text": long_text, "lang": "hin"}, ensure_ascii=False) + "\n",
                   encoding="utf-8")
    store = f"milvus:{tmp_path / 'm.db'}"
    assert main(["index", "build", "no-such-model", str(src), "-o", str(tmp_path / "i"), "--store", store]) == 2
    message = capsys.readouterr().err.strip()
    assert message.startswith(f"hmde: error: {src}, line 2, field 'text': document 'long': the text is ")
    assert "an index stored in Milvus keeps at most 65,535 (Milvus's VARCHAR): split the document" in message
    assert not (tmp_path / "i").exists()
    from hmde.errors import InputError

    with pytest.raises(InputError, match=r"documents\[1\], field 'text': document 'long'"):
        Index.create(str(tmp_path / "p"), [{"doc_id": "a", "text": "Short."}, {"doc_id": "long", "text": long_text}],
                     model=str(hmde_dir), store=store)


def test_a_store_that_disagrees_with_its_record_is_one_line_never_no_hits(hmde_dir, tmp_path, capsys):
    from hmde.index.milvus_client import client_for, release

    src = tmp_path / "d.jsonl"
    src.write_text("".join(json.dumps({"doc_id": f"d{i}", "text": f"Document {i} about rivers.", "lang": "eng"}) + "\n"
                           for i in range(4)))
    index, db = tmp_path / "idx", tmp_path / "m.db"
    assert main(["index", "build", str(hmde_dir), str(src), "-o", str(index), "--store", f"milvus:{db}",
                 "--no-progress"]) == 0
    assert main(["index", "delete", str(index), "d0"]) == 0  # hmde's own delete: the record follows the store
    assert main(["search", str(index), "rivers"]) == 0
    assert json.loads((index / "index.json").read_text())["count"] == 3
    client = client_for(str(db))  # a document removed behind hmde's back (or a manifest that fell back)
    try:
        client.delete("hmde_idx_documents", filter='doc_id == "d1"')
        client.flush("hmde_idx_documents")
    finally:
        release(client, str(db))
    capsys.readouterr()
    assert main(["search", str(index), "rivers"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip() == (
        f"hmde: error: {index / 'index.json'}: the Milvus store {db} holds 2 documents in hmde_idx_documents, and the "
        "index's record says 3: the store was changed outside hmde or damaged; rebuild the index")


from store_contract import StoreContract  # noqa: E402


class TestMilvusStore(StoreContract):
    """A real Milvus Lite engine keeps every promise of the store contract, as hmde's own files do."""

    def store_meta(self, path) -> dict:
        from hmde.index.milvus_client import collection_prefix

        return {"store": "milvus", "store_uri": str(path.parent / "milvus.db"), "store_prefix": collection_prefix(path)}

    def litter(self, path) -> list:
        from hmde.index.meta import read_index_meta
        from hmde.index.milvus_client import client_for, release

        meta = read_index_meta(path / "index.json")
        client = client_for(meta.store_uri)
        try:
            return sorted(x for x in client.list_collections() if not x.startswith(meta.store_prefix + "_")
                          or x[len(meta.store_prefix) + 1:] not in ("documents", "sentences"))
        finally:
            release(client, meta.store_uri)


def _synthetic(path, n, version, add=False, **store):
    """Write ``n`` synthetic documents of ``version`` into the Milvus index at ``path`` (a new one, or ``add``)."""
    from store_contract import batch, meta_for, world

    from hmde.index.store import DocumentIndex

    docs = world(n, seed=version, version=version)
    for d in docs:
        d["doc_id"] += f"-v{version}"
    DocumentIndex.write_batches(path, meta_for("subspace+calibrate", **store), [batch(docs)], add=add).close()


def _live_ids(path) -> list:
    from hmde.index.store import DocumentIndex

    with DocumentIndex.open(path) as index:
        return sorted(index.doc_ids())


def test_a_copied_folder_or_an_older_record_put_back_is_refused_and_deletes_nothing(tmp_path):
    """Issue 77: a copy of the folder, or an older index.json put back, named a generation the store had passed, and
    the next write through it deleted the later generations' committed documents; until then it answered from the old
    version silently. Now both are refused in one line, searches and writes alike, and nothing committed is lost."""
    import shutil

    from hmde.index.milvus_client import collection_prefix
    from hmde.index.mutations import delete_documents

    path = tmp_path / "idx"
    store = {"store": "milvus", "store_uri": str(tmp_path / "milvus.db"), "store_prefix": collection_prefix(path)}
    _synthetic(path, 20, 1, **store)
    copy = tmp_path / "copy" / "idx"
    shutil.copytree(path, copy)
    assert _live_ids(copy) == _live_ids(path)  # the same version: both read it
    _synthetic(path, 20, 2, add=True, **store)  # the original moves on
    before = _live_ids(path)
    assert len(before) == 40
    for attempt in (lambda: _live_ids(copy), lambda: _synthetic(copy, 5, 3, add=True, **store),
                    lambda: delete_documents(copy, ["d000-v1"])):
        with pytest.raises(Exception, match=r"copy/idx/index.json: this record is behind the Milvus store .* names "
                                            r"generation 1, and the store has committed generation 2 since, through "
                                            f"{path}"):
            attempt()
    assert _live_ids(path) == before

    older = (path / "index.json").read_text()  # an older record put back
    _synthetic(path, 50, 4, add=True, **store)
    newer = (path / "index.json").read_text()
    (path / "index.json").write_text(older)
    for attempt in (lambda: _live_ids(path), lambda: _synthetic(path, 5, 5, add=True, **store)):
        with pytest.raises(Exception, match="names generation 2, and the store has committed generation 3 since"):
            attempt()
    (path / "index.json").write_text(newer)
    assert len(_live_ids(path)) == 90  # nothing committed was deleted

    shutil.rmtree(copy)
    shutil.copytree(path, copy)  # a copy written through, then the original: the original is behind now
    _synthetic(copy, 3, 6, add=True, **store)
    assert len(_live_ids(copy)) == 93
    with pytest.raises(Exception, match=f"through {copy}"):
        _synthetic(path, 3, 7, add=True, **store)
    assert len(_live_ids(copy)) == 93


def test_an_overwrite_through_a_copy_leaves_the_other_folders_collections(tmp_path):
    """A copy that is behind the store, rebuilt with --overwrite, gets collections of its own and drops none of the
    folder that wrote the store (they are that index's)."""
    import shutil

    from hmde.index.milvus_client import collection_prefix

    path = tmp_path / "idx"
    store = {"store": "milvus", "store_uri": str(tmp_path / "milvus.db"), "store_prefix": collection_prefix(path)}
    _synthetic(path, 10, 1, **store)
    copy = tmp_path / "copy" / "idx"
    shutil.copytree(path, copy)
    _synthetic(path, 10, 2, add=True, **store)
    _synthetic(copy, 7, 3, **store)  # --overwrite
    assert len(_live_ids(copy)) == 7 and len(_live_ids(path)) == 20
    assert json.loads((copy / "index.json").read_text())["store_prefix"] == "hmde_idx_v2"


def test_collections_written_before_commits_are_refused_in_one_line(hmde_dir, tmp_path, capsys):
    """Issue 54's collections (the doc id as the primary key, no generations) cannot be read as commits."""
    from pymilvus import DataType, MilvusClient

    from hmde.index.milvus_client import client_for, release

    src = tmp_path / "d.jsonl"
    src.write_text(json.dumps({"doc_id": "a", "text": "A text.", "lang": "eng"}) + "\n")
    index, db = tmp_path / "idx", tmp_path / "m.db"
    assert main(["index", "build", str(hmde_dir), str(src), "-o", str(index), "--store", f"milvus:{db}",
                 "--no-progress"]) == 0
    client = client_for(str(db))
    try:  # the documents collection as issue 54 wrote it
        client.drop_collection("hmde_idx_documents")
        schema = MilvusClient.create_schema(auto_id=False)
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=100)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=8)
        client.create_collection("hmde_idx_documents", schema=schema)
    finally:
        release(client, str(db))
    capsys.readouterr()
    assert main(["search", str(index), "text"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"hmde: error: {index / 'index.json'}: the Milvus collection hmde_idx_documents was written by an hmde before "
        "Milvus writes were commits (issue 61); rebuild the index (hmde index build ... --store ... --overwrite)")


def test_options_a_milvus_index_cannot_honour_are_refused_before_the_model_loads(hmde_dir, tmp_path, capsys):
    src = tmp_path / "d.jsonl"
    src.write_text(json.dumps({"doc_id": "a", "text": "A text.", "lang": "eng"}) + "\n")
    index = tmp_path / "idx"
    assert main(["index", "build", str(hmde_dir), str(src), "-o", str(index), "--store", f"milvus:{tmp_path / 'm.db'}",
                 "--no-progress"]) == 0
    for flags, message in ((["--ef-search", "64"], "--ef-search and --nprobe tune hmde's own FAISS indexes; "
                            f"{index} keeps its vectors in milvus, whose index is tuned there"),
                           (["--hybrid"], f"index {index} is stored in Milvus: BM25 fusion (--hybrid) needs an index "
                            "of hmde's own")):
        capsys.readouterr()
        assert main(["search", str(index), "text", "--model", "no-such-model", *flags]) == 2
        assert capsys.readouterr().err.strip() == f"hmde: error: {message}"


def test_an_index_file_milvus_lite_left_empty_is_made_again(tmp_path, caplog):
    """A writer killed while Milvus Lite wrote an index file in place left it empty (0 bytes), and every later open
    failed ("File is too small: 0"; seen in the kill test of tests/store_contract.py): the empty file is removed, the
    index opens with every document, and it is said. A store that is damaged otherwise is still refused."""
    import logging
    from pathlib import Path

    from store_contract import batch, meta_for, world

    from hmde.errors import InputError
    from hmde.index.milvus_client import collection_prefix
    from hmde.index.store import DocumentIndex

    path = tmp_path / "idx"
    meta = meta_for("", store="milvus", store_uri=str(tmp_path / "m.db"), store_prefix=collection_prefix(path))
    DocumentIndex.write_batches(path, meta, [batch(world(40))]).close()
    with DocumentIndex.open(path) as index:
        before = sorted(index.doc_ids())
    made = sorted(Path(tmp_path / "m.db").glob("collections/*/partitions/*/indexes/*"))
    assert made
    made[0].write_bytes(b"")  # what a kill in the middle of its write left
    with caplog.at_level(logging.WARNING, logger="hmde.index.milvus_store"):
        with DocumentIndex.open(path) as index:
            assert sorted(index.doc_ids()) == before
    assert any("removed 1 empty index file" in r.getMessage() and made[0].name in r.getMessage()
               for r in caplog.records)
    segment = sorted(Path(tmp_path / "m.db").glob("collections/*/partitions/*/data/*.parquet"))[0]
    segment.write_bytes(b"")  # a segment holds data: never removed, the store refused in one line
    with pytest.raises(InputError, match="cannot be read"):
        DocumentIndex.open(path)
    assert segment.exists()
