"""Writing an index in hmde's own files: a build, an add or an upsert streams its batches into a new version of the
folder (FAISS, ``sentences.npy``, DuckDB, the language statistics), swapped in with one atomic rename
(:func:`hmde.ground.atomic.atomic_dir`), so an interrupted run never leaves a half-written index. Memory holds the FAISS
index and one batch, not the collection."""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from ..align.similarity import normalize
from ..errors import HmdeError
from ..ground.atomic import atomic_dir
from ..io.growing_npy import GrowingNpy, as_stored
from ..io.representation_parquet import metadata_texts
from .faiss_files import SENTENCE_INDEX, new_faiss_index, sentence_lists_for
from .meta import IndexMeta, check_compatible, finish_version
from .records import DuplicateIds


@dataclass
class DocumentBatch:
    """Documents to index: ids, languages, texts, vectors, and (optionally) their sentences."""

    doc_ids: list[str]
    langs: list[str | None]
    texts: list[str]
    doc_vectors: np.ndarray
    sentences: list[Sequence[str]] | None = None  # None: best sentences are computed at search time
    sentence_vectors: list[np.ndarray] | None = None
    metadata: list[dict] | None = None  # each document's other fields (title, url, date...): returned and filtered


DOCS_TABLE = ("CREATE TABLE IF NOT EXISTS docs (row BIGINT PRIMARY KEY, doc_id VARCHAR UNIQUE, lang VARCHAR, "
              "text VARCHAR, sent_start BIGINT, sent_count INTEGER, sentences VARCHAR[], metadata VARCHAR)")
# an index written before metadata (issue 61) gains the column on its next write; readers see NULLs till then
METADATA_COLUMN = "ALTER TABLE docs ADD COLUMN IF NOT EXISTS metadata VARCHAR"
SENTENCES_TABLE = "CREATE TABLE IF NOT EXISTS sentences (sent_row BIGINT PRIMARY KEY, doc_row BIGINT, position INTEGER)"
# documents deleted or replaced: their rows stay in the FAISS indexes and sentences.npy, masked, until `compact`
DELETED_TABLE = ("CREATE TABLE IF NOT EXISTS deleted (row BIGINT PRIMARY KEY, doc_id VARCHAR, sent_start BIGINT, "
                 "sent_count INTEGER)")


def move_to_deleted(con, ids_sql: str, params=()) -> list[tuple]:
    """Move the documents whose ids ``ids_sql`` selects from the documents table to the deleted one; returns
    their (row, sent_start, sent_count, lang). (The sentences table keeps its rows: it maps every row of
    sentences.faiss to its document.)"""
    con.execute(DELETED_TABLE)
    con.execute(f"CREATE OR REPLACE TEMP TABLE leaving AS SELECT row, doc_id, sent_start, sent_count, lang FROM docs "
                f"WHERE doc_id IN ({ids_sql})", params)
    moved = con.execute("SELECT row, sent_start, sent_count, lang FROM leaving ORDER BY row").fetchall()
    if moved:
        con.execute("INSERT INTO deleted SELECT row, doc_id, sent_start, sent_count FROM leaving")
        con.execute("DELETE FROM docs WHERE row IN (SELECT row FROM leaving)")
    con.execute("DROP TABLE leaving")
    return moved


def write_bm25(con, folder: Path) -> None:
    """The BM25 index of the live documents' texts, each known by its row."""
    from .lexical import BM25_DIR, build_bm25

    rows = con.execute("SELECT row, text FROM docs ORDER BY row").fetchall()
    build_bm25([t or "" for _, t in rows], folder / BM25_DIR, [r for r, _ in rows])


def write_local(opener, path: Path, meta: IndexMeta, batches: Iterable[DocumentBatch], add: bool,
                train_vectors: np.ndarray | None, sentence_train: np.ndarray | None = None, replace: bool = False,
                delete_ids: Sequence[str] = ()):
    """Stream ``batches`` into a new version of the index in hmde's own files at ``path`` (``add``: the old one's
    documents too; ``replace``: an upsert; ``delete_ids``: these documents leave in the same commit, as a folder's
    sync removes its deleted files), under the writer's lock; ``opener`` opens a version (the old one, and the new one
    returned)."""
    import duckdb
    import faiss
    import pyarrow as pa

    old = opener.open(path) if add else None
    if old is not None:
        old.close()
        check_compatible(old.meta, meta.model_sha256, meta.dim, path)
        if old.meta.method != meta.method:
            raise HmdeError(f"index {path} holds '{old.meta.method}' document vectors; add to it with "
                            f"--method {old.meta.method}, not {meta.method}")
        meta = IndexMeta(**asdict(old.meta))
    # the database closes however the write ends: a failed write (a full disk, a duplicate id answered 4xx
    # by the server) must not keep the temporary's file open in a long-lived process
    with atomic_dir(path) as tmp, GrowingNpy(tmp / "sentences.npy", meta.dim, meta.sentence_dtype) as sentence_file, \
            contextlib.ExitStack() as open_files:
        if old is not None:
            index = old.index
            sentence_file.extend_from(old.sentence_vectors)  # streamed: memory holds a chunk, not the file
            shutil.copy(path / "docs.duckdb", tmp / "docs.duckdb")
            row, sent_offset = old.meta.count, len(old.sentence_vectors)
            # a flat index that keeps its vectors once has no FAISS file to write: its old FAISS index is not made
            sentence_index = None if meta.sentences_once else old.sentence_index
        else:
            trains = meta.index_type in ("ivf", "ivfpq") and train_vectors is not None
            sample = normalize(train_vectors) if trains else None  # flat and HNSW need no training
            index = new_faiss_index(meta.index_type, meta.dim, sample, meta.hnsw_m, meta.ivf_lists, meta.pq_m)
            row, sent_offset = 0, 0
            sentence_index = None
            if meta.multi_vector:
                if meta.index_type in ("ivf", "ivfpq"):
                    meta.sentence_lists = meta.sentence_lists or sentence_lists_for(meta.ivf_lists, sentence_train)
                sentence_index = new_faiss_index(
                    meta.index_type, meta.dim, None if sentence_train is None else normalize(sentence_train),
                    meta.hnsw_m, meta.sentence_lists, meta.pq_m)
        con = open_files.enter_context(duckdb.connect(str(tmp / "docs.duckdb")))
        con.execute(DOCS_TABLE)
        con.execute(METADATA_COLUMN)
        con.execute(DELETED_TABLE)
        if meta.multi_vector:
            con.execute(SENTENCES_TABLE)
        stats, replaced = None, 0
        if meta.language_debias:
            from .language_debias import LanguageStats

            stats = LanguageStats.load(path, meta.dim) if old is not None else LanguageStats(meta.dim)
        for batch in batches:
            vectors = normalize(np.asarray(batch.doc_vectors, np.float32).reshape(len(batch.doc_ids), -1))
            if vectors.shape[1] != meta.dim:
                raise HmdeError(f"vectors have dimension {vectors.shape[1]}, the index {meta.dim}")
            sents = batch.sentences or [[] for _ in batch.doc_ids]
            counts = [len(x) for x in sents]
            starts = sent_offset + np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64) \
                if counts else np.zeros(0, np.int64)
            table = pa.table({
                "row": pa.array(np.arange(row, row + len(batch.doc_ids)), pa.int64()),
                "doc_id": pa.array(batch.doc_ids, pa.string()), "lang": pa.array(batch.langs, pa.string()),
                "text": pa.array(batch.texts, pa.string()), "sent_start": pa.array(starts, pa.int64()),
                "sent_count": pa.array(counts, pa.int32()),
                "sentences": pa.array([list(x) for x in sents], pa.list_(pa.string())),
                "metadata": pa.array(metadata_texts(batch.metadata, len(batch.doc_ids)), pa.string())})
            con.register("batch_rows", table)
            try:
                if replace:  # the documents these replace leave the table: their rows are masked
                    moved = move_to_deleted(con, "SELECT doc_id FROM batch_rows")
                    meta.deleted += len(moved)
                    replaced += len(moved)
                    if stats is not None:
                        stats.update([m[3] for m in moved], [old.sentence_vectors[m[1]:m[1] + m[2]] for m in moved],
                                     sign=-1)
                con.execute("INSERT INTO docs SELECT * FROM batch_rows")
            except duckdb.ConstraintException as e:
                known = con.execute("SELECT doc_id FROM batch_rows JOIN docs USING (doc_id) LIMIT 1").fetchall()
                twice = con.execute("SELECT doc_id FROM batch_rows GROUP BY 1 HAVING count(*) > 1 LIMIT 1").fetchall()
                if known:
                    raise DuplicateIds(known[0][0]) from None
                what = f"'{twice[0][0]}' occurs twice in the input" if twice else str(e)
                raise HmdeError(f"document ids must be unique: {what}") from None
            finally:
                con.unregister("batch_rows")
            index.add(vectors)
            flat = [np.asarray(v, np.float32).reshape(-1, meta.dim) for v in (batch.sentence_vectors or [])]
            if sum(len(v) for v in flat):
                batch_sentences = normalize(np.concatenate(flat))
                # as the file stores them (float16: rounded): the statistics and FAISS see the file's values
                batch_sentences = as_stored(batch_sentences, meta.sentence_dtype)
                sentence_file.append(batch_sentences)
                if stats is not None:
                    stats.update(batch.langs, np.split(batch_sentences, np.cumsum([len(v) for v in flat])[:-1]))
                if meta.multi_vector:
                    if sentence_index is not None and not meta.sentences_once:  # else in sentences.npy alone
                        sentence_index.add(batch_sentences)
                    owners = np.repeat(np.arange(row, row + len(counts)), counts)
                    con.register("sentence_rows", pa.table({
                        "sent_row": pa.array(np.arange(sent_offset, sent_offset + sum(counts)), pa.int64()),
                        "doc_row": pa.array(owners, pa.int64()),
                        "position": pa.array(np.concatenate([np.arange(c) for c in counts]), pa.int32())}))
                    con.execute("INSERT INTO sentences SELECT * FROM sentence_rows")
                    con.unregister("sentence_rows")
            row += len(batch.doc_ids)
            sent_offset += sum(counts)
        if delete_ids and old is not None:
            con.register("leaving_ids", pa.table({"doc_id": pa.array(list(delete_ids), pa.string())}))
            moved = move_to_deleted(con, "SELECT doc_id FROM leaving_ids")
            con.unregister("leaving_ids")
            meta.deleted += len(moved)
            if stats is not None:
                stats.update([m[3] for m in moved], [old.sentence_vectors[m[1]:m[1] + m[2]] for m in moved], sign=-1)
        if meta.bm25:  # over every live text, old and new: BM25's statistics are collection-wide
            write_bm25(con, tmp)
        con.close()
        meta.count = row
        if stats is not None:
            stats.save(tmp)
        faiss.write_index(index, str(tmp / "vectors.faiss"))
        if sentence_index is not None and not meta.sentences_once:
            faiss.write_index(sentence_index, str(tmp / SENTENCE_INDEX))
        finish_version(path, tmp, meta)
    written = opener.open(path)
    written.replaced = replaced
    return written

