"""`hmde index build --multi-vector`: contextualised sentence vectors in FAISS, documents scored by their best sentences."""

import json

import duckdb
import numpy as np
import pytest

from hmde import HierarchicalEncoder
from hmde.cli.main import main
from hmde.index.store import DocumentIndex
from hmde.index.multivector import SentenceMatrix, score_documents

DOCS = [
    ("r1", "eng", " ".join(f"Line {i} of the harbour report." for i in range(40)) + " The cat sat on the mat."),
    ("r2", "eng", "The dog slept on the rug. It rained all day."),
    ("r3", "deu", "Die Katze saß auf der Matte. Es war ein sonniger Tag."),
    ("r4", "eng", "Economic growth slowed as exports fell. Prices rose."),
]
QUERIES = ["The cat sat on the mat.", "economic growth and exports"]


@pytest.fixture()
def built(hmde_dir, tmp_path):
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"doc_id": i, "lang": lang, "text": t}) + "\n" for i, lang, t in DOCS[:3]))
    out = tmp_path / "idx"
    assert main(["index", "build", str(hmde_dir), str(src), "-o", str(out), "--multi-vector", "--sentence-vectors",
                 "context", "--no-progress"]) == 0
    more = tmp_path / "more.jsonl"
    more.write_text(json.dumps({"doc_id": DOCS[3][0], "lang": DOCS[3][1], "text": DOCS[3][2]}) + "\n")
    assert main(["index", "build", str(more), "-o", str(out), "--add", "--no-progress"]) == 0  # keeps the mode
    return out


def search(capsys, index, *extra):
    capsys.readouterr()
    weight = [] if "--doc-weight" in extra else ["--doc-weight", "0"]  # late interaction alone unless asked
    # the scores before any calibration by the query's language (tests/test_query_language_calibration.py)
    assert main(["search", str(index), *QUERIES, "--json", "--top-k", "4", *weight, "--query-lang", "none",
                 *extra]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_scores_equal_late_interaction_over_the_contextualised_vectors(built, hmde_dir, capsys):
    model = HierarchicalEncoder.from_pretrained(hmde_dir)
    texts, langs = [t for _, _, t in DOCS], [lang for _, lang, _ in DOCS]
    _, sentences = model.encode_with_contextual(texts, langs)
    matrix = SentenceMatrix.from_documents([s.vectors for s in sentences])
    queries = model.encode_queries(QUERIES)
    for top in (1, 2):
        expected = score_documents(queries, matrix, top=top)
        hits = search(capsys, built, "--top-sentences", str(top))
        for qi, query in enumerate(QUERIES):
            got = {h["doc_id"]: h["score"] for h in hits if h["query"] == query}
            want = {DOCS[d][0]: float(expected[qi, d]) for d in np.argsort(-expected[qi])}
            assert list(got) == list(want)
            np.testing.assert_allclose(list(got.values()), list(want.values()), atol=1e-4)
            for h in (h for h in hits if h["query"] == query):  # the evidence is the sentences that scored
                assert len(h["evidence"]) == min(top, len(sentences[[d[0] for d in DOCS].index(h["doc_id"])].units))
                assert h["best_sentence"] == h["evidence"][0]["sentence"]
                assert h["score"] == pytest.approx(sum(e["score"] for e in h["evidence"]), abs=1e-4)


def test_the_bundled_model_finds_a_one_sentence_answer_in_a_long_document(tmp_path, capsys):
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"doc_id": i, "lang": lang, "text": t}) + "\n" for i, lang, t in DOCS))
    assert main(["index", "build", "hmde-use", str(src), "-o", str(tmp_path / "m"), "--multi-vector",
                 "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["search", str(tmp_path / "m"), "Eine Katze sitzt auf einer Matte", "--json", "--lang", "eng"]) == 0
    first = json.loads(capsys.readouterr().out.splitlines()[0])
    assert first["doc_id"] == "r1" and first["best_sentence"] == "The cat sat on the mat."  # one sentence of 41


def test_sentence_table_round_trip_and_options(built, capsys):
    meta = json.loads((built / "index.json").read_text())
    assert meta["multi_vector"] and meta["count"] == 4
    con = duckdb.connect(str(built / "docs.duckdb"), read_only=True)
    rows = con.execute("SELECT d.doc_id, s.position, s.sent_row - d.sent_start FROM sentences s "
                       "JOIN docs d ON d.row = s.doc_row ORDER BY s.sent_row").fetchall()
    con.close()
    assert [r[1] for r in rows] == [r[2] for r in rows]  # position = offset within the document's sentences
    assert [r[0] for r in rows].count("r1") == 41 and len(rows) == 41 + 2 + 2 + 2
    with DocumentIndex.open(built) as index:
        assert index.sentence_index.ntotal == len(rows) == len(index.sentence_vectors)
    only_deu = search(capsys, built, "--lang", "deu")
    assert {h["doc_id"] for h in only_deu} == {"r3"}
    mixed = search(capsys, built, "--doc-weight", "0.5")
    single = search(capsys, built, "--single-vector")
    assert [h["score"] for h in mixed] != [h["score"] for h in single]
    assert main(["search", str(built), "x", "--top-sentences", "0"]) == 2


@pytest.mark.parametrize("extra, message", [
    (["--sentence-vectors", "context", "--engine", "ray"], "--engine local"),
    (["--sentence-vectors", "context", "--method", "mean"], "method hmde, not mean"),
    (["--single-vector", "--sentence-vectors", "lower"], "leave it out with --single-vector"),
])
def test_multi_vector_refusals_come_before_encoding(hmde_dir, tmp_path, capsys, extra, message):
    src = tmp_path / "d.jsonl"
    src.write_text(json.dumps({"doc_id": "a", "text": "One. Two."}) + "\n")
    assert main(["index", "build", str(hmde_dir), str(src), "-o", str(tmp_path / "i"), *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "i").exists()


def test_a_sentence_encoder_and_a_single_vector_index_are_refused(labse_dir, hmde_dir, tmp_path, capsys):
    src = tmp_path / "d.jsonl"
    src.write_text(json.dumps({"doc_id": "a", "text": "One. Two."}) + "\n")
    assert main(["index", "build", str(labse_dir), str(src), "-o", str(tmp_path / "i"), "--sentence-vectors",
                 "context"]) == 2
    assert "is not an hmde model" in capsys.readouterr().err
    assert main(["index", "build", str(hmde_dir), str(src), "-o", str(tmp_path / "j"), "--single-vector",
                 "--no-progress"]) == 0
    hits = search(capsys, tmp_path / "j")  # a single-vector index: evidence is its best lower-encoder sentence
    assert all(len(h["evidence"]) == 1 for h in hits)
    more = tmp_path / "more.jsonl"
    more.write_text(json.dumps({"doc_id": "b", "text": "Three. Four."}) + "\n")
    assert main(["index", "build", str(more), "-o", str(tmp_path / "j"), "--add", "--multi-vector"]) == 2
    assert "stores one vector per document" in capsys.readouterr().err
    assert json.loads((tmp_path / "j" / "index.json").read_text())["count"] == 1


def test_candidates_bound_the_sentences_a_search_scores(built, capsys):
    """``--candidates N``: only the N nearest sentences are scored, so at most N documents can be hits."""
    everything = search(capsys, built)
    assert {h["query"] for h in everything} == set(QUERIES) and len(everything) == 2 * 4
    one = search(capsys, built, "--candidates", "1")
    assert [(h["query"], h["rank"]) for h in one] == [(q, 1) for q in QUERIES]
    assert [h["doc_id"] for h in one] == [h["doc_id"] for h in everything if h["rank"] == 1]
    with DocumentIndex.open(built) as index:
        with pytest.raises(Exception, match="candidates must be a whole number >= 1, got 0"):
            index.search(np.ones((1, index.meta.dim), np.float32), 3, candidates=0)
    with pytest.raises(SystemExit) as exc:
        main(["search", str(built), "cat", "--candidates", "0"])
    assert exc.value.code == 2


def test_a_flat_index_keeps_each_sentence_vector_once_and_ranks_as_with_a_second_copy(hmde_dir, tmp_path, capsys):
    """Issue 96: sentences.npy and sentences.faiss held every sentence vector twice (74.7 MB each); a flat index now
    makes its FAISS index from sentences.npy when it opens. An index written before (its sentences.faiss kept) ranks
    the same; adds, deletes and compaction keep one copy."""
    import faiss
    import numpy as np

    from hmde.cli.main import main

    docs = tmp_path / "d.jsonl"
    docs.write_text("".join(json.dumps({"doc_id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(
        ["The cat sat on the mat. It was sunny.", "Economic growth slowed. Exports fell.",
         "The football team won. The fans cheered.", "Researchers found a frog. It was new."])))
    index = tmp_path / "idx"
    assert main(["index", "build", str(hmde_dir), str(docs), "-o", str(index), "--no-progress"]) == 0
    assert not (index / "sentences.faiss").exists() and json.loads((index / "index.json").read_text())["sentences_once"]

    def ranked():
        capsys.readouterr()
        assert main(["search", str(index), "the cat and the frog", "--json", "--top-k", "4"]) == 0
        return [(h["doc_id"], h["score"], [e["sentence"] for e in h["evidence"]])
                for h in map(json.loads, capsys.readouterr().out.splitlines())]

    once = ranked()
    old = json.loads((index / "index.json").read_text())  # the layout before: a second copy in sentences.faiss
    flat = faiss.IndexFlatIP(old["dim"])
    flat.add(np.load(index / "sentences.npy"))
    faiss.write_index(flat, str(index / "sentences.faiss"))
    (index / "index.json").write_text(json.dumps({**old, "sentences_once": False}))
    assert ranked() == once
    (index / "sentences.faiss").unlink()
    (index / "index.json").write_text(json.dumps(old))
    more = tmp_path / "more.jsonl"
    more.write_text(json.dumps({"doc_id": "d9", "text": "A frog sat on the mat."}) + "\n")
    assert main(["index", "add", str(index), str(more), "--model", str(hmde_dir), "--no-progress"]) == 0
    assert main(["index", "delete", str(index), "d1"]) == 0
    assert main(["index", "compact", str(index)]) == 0
    assert not (index / "sentences.faiss").exists()
    kept = [json.loads(x) for x in docs.read_text().splitlines() if json.loads(x)["doc_id"] != "d1"]
    docs.write_text("".join(json.dumps(d) + "\n" for d in kept) + more.read_text())
    living, index = ranked(), tmp_path / "fresh"
    assert main(["index", "build", str(hmde_dir), str(docs), "-o", str(index), "--no-progress"]) == 0
    fresh = ranked()  # a fresh build of the same documents: the same hits and scores
    assert sorted(living) == sorted(fresh) and [h[1] for h in living] == [h[1] for h in fresh]


def test_a_flat_index_reads_its_candidates_sentence_vectors_from_memory(hmde_dir, tmp_path):
    """Issue 96: a flat index's candidates' sentence vectors come from its FAISS index in memory (6 of 17 ms a query
    at 50k sentences as file reads): the same rows as sentences.npy holds, after an add and a delete too; rows out of
    range refused; an IVF-PQ index still reads its file."""
    import numpy as np
    import pytest

    from hmde import Index
    from hmde.index.store import DocumentIndex

    texts = ["The cat sat on the mat. It was sunny.", "Economic growth slowed. Exports fell.",
             "The football team won. The fans cheered.", "Researchers found a frog. It was new."]
    path = str(tmp_path / "idx")
    with Index.create(path, [{"doc_id": f"d{i}", "text": t} for i, t in enumerate(texts)], str(hmde_dir)) as index:
        index.add([{"doc_id": "d9", "text": "A frog sat on the mat. Then it left."}])
        index.delete(["d1"])
    with DocumentIndex.open(path) as store:
        on_disk = np.load(tmp_path / "idx" / "sentences.npy")
        rows = np.array([len(on_disk) - 1, 0, 3, 3, 1])
        assert store.sentence_vectors_of(np.array([], np.int64)).shape == (0, on_disk.shape[1])
        store._rows.take = lambda rows: pytest.fail("read from the file")  # the candidates: from memory
        np.testing.assert_array_equal(store.sentence_vectors_of(rows), on_disk[rows])
        with pytest.raises(IndexError, match="out of range"):
            store.sentence_vectors_of(np.array([len(on_disk)]))


def test_aggregating_documents_side_by_side_in_one_reduction_equals_the_loop_over_them():
    """Issue 96: the best sentence of each document, for documents laid side by side (every caller's layout), is
    one numpy reduction; empty documents, an offset, trailing columns and a layout out of order (the loop) agree."""
    from hmde.index.multivector import aggregate

    rng = np.random.default_rng(1)
    for _ in range(100):
        counts = rng.integers(0, 5, size=rng.integers(1, 30))
        offset = int(rng.integers(0, 3))
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]]) + offset
        sims = rng.standard_normal((3, int(counts.sum()) + offset + int(rng.integers(0, 3)))).astype(np.float32)
        want = np.array([[sims[q, s:s + c].max() if c else 0.0 for s, c in zip(starts, counts)] for q in range(3)],
                        np.float32)
        assert np.array_equal(aggregate(sims, starts, counts), want)
        order = rng.permutation(len(counts))
        assert np.array_equal(aggregate(sims, starts[order], counts[order]), want[:, order])
        sums = np.array([[sims[q, s:s + c].sum() for s, c in zip(starts, counts)] for q in range(3)], np.float32)
        np.testing.assert_allclose(aggregate(sims, starts, counts, top=9), sums, rtol=1e-6, atol=1e-6)


def test_a_querys_candidates_group_into_their_documents_best_sentences_as_by_hand():
    """Issue 96: a search's candidate sentences (best first) give each document the sum of its best
    ``top_sentences`` scores; the default (one) takes each document's first candidate, with no grouping steps. Both
    equal a sum over each document's sorted scores, ties and single-sentence documents included."""
    from hmde.index.ranking import _best_sentences

    rng = np.random.default_rng(2)
    for _ in range(200):
        n = int(rng.integers(0, 40))
        scores = np.sort(rng.choice([0.1, 0.2, 0.5, 0.7], n) + rng.integers(0, 2, n) * rng.random(n))[::-1]
        docs = rng.integers(0, 12, n)
        for top in (1, 2, 3):
            unique, total = _best_sentences(docs, scores.astype(np.float32), top)
            want = {d: sorted(scores.astype(np.float32)[docs == d].tolist(), reverse=True)[:top] for d in set(docs)}
            assert unique.tolist() == sorted(want) and total.dtype == np.float64
            np.testing.assert_allclose(total, [sum(np.float64(x) for x in want[d]) for d in sorted(want)], rtol=1e-12)


def test_a_flat_index_is_read_into_one_buffer_row_for_row_and_a_short_file_is_named(tmp_path, monkeypatch):
    """Issue 96: a flat index's FAISS index is its sentences.npy read straight into a buffer sized once (adding
    chunks grew it by doubling: at 10M sentences, 15.4 GB, a 24 GB machine ran out of memory opening an index its
    build had allowed), from the snapshot's own open file. Several chunks give the rows bit for bit and the searches
    of an index added to at once; a file cut short is one line naming it and the row."""
    import faiss

    from hmde import InputError
    from hmde.index import snapshot_tables
    from hmde.index.row_file import RowFile

    def rows_of(path):
        return RowFile(open(path, "rb"), np.load(path, mmap_mode="r"), path)

    monkeypatch.setattr(snapshot_tables, "FLAT_CHUNK", 7)
    vectors = np.random.default_rng(0).standard_normal((50, 12)).astype(np.float32)
    path = tmp_path / "sentences.npy"
    np.save(path, vectors)
    rows = rows_of(path)
    index = snapshot_tables.flat_of(rows, 12)
    assert index.ntotal == 50 and index.codes.size() == vectors.nbytes
    np.testing.assert_array_equal(index.reconstruct_n(0, 50), vectors)
    added = faiss.IndexFlatIP(12)
    added.add(vectors)
    q = vectors[:5] + 0.1
    for got, want in zip(index.search(q, 10), added.search(q, 10)):
        np.testing.assert_array_equal(got, want)
    np.save(tmp_path / "empty.npy", vectors[:0])
    assert snapshot_tables.flat_of(rows_of(tmp_path / "empty.npy"), 12).ntotal == 0
    with open(path, "r+b") as f:
        f.truncate(128 + 23 * 48 + 10)  # the header, 23 rows and part of the 24th, after the snapshot opened it
    with pytest.raises(InputError, match=r"the file ends before row 23; rebuild the index") as err:
        snapshot_tables.flat_of(rows, 12)
    assert str(path) in str(err.value)
    with pytest.raises(IndexError, match="past the end"):
        rows.read_into(45, np.zeros(6 * 48, np.uint8))
    rows.close()
