"""hmde's own store of an index: FAISS for vectors, DuckDB for everything a hit shows (what
:mod:`hmde.index.store_protocol` asks of a store; the ranking above it is :mod:`hmde.index.ranking`).

Layout of ``INDEX_DIR``::

    index.json      model name and hash, dimension, method, index type, document count
    vectors.faiss   the FAISS index (row i = document i)
    sentences.npy   every document's sentence vectors, stacked (for the best-sentence snippet)
    docs.duckdb     table docs(row, doc_id, lang, text, sent_start, sent_count, sentences, metadata)

Large collections (``--engine ray``) store no sentence vectors (30 times the document vectors); their hits'
sentences are embedded at search time instead. Writes are :mod:`hmde.index.local_write` and :mod:`~.mutations`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from ..align.similarity import normalize
from ..errors import HmdeError, InputError
from ..ground.atomic import through_links
from ..ground.locks import reading
from ..ground.once import once
from .language_debias import recorded_basis
from .faiss_files import SENTENCE_INDEX, read_faiss
from .meta import IndexMeta, first_line, read_index_meta
from .row_file import RowFile, spans_to_rows
from . import snapshot_tables
from .snapshot_tables import RECORD_COLUMNS, held_records
from .snapshots import version_of
from .store_protocol import Selection
from .thread_cursors import ThreadCursors


class LocalStore:
    """An open snapshot of an index in hmde's own files: open with :meth:`open`."""

    def __init__(self, path: Path, meta: IndexMeta, index, sentences: np.ndarray, con=None, sentence_index=None,
                 sentence_rows: RowFile | None = None, deleted: np.ndarray | None = None):
        self.path, self.meta, self.index, self.sentence_vectors = path, meta, index, sentences
        self._con = None if con is None else ThreadCursors(con, "USE idx", str(path))  # a cursor per thread
        self._rows = sentence_rows  # what a search reads of sentences.npy (the memory map is for whole passes)
        self._sentence_index = sentence_index  # multi-vector indexes: FAISS over the sentence vectors
        self._sentence_owner, self._masks = None, {}  # deleted: (row, sent_start, sent_count), masked in every search
        self.deleted = deleted if deleted is not None else np.zeros((0, 3), np.int64)
        self.language_basis = np.zeros((0, meta.dim), np.float32)  # set by open where the index records one
        self._calibration = None  # hmde.index.calibration, made by the first search that calibrates
        self.replaced = 0  # a version opened by an upsert: how many documents that write replaced

    # -- reading ---------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path) -> "LocalStore":
        """Open a consistent snapshot: all four files of one version, even while a writer swaps in the next (the
        files stay open, so a later swap does not change what this reads)."""
        path = through_links(path)
        if not path.is_dir():
            raise InputError("index folder not found (build one with `hmde index build`)", path=str(path))
        with reading(path):
            opened = cls._open_files(path)
            opened.version = version_of(path)  # the version these files are (no writer swaps while we read)
            return opened

    @classmethod
    def _open_files(cls, path: Path) -> "LocalStore":
        import duckdb

        meta_path = path / "index.json"
        if not meta_path.exists():
            raise InputError("not an hmde index (no index.json)", path=str(path))
        meta = read_index_meta(meta_path)
        if meta.store:
            raise InputError(f"the index keeps its vectors in {meta.store}: open it with hmde.index.store.DocumentIndex",
                             path=str(path))
        faiss_file = meta.multi_vector and not meta.sentences_once
        files = ("vectors.faiss", "sentences.npy", "docs.duckdb") + ((SENTENCE_INDEX,) if faiss_file else ())
        for name in files:
            if not (path / name).is_file():
                raise InputError(f"the index lacks {name}; rebuild it", path=str(path / name))
        index = read_faiss(path / "vectors.faiss")
        sentence_index = read_faiss(path / SENTENCE_INDEX) if faiss_file else None
        try:
            sentences = np.load(path / "sentences.npy", mmap_mode="r", allow_pickle=False)
            rows_file = RowFile(open(path / "sentences.npy", "rb"), sentences, path / "sentences.npy")  # searches read
        except (ValueError, OSError, EOFError) as exc:
            raise InputError(f"not a readable .npy array ({first_line(exc)}); rebuild the index",
                             path=str(path / "sentences.npy")) from None
        if str(sentences.dtype) != meta.sentence_dtype:  # what the index records, or a damaged record
            rows_file.close()
            raise InputError(f"holds {sentences.dtype} vectors where index.json says {meta.sentence_dtype}; rebuild "
                             "the index", path=str(path / "sentences.npy"))
        try:
            # attached to a private in-memory database: duckdb.connect(file) would share one cached
            # instance per path within a process, so a reopened index could see the replaced file
            con = duckdb.connect()
            con.execute("ATTACH ? AS idx (READ_ONLY)", [str(path / "docs.duckdb")])
            con.execute("USE idx")
            rows, sentence_rows = con.execute("SELECT count(*), coalesce(sum(sent_count), 0) FROM docs").fetchone()
            has_deleted = con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = 'idx' AND "
                                      "table_name = 'deleted'").fetchone()[0]
            deleted = np.asarray(con.execute("SELECT row, sent_start, sent_count FROM deleted ORDER BY row").fetchall()
                                 if has_deleted else [], np.int64).reshape(-1, 3)
            rows, sentence_rows = rows + len(deleted), sentence_rows + int(deleted[:, 2].sum())
        except duckdb.Error as exc:
            raise InputError(f"not a readable DuckDB database ({first_line(exc)}); rebuild the index",
                             path=str(path / "docs.duckdb")) from None
        sizes = {"index.json count": meta.count, "vectors.faiss": index.ntotal, "docs.duckdb": rows}
        if len(set(sizes.values())) > 1 or meta.deleted != len(deleted) or index.d != meta.dim or sentences.ndim != 2 or \
                (len(sentences) and (sentences.shape[1] != meta.dim or len(sentences) != sentence_rows)) or \
                (sentence_index is not None and sentence_index.ntotal != len(sentences)):
            con.close()
            rows_file.close()
            raise InputError(f"the index's files disagree (documents: {sizes}; deleted {meta.deleted} in index.json, "
                             f"{len(deleted)} in docs.duckdb; dimension {meta.dim}, FAISS {index.d}; "
                             f"sentence vectors {sentences.shape}, rows in docs.duckdb {sentence_rows}); rebuild it",
                             path=str(path))
        opened = cls(path, meta, index, sentences, con, sentence_index, rows_file, deleted)
        try:
            opened.language_basis = recorded_basis(path, meta)
        except BaseException:
            opened.close()
            raise
        return opened

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
        if self._rows is not None:
            self._rows.close()
            self._rows = None

    def __enter__(self) -> "LocalStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def known_ids(self, doc_ids: Sequence[str]) -> list[str]:
        """Those of ``doc_ids`` the index already holds."""
        return [r[0] for r in self._query("SELECT doc_id FROM docs WHERE doc_id IN (SELECT unnest(?::VARCHAR[]))",
                                          [list(doc_ids)])]

    def ids_with_whitespace(self) -> str | None:
        """One document id that holds whitespace (a TREC run cannot), or None."""
        rows = self._query("SELECT doc_id FROM docs WHERE regexp_matches(doc_id, '\\s') LIMIT 1")
        return rows[0][0] if rows else None

    def sentence_rows(self) -> int:
        """Sentence vectors the documents table points into."""
        return int(self._query("SELECT coalesce(sum(sent_count), 0) FROM docs")[0][0])

    def _db(self):
        """This thread's cursor of the snapshot's database (made on its first query)."""
        if self._con is None:
            raise HmdeError(f"index {self.path} was closed")
        return self._con.get()

    def _query(self, sql: str, params=()):
        import duckdb

        try:
            return self._db().execute(sql, params).fetchall()
        except duckdb.Error as exc:  # damage found where a query reads (open checks only the counts)
            raise InputError(f"not a readable DuckDB database ({first_line(exc)}); rebuild the index",
                             path=str(self.path / "docs.duckdb")) from None

    @property
    def has_metadata(self) -> bool:
        """Whether the documents table has the metadata column (indexes written before issue 61 gain it on their
        next write)."""
        return once(self, "_has_metadata", lambda: bool(self._query(
            "SELECT count(*) FROM duckdb_columns() WHERE table_name = 'docs' AND column_name = 'metadata'")[0][0]))

    def metadata_fields(self) -> dict[str, list[str]]:
        """The metadata keys any document has and the kinds of value each holds (:func:`hmde.index.filters.
        value_kind`), read once per open snapshot (one scan of the documents table)."""
        from .filter_checks import duckdb_kind

        return once(self, "_metadata_fields", lambda: {} if not self.has_metadata else {
            key: sorted({duckdb_kind(t) for t in types}) for key, types in self._query(
                "SELECT key, list(DISTINCT json_type(value)) FROM docs, json_each(metadata) "
                "WHERE metadata IS NOT NULL GROUP BY key ORDER BY key")})

    def doc_ids(self) -> list[str]:
        return [r[0] for r in self._query("SELECT doc_id FROM docs ORDER BY row")]

    def live_rows_and_languages(self) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """Every live document's row, by row, and its language as a position in the stored languages (-1: none
        given), and those languages: numbers, not strings (ten million documents name a few languages)."""
        import duckdb

        try:
            names = [r[0] for r in self._db().execute("SELECT DISTINCT lang FROM docs WHERE lang IS NOT NULL "
                                                      "ORDER BY 1").fetchall()]
            columns = self._db().execute("SELECT row, coalesce(list_position(?::VARCHAR[], lang), 0) - 1 AS lang "
                                        "FROM docs ORDER BY row", [names]).fetchnumpy()
        except duckdb.Error as exc:
            raise InputError(f"not a readable DuckDB database ({first_line(exc)}); rebuild the index",
                             path=str(self.path / "docs.duckdb")) from None
        return np.asarray(columns["row"], np.int64), np.asarray(columns["lang"], np.int32), names

    @property
    def calibrates(self) -> bool:
        """Whether searches calibrate by the query's language (the index records ``subspace+calibrate``)."""
        return self.meta.language_debias == "subspace+calibrate"

    def nearest_documents(self, q: np.ndarray, k: int, selection: Selection | None, ef_search: int | None = None,
                          nprobe: int | None = None):
        """FAISS search; a selection's rows restrict it by an ID selector (exact, no over-fetching)."""
        import faiss

        kind = self.meta.index_type
        live = self.live_selector("documents")
        allowed = None if selection is None else selection.rows
        if allowed is None and live is None and not ef_search and not nprobe:
            return self.index.search(q, k)
        ivf = kind in ("ivf", "ivfpq")
        params_class = faiss.SearchParametersHNSW if kind == "hnsw" else faiss.SearchParametersIVF if ivf else \
            faiss.SearchParameters
        params = params_class()
        if allowed is not None:  # live rows only: ``allowed`` comes from the documents table
            selector = faiss.IDSelectorBatch(np.fromiter(allowed, dtype=np.int64))  # alive until the search returns
            params.sel = selector
            k = min(k, len(allowed))
        elif live is not None:
            params.sel = live
            k = min(k, self.meta.live)
        if kind == "hnsw":
            params.efSearch = max(ef_search or self.index.hnsw.efSearch, k)
        elif ivf:
            params.nprobe = nprobe or self.index.nprobe
        return self.index.search(q, k, params=params)

    def require_bm25(self):
        """The index's BM25 retriever, loaded and checked once (before any model loads)."""
        from .lexical import BM25_DIR, load_bm25

        if not self.meta.bm25:
            raise HmdeError(f"index {self.path} has no BM25 index: rebuild it with `hmde index build --bm25` for "
                            "--hybrid")
        return once(self, "_bm25", lambda: load_bm25(self.path / BM25_DIR, self.meta.live))

    def sentence_owners(self) -> np.ndarray:
        """Each stored sentence's document row (multi-vector indexes), read once from docs.duckdb."""
        def read():  # as one numpy column: 10M Python tuples took gigabytes at 10M sentences
            import duckdb

            try:
                column = self._db().execute("SELECT doc_row FROM sentences ORDER BY sent_row").fetchnumpy()["doc_row"]
            except duckdb.Error as exc:
                raise InputError(f"not a readable DuckDB database ({first_line(exc)}); rebuild the index",
                                 path=str(self.path / "docs.duckdb")) from None
            return np.asarray(column, dtype=np.int64)

        return once(self, "_sentence_owner", read)

    live_mask, live_selector = snapshot_tables.live_mask, snapshot_tables.live_selector  # of deleted rows

    @property
    def sentence_index(self):
        """FAISS over the sentence vectors (multi-vector); a flat index that keeps them once (``sentences_once``) makes
        it from its own ``sentences.npy`` at its first use: a write opens the old and the new version, and neither
        needs it (issue 96: at 10M sentences each was 15.4 GB, and an add held three)."""
        if self._sentence_index is None and self.meta.multi_vector and self.meta.sentences_once:
            return once(self, "_sentence_index", lambda: snapshot_tables.flat_of(self._sentence_file(), self.meta.dim))
        return self._sentence_index

    def _sentence_file(self) -> RowFile:
        if self._rows is None:
            raise HmdeError(f"index {self.path} was closed")
        return self._rows

    def document_vectors(self, rows: np.ndarray) -> np.ndarray:
        """The stored document vectors of ``rows`` (an IVF-PQ index: as its codes decode them; see
        :meth:`exact_document_vectors`)."""
        if self.meta.index_type in ("ivf", "ivfpq"):
            def direct_map():  # a change of the FAISS index: once, before any thread reconstructs
                import faiss

                faiss.extract_index_ivf(self.index).make_direct_map()
                return True

            once(self, "_direct_map", direct_map)
        return self.index.reconstruct_batch(np.asarray(rows, np.int64))

    def exact_document_vectors(self, rows: np.ndarray) -> np.ndarray | None:
        """Where a document vector is the mean of the stored sentence vectors (method ``mean`` with the
        sentence encoder's own vectors, the default) it is computed exactly from them; else None."""
        from ..methods import REGISTRY

        kind = REGISTRY.get(self.meta.method)
        if kind is None or not kind.mean_of_sentences or self.meta.sentence_vectors != "lower":
            return None
        owners, rows = self.sentence_owners(), np.asarray(rows, np.int64)  # each document's rows are contiguous
        starts, ends = np.searchsorted(owners, rows, "left"), np.searchsorted(owners, rows, "right")
        out = np.zeros((len(rows), self.meta.dim), np.float32)
        sentences = self._sentence_file()
        for i, (start, end) in enumerate(zip(starts, ends)):
            if end > start:
                out[i] = sentences.span(start, end).astype(np.float32).mean(0)
        return normalize(out)

    # -- what the ranking asks of a store (hmde.index.store_protocol) ----------------------------------------
    def languages(self) -> list[str]:
        return [r[0] for r in self._query("SELECT DISTINCT lang FROM docs WHERE lang IS NOT NULL ORDER BY 1")]

    def select(self, langs: Sequence[str] | None, tree) -> Selection | None:
        """The rows of the documents table that pass: DuckDB evaluates the language and the filter (its values
        parameters, never pasted into the SQL)."""
        if langs is None and tree is None:
            return None
        where, params = [], []
        if langs is not None:
            where.append("lang IN (SELECT unnest(?::VARCHAR[]))")
            params.append(list(langs))
        if tree is not None:
            from .filter_checks import check_fields, metadata_fields
            from .filter_eval import to_duckdb

            check_fields(tree, metadata_fields(self))
            sql, values = to_duckdb(tree)  # an index without metadata: check_fields let doc_id and lang alone through
            where.append(sql)
            params.extend(values)
        rows = {r[0] for r in self._query(f"SELECT row FROM docs WHERE {' AND '.join(where)}", params)}
        return Selection(len(rows), rows=rows)

    def nearest_sentences(self, q: np.ndarray, k: int, selection: Selection | None, ef_search: int | None = None,
                          nprobe: int | None = None):
        """The ``k`` nearest sentence vectors (of the selected live documents) by FAISS, with their documents' rows."""
        import faiss

        index, n = self.sentence_index, self.sentence_index.ntotal
        if n == 0:
            empty = np.zeros((len(q), 0), np.int64)
            return np.zeros((len(q), 0), np.float32), empty, empty
        owners = self.sentence_owners()
        kind = self.meta.index_type
        params = faiss.SearchParametersHNSW() if kind == "hnsw" else faiss.SearchParametersIVF() \
            if kind in ("ivf", "ivfpq") else faiss.SearchParameters()
        if selection is not None:  # only the sentences of selected documents (live ones: from the documents table)
            selector = faiss.IDSelectorBatch(np.flatnonzero(np.isin(owners, np.fromiter(selection.rows, np.int64))))
            params.sel = selector
        elif self.live_selector("sentences") is not None:  # no sentence of a deleted document
            params.sel = self.live_selector("sentences")
        if kind == "hnsw":
            params.efSearch = max(ef_search or index.hnsw.efSearch, k)
        elif kind in ("ivf", "ivfpq"):
            params.nprobe = nprobe or index.nprobe
        sims, rows = index.search(q, min(n, k), params=params)
        return sims, rows, np.where(rows >= 0, owners[np.maximum(rows, 0)], -1)

    sentence_residual_norms = snapshot_tables.stored_residual_norms  # flat and HNSW: lengths made once (issue 96)
    document_residual_norms = snapshot_tables.stored_document_norms  # the same, of the document vectors

    def sentence_vectors_of(self, rows: np.ndarray) -> np.ndarray:  # flat: the FAISS index in memory (issue 96)
        rows, file = np.asarray(rows, np.int64).reshape(-1), self._sentence_file()  # a closed index says so
        flat = self.sentence_index if self.meta.index_type == "flat" and len(rows) else None
        if flat is not None and not 0 <= rows.min() <= rows.max() < flat.ntotal:
            raise IndexError(f"rows out of range 0..{flat.ntotal - 1} of {self.path}")
        return file.take(rows) if flat is None else flat.reconstruct_batch(rows)

    def sentences_of_documents(self, rows: np.ndarray):
        owners = self.sentence_owners()
        starts = np.searchsorted(owners, rows, "left")
        counts = np.searchsorted(owners, rows, "right") - starts
        flat = spans_to_rows(starts, counts)
        vectors = self._sentence_file().take(flat).astype(np.float32) if len(flat) else \
            np.zeros((0, self.meta.dim), np.float32)
        return vectors, np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64), counts.astype(np.int64)

    def rows_where(self, tree) -> list[int]:
        if tree is None:
            return [r[0] for r in self._query("SELECT row FROM docs ORDER BY row")]
        return sorted(self.select(None, tree).rows)

    def rows_of_ids(self, doc_ids: Sequence[str]) -> dict[str, int]:
        return {doc_id: row for doc_id, row in self._query(
            "SELECT doc_id, row FROM docs WHERE doc_id IN (SELECT unnest(?::VARCHAR[]))", [list(doc_ids)])}

    def records(self, rows: Sequence[int]) -> dict:
        """``rows``' records: held in memory for a small snapshot (:mod:`.snapshot_tables`), else from DuckDB."""
        sentence_file, held = self._sentence_file(), held_records(self)
        if held is None:
            metadata = "metadata" if self.has_metadata else "NULL"
            held = {r[0]: r[1:] for r in self._query(f"SELECT {RECORD_COLUMNS}, {metadata} FROM docs WHERE row IN "
                                                     f"({','.join('?' * len(rows))})", list(rows))}
        return {row: [doc_id, dlang, text, list(sents or []), sentence_file.span(start, start + count),
                      json.loads(meta) if meta else {}]
                for row in rows if row in held for doc_id, dlang, text, start, count, sents, meta in (held[row],)}

    def search(self, query_vectors: np.ndarray, top_k: int = 10, lang: str | None = None, **options):
        """Hits per query, best first: :func:`hmde.index.ranking.search` over this store (its options)."""
        from .ranking import search

        return search(self, query_vectors, top_k, lang, **options)
