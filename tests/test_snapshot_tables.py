"""An open snapshot's tables made once and read in memory (hmde.index.snapshot_tables, issue 96): a small snapshot's
documents table is held, so a search's records cost a dictionary's lookups, not DuckDB's 1.3 ms; what a search
returns is the same either way, after adds and deletes, and many threads asking first read the table once."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from hmde.index import snapshot_tables
from hmde.index.build import write_batches
from hmde.index.builder import IndexSettings, new_meta
from hmde.index.mutations import delete_documents
from hmde.index.store import DocumentBatch, DocumentIndex

DIM = 16


def batch(first: int, n: int, rng) -> DocumentBatch:
    ids = [f"d{first + i}" for i in range(n)]
    sents = [[f"Sentence {j} of {d}." for j in range(1 + i % 3)] for i, d in enumerate(ids)]
    vectors = [rng.standard_normal((len(s), DIM)).astype(np.float32) for s in sents]
    vectors = [v / np.linalg.norm(v, axis=1, keepdims=True) for v in vectors]
    metadata = [{"source": f"file{(first + i) % 4}.md", "n": first + i} if i % 5 else None for i in range(n)]
    return DocumentBatch(ids, [("eng", "deu", None)[i % 3] for i in range(n)], [" ".join(s) for s in sents],
                         np.stack([v.mean(0) for v in vectors]), sents, vectors, metadata)


@pytest.fixture
def index_path(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "idx"
    meta = new_meta(IndexSettings(index_type="flat", multi_vector=True), "synthetic", None, DIM, "mean", str(path))
    write_batches(str(path), meta, iter([batch(0, 30, rng)]), add=False).close()
    DocumentIndex.write_batches(str(path), meta, iter([batch(30, 12, rng)]), add=True).close()
    delete_documents(path, ["d3", "d31"])
    return path


def comparable(records: dict) -> dict:
    return {row: (r[0], r[1], r[2], r[3], np.asarray(r[4]).tolist(), r[5]) for row, r in records.items()}


def test_held_records_are_the_documents_tables_rows_and_searches_rank_the_same(index_path, monkeypatch):
    queries = np.random.default_rng(1).standard_normal((5, DIM)).astype(np.float32)
    with DocumentIndex.open(index_path) as index:
        rows = list(range(index.meta.count)) + [index.meta.count + 3]  # a deleted row and one that never was
        held = comparable(index.records(rows))
        assert index._held_records[0] is not None and len(held) == 40  # 42 written, 2 deleted
        hits = [[(h.doc_id, h.score, h.evidence, h.metadata, h.text) for h in q] for q in index.search(queries, 8)]
    monkeypatch.setattr(snapshot_tables, "HELD_RECORDS_BYTES", 0)  # every table is then too large: DuckDB reads
    with DocumentIndex.open(index_path) as index:
        assert comparable(index.records(rows)) == held
        assert index._held_records[0] is None
        assert [[(h.doc_id, h.score, h.evidence, h.metadata, h.text) for h in q]
                for q in index.search(queries, 8)] == hits
    assert held[6][5] == {"source": "file2.md", "n": 6} and held[5][5] == {}  # no metadata: {}
    assert held[4][1] == "deu" and held[5][1] is None and held[6][3] == ["Sentence 0 of d6."]


def test_a_caller_changing_its_records_changes_nothing_held(index_path):
    with DocumentIndex.open(index_path) as index:
        first = index.records([1, 2])
        first[1][3].append("changed")
        first[1][5]["source"] = "changed"
        again = index.records([1, 2])
    assert again[1][3] == ["Sentence 0 of d1.", "Sentence 1 of d1."] and again[1][5]["source"] == "file1.md"


def test_sixteen_threads_asking_first_read_the_table_once(index_path):
    with DocumentIndex.open(index_path) as index:
        scans, query = [], index._query

        def counted(sql, params=()):
            if sql.startswith("SELECT row, doc_id") and "WHERE" not in sql:
                scans.append(sql)
            return query(sql, params)

        index._query = counted
        barrier, got, failed = threading.Barrier(16), [], []

        def worker(i):
            try:
                barrier.wait()
                got.append(comparable(index.records([i, i + 20])))
            except BaseException as exc:  # pragma: no cover - reported below
                failed.append(exc)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not failed and len(scans) == 1
        assert sorted(r for g in got for r in g) == sorted([i for i in range(16) if i != 3] + [i for i in range(20, 36) if i != 31])


def test_a_flat_index_makes_its_faiss_index_at_its_first_search_from_its_own_file(index_path, monkeypatch):
    """Issue 96: a flat index keeps its sentence vectors once, in sentences.npy, and its FAISS index over them was
    made whenever a version opened: an add opened the old version and the new one, so at 10M sentences (15.4 GB
    each) it held three beside a server's. Now neither write nor open makes it; a search does, once, from the
    snapshot's own file, whatever a later write swapped in at the path."""
    made = []
    real = snapshot_tables.flat_of
    monkeypatch.setattr(snapshot_tables, "flat_of", lambda rows, dim: made.append(len(rows)) or real(rows, dim))
    rng = np.random.default_rng(2)
    query = rng.standard_normal((1, DIM)).astype(np.float32)
    with DocumentIndex.open(index_path) as before:
        assert before.meta.sentences_once and not made
        meta = before.meta
        written = DocumentIndex.write_batches(str(index_path), meta, iter([batch(42, 5, rng)]), add=True)
        assert not made  # the write opened the old version and the new: neither made its FAISS index
        with written:
            assert [h.doc_id for h in written.search(query, 50)[0]] and made == [len(written.sentence_vectors)]
            written.search(query, 3)
            assert len(made) == 1  # once per snapshot
        old_hits = before.search(query, 50)[0]  # made from its own file: the new version's five are not in it
    assert made[1] == len(before.sentence_vectors) < made[0]
    assert not {h.doc_id for h in old_hits} & {f"d{i}" for i in range(42, 47)}
