"""Tables an open snapshot of hmde's own store derives from its files once, whichever thread asks first
(:func:`hmde.ground.once.once`), and then reads in memory for every search (issue 96: at 50k sentences a search's
fixed costs, not FAISS's, made hmde's ranking twice a flat FAISS search):

- :func:`flat_of`: a flat index's FAISS index over its sentence vectors, read from the snapshot's own file;
- :func:`live_mask`, :func:`live_selector`: which rows are live, as FAISS reads them;
- :func:`stored_residual_norms`, :func:`stored_document_norms`: each sentence row's, and each document row's,
  length outside the languages' directions;
- :func:`held_records`: the documents table's rows, where the snapshot is small enough to hold them (DuckDB's read of
  a search's ten rows costs about 1.3 ms whatever the table's size; a dictionary's, 0.02 ms).

A snapshot never changes (a write opens the next one), so a table made once stays true for its life.
"""

from __future__ import annotations

import numpy as np

from ..ground.once import once, owner_lock
from .language_debias import residual_norms
from .row_file import spans_to_rows

NORM_CHUNK = 65_536  # rows a pass of a lengths table (stored_residual_norms...) reads at a time
FLAT_CHUNK = 65_536  # sentence rows flat_of reads at a time
# a docs.duckdb using up to this much has its rows held in memory: about twice as much in Python (XQuAD's 2,880
# paragraphs in ten languages: 5.5 MB used, 10.4 MB held, read in 75 ms by a snapshot's first search); above it a
# FAISS search is long enough that DuckDB's 1.3 ms is a small part of it
HELD_RECORDS_BYTES = 16 << 20
RECORD_COLUMNS = "row, doc_id, lang, text, sent_start, sent_count, sentences"


def flat_of(rows, dim: int):
    """A flat inner-product FAISS index of every row of ``rows`` (a :class:`~hmde.index.row_file.RowFile` of a
    snapshot's ``sentences.npy``, checked when the snapshot opened), read straight into the index's buffer, sized
    once (adding chunks grew it by doubling: at 10M sentences, 15.4 GB, a 24 GB machine ran out, std::bad_alloc).
    float16 rows become FAISS's fp16 scalar codes, which are those rows' bytes: the same exhaustive search, its inner
    products of the float16 values, on half the memory."""
    import faiss

    if rows.dtype == np.float16:
        index = faiss.IndexScalarQuantizer(dim, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT)
    else:
        index = faiss.IndexFlatIP(dim)
    count = len(rows)
    if count:
        row_bytes = dim * rows.dtype.itemsize
        index.codes.resize(count * row_bytes)
        buffer = faiss.rev_swig_ptr(index.codes.data(), count * row_bytes)
        for start in range(0, count, FLAT_CHUNK):
            rows.read_into(start, buffer[start * row_bytes:min(count, start + FLAT_CHUNK) * row_bytes])
        index.ntotal = count
    return index


def live_mask(store, kind: str) -> np.ndarray | None:
    """Which rows of ``kind`` ("documents" or "sentences") belong to live documents; None where none was deleted."""
    if not len(store.deleted):
        return None
    if kind == "documents":
        live = np.ones(store.meta.count, bool)
        live[store.deleted[:, 0]] = False
        return live
    live = np.ones(len(store.sentence_vectors), bool)
    live[spans_to_rows(store.deleted[:, 1], store.deleted[:, 2])] = False
    return live


def live_selector(store, kind: str):
    """A FAISS selector of the live rows of ``kind`` (a bitmap: one bit a row), made once per snapshot; None where
    no document was deleted."""
    if not len(store.deleted):
        return None
    with owner_lock(store):
        if kind not in store._masks:
            import faiss

            live = live_mask(store, kind)
            bits = np.packbits(live, bitorder="little")  # FAISS reads bit i of byte i >> 3, least significant first
            store._masks[kind] = (bits, faiss.IDSelectorBitmap(len(live), faiss.swig_ptr(bits)))
        return store._masks[kind][1]


def stored_residual_norms(store, rows: np.ndarray) -> np.ndarray | None:
    """hmde's own store's ``sentence_residual_norms``: where its sentence search gives exact inner products (flat
    and HNSW over flat vectors) and the index removes its languages' directions, each of ``rows``'
    :func:`~hmde.index.language_debias.residual_norms` (-1: any value), from a table of every sentence row made once
    per snapshot (one pass over the vectors, as the sentence owners are read once; 50k sentences: 9 ms); else None."""
    basis = store.language_basis
    if store.meta.index_type not in ("flat", "hnsw") or not len(basis):
        return None

    norms = once(store, "_sentence_norms", lambda: _norms_table(store.sentence_index.ntotal,
                                                                 store.sentence_vectors_of, basis))
    return _looked_up(norms, rows)


def stored_document_norms(store, rows: np.ndarray) -> np.ndarray | None:
    """hmde's own store's ``document_residual_norms``: as :func:`stored_residual_norms`, for document rows, where
    its document index keeps exact vectors (flat and HNSW; IVF decodes codes, whose lengths differ row by row) and
    the index removes its languages' directions; else None. A search's candidate documents' cosines then divide by
    these instead of projecting every candidate's vector (50k sentences: 0.08 of a query's 5.8 ms)."""
    basis = store.language_basis
    if store.meta.index_type not in ("flat", "hnsw") or not len(basis):
        return None
    norms = once(store, "_document_norms", lambda: _norms_table(store.index.ntotal, store.document_vectors, basis))
    return _looked_up(norms, rows)


def _norms_table(n: int, vectors_of, basis: np.ndarray) -> np.ndarray:
    """Rows 0..n-1's residual norms, read ``NORM_CHUNK`` rows at a time by ``vectors_of(rows)``."""
    out = np.empty(n, np.float32)
    for start in range(0, n, NORM_CHUNK):
        part = np.arange(start, min(n, start + NORM_CHUNK), dtype=np.int64)
        out[start:start + len(part)] = residual_norms(vectors_of(part), basis)
    return out


def _looked_up(norms: np.ndarray, rows) -> np.ndarray:
    rows = np.asarray(rows, np.int64)
    return norms[np.clip(rows, 0, max(len(norms) - 1, 0))] if len(norms) else np.ones(rows.shape, np.float32)


def held_records(store) -> dict | None:
    """Every row of ``store``'s documents table as ``{row: (doc_id, lang, text, sent_start, sent_count, sentences,
    metadata JSON)}`` (:data:`RECORD_COLUMNS`' order), read in one scan the first time a search asks; None (read
    each search's rows from DuckDB) where docs.duckdb uses more than :data:`HELD_RECORDS_BYTES`. Values are tuples
    and JSON text, so a caller that changes the record or the metadata it is given (a hit's) changes nothing here."""
    def read():
        used = store._query("SELECT used_blocks * block_size FROM pragma_database_size() WHERE database_name = 'idx'")
        if not used or used[0][0] > HELD_RECORDS_BYTES:  # the snapshot's own file (a writer may have swapped in the next)
            return (None,)  # not held (the size is read once per snapshot)
        metadata = "metadata" if store.has_metadata else "NULL"
        return ({row: (doc_id, lang, text, start, count, tuple(sents or ()), meta)
                 for row, doc_id, lang, text, start, count, sents, meta in
                 store._query(f"SELECT {RECORD_COLUMNS}, {metadata} FROM docs")},)

    return once(store, "_held_records", read)[0]
