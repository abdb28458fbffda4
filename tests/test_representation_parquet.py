"""`hmde encode -o OUT.parquet` (issue 54): each document's vector, sentences, spans and sentence vectors in one
Parquet file, and `hmde index build OUT.parquet` from it without embedding again: the same index, bit for bit."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from hmde.cli.main import main
from hmde.index.store import DocumentIndex

DOCS = [{"doc_id": "a", "text": "The volcano erupted last night. Ash covered the villages.", "lang": "eng"},
        {"doc_id": "b", "text": "Die Katze saß auf der Matte. Es war ein sonniger Tag. Dann regnete es.", "lang": "deu"},
        {"doc_id": "c", "text": ["Le chat était assis sur le tapis.", "Il pleuvait."], "lang": "fra"},
        {"doc_id": "d", "text": "Economic growth slowed in the third quarter."},
        {"doc_id": "e", "text": "   "}]


def files(path):
    with DocumentIndex.open(path) as index:
        return (index.doc_ids(), index.index.reconstruct_n(0, index.meta.count), np.asarray(index.sentence_vectors),
                index._query("SELECT doc_id, lang, text, sentences FROM docs ORDER BY row"), index.meta)


def test_the_representation_round_trips_into_the_same_index(hmde_dir, tmp_path, capsys):
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in DOCS), encoding="utf-8")
    out = tmp_path / "rep.parquet"
    assert main(["encode", str(hmde_dir), str(src), "-o", str(out), "--no-progress", "--batch-size", "2"]) == 0
    handle = pq.ParquetFile(out)
    assert handle.num_row_groups == 1  # three batches of 2 gathered into one row group (4,096 documents a group)
    table = handle.read()
    assert table.column_names == ["doc_id", "lang", "text", "vector", "sentences", "sentence_start", "sentence_end",
                                  "sentence_vectors", "metadata"]
    assert table.schema.field("vector").type.list_size == 64 and str(table.schema.field("vector").type.value_type) == "float"
    meta = {k.decode(): v.decode() for k, v in table.schema.metadata.items()}
    assert meta["hmde.format"] == "hmde-representation/1" and meta["hmde.method"] == "hmde"
    rows = table.to_pylist()
    for row in rows:
        assert len(row["sentences"]) == len(row["sentence_start"]) == len(row["sentence_vectors"])
        for s, start, end in zip(row["sentences"], row["sentence_start"], row["sentence_end"]):
            assert row["text"][start:end] == s  # the spans point into the text
    assert rows[2]["text"] == "Le chat était assis sur le tapis. Il pleuvait." and rows[4]["sentences"] == []
    # the vectors equal `hmde encode`'s .npy (the same method, the same model)
    assert main(["encode", str(hmde_dir), str(src), "-o", str(tmp_path / "v.npy"), "--no-progress"]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "v.npy"), np.array([r["vector"] for r in rows]), atol=1e-5)
    # an index from the file equals one built from the text, bit for bit, and no model is loaded for it
    assert main(["index", "build", str(hmde_dir), str(src), "-o", str(tmp_path / "from-text"), "--no-progress"]) == 0
    import hmde.encoders.model_loading as loading

    real = loading.load_model
    loading.load_model = lambda *a, **k: pytest.fail("a model was loaded to index vectors already made")
    try:
        assert main(["index", "build", str(out), "-o", str(tmp_path / "from-file"), "--no-progress"]) == 0
    finally:
        loading.load_model = real
    from hmde.align.similarity import normalize

    a, b = files(tmp_path / "from-text"), files(tmp_path / "from-file")
    assert a[0] == b[0] and a[3] == b[3]
    # the file's vectors, as written, bit for bit (the index normalises every vector it stores)
    np.testing.assert_array_equal(b[1], normalize(np.array([r["vector"] for r in rows], np.float32)))
    np.testing.assert_array_equal(b[2], normalize(np.array([v for r in rows for v in r["sentence_vectors"]],
                                                           np.float32)))
    # and those of an index built from the text (encoded in other batches: float noise only)
    np.testing.assert_allclose(a[1], b[1], atol=1e-6)
    np.testing.assert_allclose(a[2], b[2], atol=1e-6)
    assert (a[4].model, a[4].model_sha256, a[4].method, a[4].multi_vector) == \
        (b[4].model, b[4].model_sha256, b[4].method, b[4].multi_vector)
    capsys.readouterr()
    # an add of the same file is refused by id, naming its line; an upsert replaces
    assert main(["index", "add", str(tmp_path / "from-file"), str(out), "--no-progress"]) == 2
    assert "the id 'a' is already in the index" in capsys.readouterr().err
    assert main(["index", "upsert", str(tmp_path / "from-file"), str(out), "--no-progress"]) == 0
    assert "upserted 5 documents (5 replaced)" in capsys.readouterr().out
    assert main(["index", "build", str(out), "-o", str(tmp_path / "x"), "--method", "mean"]) == 2
    assert "holds 'hmde' document vectors" in capsys.readouterr().err


def test_small_batches_are_gathered_into_few_row_groups(tmp_path, monkeypatch):
    """An encode batch of 32 documents per row group left 6,250 row groups at 200k documents, whose metadata the
    writer held until it closed (+70 MB); batches are gathered into row groups of ``row_group_rows``."""
    from hmde.io.representation_parquet import RepresentationInfo, RepresentationWriter, read_batches, read_info

    monkeypatch.setattr(RepresentationWriter, "row_group_rows", 8)
    rng = np.random.default_rng(0)
    path = tmp_path / "r.parquet"
    written = []
    with RepresentationWriter(path, RepresentationInfo("m", None, "mean", 4)) as writer:
        for b in range(10):
            ids = [f"d{b}-{i}" for i in range(3)]
            units = [[f"s{b}{i}a", f"s{b}{i}b"] for i in range(3)]
            vectors = rng.standard_normal((3, 4)).astype(np.float32)
            sentence_vectors = [rng.standard_normal((2, 4)).astype(np.float32) for _ in range(3)]
            writer.write(ids, ["eng"] * 3, [" ".join(u) for u in units], vectors, units, sentence_vectors)
            written.append((ids, vectors, sentence_vectors))
    assert pq.ParquetFile(path).metadata.num_row_groups == writer.row_groups == 4  # 9 + 9 + 9 + 3 rows
    info = read_info(path)
    assert info.rows == 30
    got = list(read_batches(path, info))
    assert [len(b[0]) for b in got] == [9, 9, 9, 3]
    ids = [i for b in got for i in b[0]]
    assert ids == [i for w in written for i in w[0]]
    np.testing.assert_array_equal(np.concatenate([b[3] for b in got]), np.concatenate([w[1] for w in written]))
    np.testing.assert_array_equal(np.concatenate([v for b in got for v in b[5]]),
                                  np.concatenate([v for w in written for v in w[2]]))


def test_with_sentences_is_refused_without_ray_before_any_model_loads(tmp_path, capsys):
    src = tmp_path / "d.jsonl"
    src.write_text(json.dumps({"doc_id": "a", "text": "One."}) + "\n")
    assert main(["encode", str(tmp_path / "no-model"), str(src), "-o", str(tmp_path / "v.npy"), "--with-sentences"]) == 2
    assert capsys.readouterr().err.strip() == "hmde: error: --with-sentences is for --engine ray; the local engine " \
        "writes the sentences to an -o OUT.parquet"
