"""float16 sentence vectors (issue 96, item 3): ``sentence_dtype="float16"`` (``--sentence-dtype float16``) stores
sentences.npy at half the bytes; a flat index searches it as FAISS's fp16 scalar codes, which are the file's own
bytes. The hits are a float32 index's (on the dev collections: MRR@10 and recall@10 equal, docs/scaling.md); every
write keeps the index's kind (its language statistics and FAISS see the values as stored), and what disagrees with
it is one line. float32 stays the default (a hit's scores are then those of the vectors every other door gives)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hit_lists import assert_same_hits
from hmde.cli.main import main
from hmde.errors import HmdeError, InputError
from hmde.index.builder import IndexSettings
from hmde.index.search import Index
from hmde.index.store import DocumentIndex
from hmde.io.growing_npy import GrowingNpy

DOCS = [{"doc_id": f"d{i}", "text": t, "lang": lang} for i, (t, lang) in enumerate([
    ("The cat sat on the mat. It was sunny.", "eng"), ("Economic growth slowed. Exports fell.", "eng"),
    ("Die Mannschaft gewann. Die Fans jubelten.", "deu"), ("Forscher fanden einen Frosch. Er war neu.", "deu"),
    ("The river flooded the town. Roads were closed.", "eng"), ("Der Zug hatte Verspätung. Alle warteten.", "deu")])]
QUERIES = ["the cat and the frog", "Wirtschaft und Exporte", "a flood closed the roads"]


def ranked(index):
    return [[(h.doc_id, h.score, [s for s, _ in h.evidence]) for h in q] for q in index.search(QUERIES, top_k=6)]


def test_float16_sentences_take_half_the_bytes_and_rank_as_float32(hmde_dir, tmp_path):
    import faiss

    with Index.create(str(tmp_path / "f32"), DOCS, model=str(hmde_dir)) as wide, \
            Index.create(str(tmp_path / "f16"), DOCS, model=str(hmde_dir), sentence_dtype="float16") as half:
        assert wide.info()["sentence_dtype"] == "float32" and half.info()["sentence_dtype"] == "float16"
        a, b = ranked(wide), ranked(half)
    stored = np.load(tmp_path / "f16" / "sentences.npy")
    assert stored.dtype == np.float16
    np.testing.assert_array_equal(stored, np.load(tmp_path / "f32" / "sentences.npy").astype(np.float16))
    assert (tmp_path / "f16" / "sentences.npy").stat().st_size - 128 == \
        ((tmp_path / "f32" / "sentences.npy").stat().st_size - 128) // 2
    for x, y in zip(a, b):  # the tiny model scores documents nearly alike: their order may swap within the rounding
        got = {d: s for d, s, _ in y}
        assert sorted(got) == sorted(d for d, _, _ in x)
        np.testing.assert_allclose([s for _, s, _ in x], [got[d] for d, _, _ in x], atol=2e-3)
        assert max(abs(s - got[d]) for d, s, _ in x) > 0  # rounded: not the float32 index read twice
    with DocumentIndex.open(tmp_path / "f16") as store:  # the fp16 codes are the file's bytes, searched exhaustively
        sentences = store.sentence_index
        assert isinstance(sentences, faiss.IndexScalarQuantizer) and sentences.ntotal == len(stored)
        assert faiss.vector_to_array(sentences.codes).tobytes() == stored.tobytes()
        np.testing.assert_array_equal(store.sentence_vectors_of(np.arange(len(stored))), stored.astype(np.float32))


def test_every_write_keeps_float16_and_equals_a_fresh_build(hmde_dir, tmp_path):
    extra = [{"doc_id": "d9", "text": "A frog sat on the mat. It rained.", "lang": "eng"}]
    changed = {"doc_id": "d2", "text": "Das Spiel endete unentschieden. Niemand jubelte.", "lang": "deu"}
    with Index.create(str(tmp_path / "idx"), DOCS, model=str(hmde_dir), sentence_dtype="float16") as index:
        index.add(extra)
        index.upsert([changed])
        index.delete(["d1"])
        index.compact()
        living = ranked(index)
    assert np.load(tmp_path / "idx" / "sentences.npy").dtype == np.float16
    final = [d for d in DOCS if d["doc_id"] not in ("d1", "d2")] + extra + [changed]
    with Index.create(str(tmp_path / "fresh"), final, model=str(hmde_dir), sentence_dtype="float16") as fresh:
        assert_same_hits([sorted(q) for q in living], [sorted(q) for q in ranked(fresh)])


def test_compaction_converts_an_index_without_embedding_and_equals_a_fresh_build(hmde_dir, tmp_path, capsys,
                                                                                  monkeypatch):
    """An index built as float32 becomes float16 by `hmde index compact --sentence-dtype float16` (or
    ``Index.compact(sentence_dtype=...)``): written again, nothing embedded again, its language statistics those of
    the values as stored, so it ranks as a fresh float16 build of the same documents."""
    from hmde.index.mutations import compact_index
    from hmde.methods.vectorizer import DocumentVectorizer

    with Index.create(str(tmp_path / "idx"), DOCS, model=str(hmde_dir)) as index:
        index.delete(["d1"])
        stored = np.load(tmp_path / "idx" / "sentences.npy")

        def refuse(*args, **kwargs):
            raise AssertionError("a compaction embeds nothing")

        monkeypatch.setattr(DocumentVectorizer, "encode_with_sentences", refuse)
        assert index.compact(sentence_dtype="float16") == 1
        assert index.info()["sentence_dtype"] == "float16"
        converted = ranked(index)
        monkeypatch.undo()
    half = np.load(tmp_path / "idx" / "sentences.npy")
    assert half.dtype == np.float16 and len(half) == len(stored) - 2  # d1's two sentences dropped
    kept = [d for d in DOCS if d["doc_id"] != "d1"]
    with Index.create(str(tmp_path / "fresh"), kept, model=str(hmde_dir), sentence_dtype="float16") as fresh:
        assert_same_hits([sorted(q) for q in converted], [sorted(q) for q in ranked(fresh)])
    capsys.readouterr()
    assert main(["index", "compact", str(tmp_path / "idx")]) == 0  # nothing deleted, the kind it has: nothing to do
    assert "holds no deleted document: nothing to compact" in capsys.readouterr().out
    assert main(["index", "compact", str(tmp_path / "idx"), "--sentence-dtype", "float32"]) == 0
    assert "0 deleted documents dropped; its sentence vectors are float32" in capsys.readouterr().out
    back = np.load(tmp_path / "idx" / "sentences.npy")
    assert back.dtype == np.float32 and np.array_equal(back, half.astype(np.float32))  # the rounded values kept
    with pytest.raises(HmdeError, match="sentence_dtype must be one of float32, float16, got 'int8'"):
        compact_index(tmp_path / "idx", "int8")


def test_an_hnsw_index_converted_keeps_its_graph_and_its_hits(hmde_dir, tmp_path):
    with Index.create(str(tmp_path / "idx"), DOCS, model=str(hmde_dir), index_type="hnsw") as index:
        before = ranked(index)
        assert index.compact(sentence_dtype="float16") == 0  # nothing deleted: written again all the same
        after = ranked(index)
        assert index.info()["sentence_dtype"] == "float16" and index.info()["documents"] == len(DOCS)
    assert np.load(tmp_path / "idx" / "sentences.npy").dtype == np.float16
    for x, y in zip(before, after):  # the graph's vectors stay float32; the stored sentences are rounded
        assert sorted(d for d, _, _ in x) == sorted(d for d, _, _ in y)
        got = {d: v for d, v, _ in y}
        np.testing.assert_allclose([v for _, v, _ in x], [got[d] for d, _, _ in x], atol=2e-3)


def test_the_command_line_builds_float16_and_refuses_what_disagrees(hmde_dir, tmp_path, capsys):
    src, more = tmp_path / "d.jsonl", tmp_path / "more.jsonl"
    src.write_text("".join(json.dumps(d) + "\n" for d in DOCS[:4]))
    more.write_text("".join(json.dumps(d) + "\n" for d in DOCS[4:]))
    idx = tmp_path / "idx"
    assert main(["index", "build", str(hmde_dir), str(src), "-o", str(idx), "--sentence-dtype", "float16",
                 "--no-progress"]) == 0
    assert json.loads((idx / "index.json").read_text())["sentence_dtype"] == "float16"
    capsys.readouterr()
    assert main(["index", "build", str(hmde_dir), str(more), "-o", str(idx), "--add", "--sentence-dtype", "float32",
                 "--no-progress"]) == 2
    assert "stores float16 sentence vectors; add to it with --sentence-dtype float16" in capsys.readouterr().err
    assert main(["index", "add", str(idx), str(more), "--no-progress"]) == 0  # the index's own kind
    assert np.load(idx / "sentences.npy").dtype == np.float16
    record = json.loads((idx / "index.json").read_text())
    (idx / "index.json").write_text(json.dumps({**record, "sentence_dtype": "float32"}))  # a record that lies
    with pytest.raises(InputError, match="sentences.npy.*holds float16 vectors where index.json says float32"):
        DocumentIndex.open(idx)
    (idx / "index.json").write_text(json.dumps({**record, "sentence_dtype": "float8"}))
    with pytest.raises(InputError, match="sentence_dtype.*must be 'float32' or 'float16'"):
        DocumentIndex.open(idx)


def test_float32_stays_the_default_and_older_records_read_as_float32(tmp_path):
    from hmde.index.builder import new_meta
    from hmde.index.meta import IndexMeta

    assert new_meta(IndexSettings(), "m", None, 8, "mean").sentence_dtype == "float32"
    assert new_meta(IndexSettings(sentence_dtype="float16"), "m", None, 8, "mean").sentence_dtype == "float16"
    assert new_meta(IndexSettings(store="milvus:./m.db"), "m", None, 8, "mean", tmp_path / "i").sentence_dtype == \
        "float32"
    assert IndexMeta(model="m", model_sha256=None, dim=8, method="mean", index_type="flat", count=0).sentence_dtype \
        == "float32"


def test_settings_refuse_an_unknown_dtype_and_float16_in_milvus():
    with pytest.raises(HmdeError, match="sentence_dtype must be one of float32, float16, got 'bfloat16'"):
        IndexSettings(sentence_dtype="bfloat16").check()
    with pytest.raises(HmdeError, match="applies to hmde's own files"):
        IndexSettings(sentence_dtype="float16", store="milvus:./m.db").check()


def test_a_growing_float16_file_is_an_ordinary_npy_and_the_memory_plan_counts_two_bytes(tmp_path, monkeypatch):
    from hmde.index.memory_plan import check_fits

    rows = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    with GrowingNpy(tmp_path / "v.npy", 3, "float16") as out:
        out.append(rows[:2])
        out.append(rows[2:])
    np.testing.assert_array_equal(np.load(tmp_path / "v.npy"), rows.astype(np.float16))
    with pytest.raises(ValueError, match="dtype must be one of float32, float16"):
        GrowingNpy(tmp_path / "w.npy", 3, "int8")
    # 1,000 documents and about 11,000 sentences of 384 numbers: 18 MB as float32, 10 MB with float16 sentences
    monkeypatch.setenv("HMDE_MEMORY_BYTES", str(15_000_000))
    with pytest.raises(HmdeError, match="needs about 18 MB"):
        check_fits("flat", True, 1000, 1_200_000, 384)
    check_fits("flat", True, 1000, 1_200_000, 384, sentence_bytes=2)
