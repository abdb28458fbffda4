"""Deleting documents from an index and compacting it: each a commit of a new version of the folder.

A delete moves the documents' rows from docs.duckdb's documents table to its ``deleted`` table; their
vectors stay in the FAISS indexes and ``sentences.npy``, and every search masks them
(:meth:`hmde.index.store.DocumentIndex.live_selector`). The new version shares the unchanged files with
the old one (hard links; a copy where the file system has none), so a delete costs the documents table
and the BM25 index, not the vectors. ``compact`` writes the index again without the masked rows: the
FAISS indexes lose them (flat and IVF by FAISS's ``remove_ids``, the IVF lists renumbered in place; HNSW,
which cannot remove, rebuilt from its stored vectors), ``sentences.npy`` and the tables are renumbered.

Every write runs under the index's writer lock and swaps the new folder in with one atomic rename
(:func:`hmde.ground.atomic.atomic_dir`): a process killed at any point leaves the version before or the
version after, both searchable.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import HmdeError
from ..ground.atomic import atomic_dir, through_links
from ..ground.locks import exclusive_writer
from .store import (DELETED_TABLE, DOCS_TABLE, SENTENCES_TABLE, SENTENCE_INDEX, DocumentIndex, IndexMeta,
                    finish_version, move_to_deleted, write_bm25)

from .meta import SENTENCE_DTYPES
from .records import UnknownIds  # noqa: F401  (raised by delete_documents)


def share(source: Path, target: Path) -> None:
    """``target`` as the same file as ``source`` (a hard link: files of an index are never changed in place,
    only replaced), or a copy where the file system cannot link."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def delete_documents(path: str | Path, doc_ids: Sequence[str], ignore_missing: bool = False) -> int:
    """Delete ``doc_ids`` from the index at ``path``; returns how many were deleted. An id the index does not
    hold is refused (:class:`UnknownIds`, nothing deleted) unless ``ignore_missing``."""
    path = through_links(path)
    ids = list(dict.fromkeys(str(x) for x in doc_ids))
    with exclusive_writer(path):
        with DocumentIndex.open(path) as old:
            meta = IndexMeta(**asdict(old.meta))
            if meta.store == "milvus":
                from .milvus_write import delete_milvus

                return delete_milvus(path, meta, ids, ignore_missing)
            known = set(old.known_ids(ids)) if ids else set()
        missing = [x for x in ids if x not in known]
        if missing and not ignore_missing:
            raise UnknownIds(missing, path)
        if not known:
            return 0
        return _commit_delete(path, meta, [x for x in ids if x in known])


def _commit_delete(path: Path, meta: IndexMeta, ids: list[str]) -> int:
    import duckdb
    import pyarrow as pa

    with atomic_dir(path) as tmp:
        for name in ("vectors.faiss", "sentences.npy") + ((SENTENCE_INDEX,) if meta.multi_vector and
                                                         not meta.sentences_once else ()):
            share(path / name, tmp / name)
        shutil.copy2(path / "docs.duckdb", tmp / "docs.duckdb")
        con = duckdb.connect(str(tmp / "docs.duckdb"))
        try:
            con.register("leaving_ids", pa.table({"doc_id": pa.array(ids, pa.string())}))
            moved = move_to_deleted(con, "SELECT doc_id FROM leaving_ids")
            con.unregister("leaving_ids")
            meta.deleted += len(moved)
            if meta.bm25:
                write_bm25(con, tmp)
        finally:
            con.close()
        if meta.language_debias:  # the deleted documents' sentences leave their languages' means
            from .language_debias import LanguageStats

            stats = LanguageStats.load(path, meta.dim)
            sentences = np.load(path / "sentences.npy", mmap_mode="r", allow_pickle=False)
            stats.update([m[3] for m in moved], [sentences[m[1]:m[1] + m[2]] for m in moved], sign=-1)
            del sentences
            stats.save(tmp)
        finish_version(path, tmp, meta)
    return len(moved)


def compact_index(path: str | Path, sentence_dtype: str | None = None) -> int:
    """Write the index again without its deleted rows (renumbered: row i is the i-th live document in the
    order they were added); returns how many rows were dropped (0: nothing to do, nothing written).
    ``sentence_dtype`` ("float32" or "float16"; None: the index's): its sentence vectors stored as that from now on,
    written again even where nothing was deleted (nothing is embedded again; float16 to float32 keeps the rounded
    values)."""
    if sentence_dtype is not None and sentence_dtype not in SENTENCE_DTYPES:
        raise HmdeError(f"sentence_dtype must be one of {', '.join(SENTENCE_DTYPES)}, got {sentence_dtype!r}")
    path = through_links(path)
    with exclusive_writer(path):
        old = DocumentIndex.open(path)
        try:
            if old.meta.store and sentence_dtype not in (None, "float32"):
                raise HmdeError(f"index {path} keeps its vectors in {old.meta.store}, which stores them as float32")
            converts = sentence_dtype not in (None, old.meta.sentence_dtype) and not old.meta.store
            if not old.meta.deleted and not converts:  # nothing masked (an index stored in Milvus compacts by itself)
                return 0
            dropped = old.meta.deleted
            _commit_compact(path, old, sentence_dtype if converts else None)
            return dropped
        finally:
            old.close()


def _commit_compact(path: Path, old: DocumentIndex, sentence_dtype: str | None = None) -> None:
    import duckdb
    import faiss

    from ..io.growing_npy import GrowingNpy

    meta = IndexMeta(**asdict(old.meta))
    meta.sentence_dtype = sentence_dtype or meta.sentence_dtype
    live_docs = _live_rows(old, "documents", meta.count)
    live_sentences = _live_rows(old, "sentences", len(old.sentence_vectors))
    with atomic_dir(path) as tmp:
        faiss.write_index(_without(old.index, meta.index_type, live_docs, meta.count), str(tmp / "vectors.faiss"))
        if not meta.sentences_once and old.sentence_index is not None:  # else sentences.npy alone: no FAISS file
            faiss.write_index(_without(old.sentence_index, meta.index_type, live_sentences, len(old.sentence_vectors)),
                              str(tmp / SENTENCE_INDEX))
        if sentence_dtype and meta.language_debias:  # the statistics of the values as they will be stored
            _stats_as_stored(old, meta).save(tmp)
        elif (path / "languages.npz").is_file():  # the live documents' sentences: the same statistics
            share(path / "languages.npz", tmp / "languages.npz")
        with GrowingNpy(tmp / "sentences.npy", meta.dim, meta.sentence_dtype) as out:
            for start in range(0, len(live_sentences), COPY_ROWS):  # streamed: a chunk in memory, not the file
                out.append(np.asarray(old.sentence_vectors[live_sentences[start:start + COPY_ROWS]], np.float32))
        new_doc = np.full(meta.count, -1, np.int64)
        new_doc[live_docs] = np.arange(len(live_docs))
        con = duckdb.connect(str(tmp / "docs.duckdb"))
        try:
            con.execute("ATTACH ? AS old (READ_ONLY)", [str(path / "docs.duckdb")])
            # a live document's new sentence rows start where the live sentences before it end
            con.execute(DOCS_TABLE)
            metadata = "metadata" if old.has_metadata else "NULL"  # an index written before metadata has none
            con.execute("INSERT INTO docs (row, doc_id, lang, text, sent_start, sent_count, sentences, metadata) "
                        "SELECT (row_number() OVER (ORDER BY row)) - 1 AS row, doc_id, lang, text, "
                        "coalesce(sum(sent_count) OVER (ORDER BY row ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), "
                        f"0) AS sent_start, sent_count, sentences, {metadata} FROM old.docs ORDER BY row")
            con.execute(DELETED_TABLE)
            if meta.multi_vector:
                con.execute(SENTENCES_TABLE)
                con.execute("INSERT INTO sentences SELECT (row_number() OVER (ORDER BY s.sent_row)) - 1, d.new_row, "
                            "s.position FROM old.sentences s JOIN (SELECT row AS old_row, (row_number() OVER "
                            "(ORDER BY row)) - 1 AS new_row FROM old.docs) d ON s.doc_row = d.old_row "
                            "ORDER BY s.sent_row")
            con.execute("DETACH old")
            meta.count, meta.deleted = len(live_docs), 0
            if meta.bm25:
                write_bm25(con, tmp)
        finally:
            con.close()
        finish_version(path, tmp, meta)


COPY_ROWS = 65_536  # sentence vectors copied at a time by compact


def _live_rows(old: DocumentIndex, kind: str, total: int) -> np.ndarray:
    """The live rows of ``kind``, ascending: every row where nothing was deleted (``live_mask`` is None then; a
    compaction that changes the sentence vectors' kind)."""
    mask = old.live_mask(kind)
    return np.arange(total, dtype=np.int64) if mask is None else np.flatnonzero(mask)


def _stats_as_stored(old: DocumentIndex, meta: IndexMeta):
    """The language statistics of ``old``'s live documents' sentence vectors as ``meta`` stores them (a compaction
    that changes their kind: a write adds them as stored, so a fresh build of the same documents agrees)."""
    from ..io.growing_npy import as_stored
    from .language_debias import LanguageStats

    stats = LanguageStats(meta.dim)
    for lang, start, count in old._query("SELECT lang, sent_start, sent_count FROM docs ORDER BY row"):
        stats.update([lang], [as_stored(old.sentence_vectors[start:start + count], meta.sentence_dtype)])
    return stats


def _without(index, kind: str, keep: np.ndarray, total: int):
    """The FAISS index holding only the rows ``keep`` (sorted), renumbered 0 .. len(keep) - 1 in that order."""
    import faiss

    drop = np.setdiff1d(np.arange(total, dtype=np.int64), keep)
    if kind == "hnsw":  # HNSW cannot remove: a new graph over the stored vectors of the rows kept
        fresh = faiss.IndexHNSWFlat(index.d, int(index.hnsw.nb_neighbors(1)), faiss.METRIC_INNER_PRODUCT)
        fresh.hnsw.efSearch = index.hnsw.efSearch
        fresh.hnsw.efConstruction = index.hnsw.efConstruction
        for start in range(0, len(keep), COPY_ROWS):
            fresh.add(index.reconstruct_batch(keep[start:start + COPY_ROWS]))
        return fresh
    index = faiss.clone_index(index)
    if kind == "flat":  # a flat index numbers its rows by position: removing shifts the later ones down
        index.remove_ids(faiss.IDSelectorBatch(drop))
        return index
    ivf = faiss.extract_index_ivf(index)  # IVF lists store each vector's id: removed, then renumbered in place
    ivf.set_direct_map_type(faiss.DirectMap.NoMap)
    ivf.remove_ids(faiss.IDSelectorBatch(drop))
    new_id = np.full(total, -1, np.int64)
    new_id[keep] = np.arange(len(keep))
    lists = ivf.invlists
    for list_no in range(ivf.nlist):
        size = lists.list_size(list_no)
        if size:
            ids = faiss.rev_swig_ptr(lists.get_ids(list_no), size).copy()
            renumbered = np.ascontiguousarray(new_id[ids])
            codes = faiss.rev_swig_ptr(lists.get_codes(list_no), size * lists.code_size).copy()
            lists.update_entries(list_no, 0, size, faiss.swig_ptr(renumbered), faiss.swig_ptr(codes))
    return index

