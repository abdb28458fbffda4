"""A document index folder: FAISS for vectors, DuckDB for everything a hit shows.

Layout of ``INDEX_DIR``::

    index.json      model name and hash, dimension, method, index type, document count
    vectors.faiss   the FAISS index (row i = document i)
    sentences.npy   every document's sentence vectors, stacked (for the best-sentence snippet)
    docs.duckdb     table docs(row, doc_id, lang, text, sent_start, sent_count, sentences)

Queries go through the lower encoder alone (the paper's CLIR protocol). For each hit the
sentence of the document most similar to the query is shown: the hierarchical model has
the sentence vectors anyway. Large collections (``--engine ray``) store no sentence
vectors (30 times the document vectors); their hits' sentences are embedded at search
time instead. Documents are written in batches, so a build streams. A build or an
incremental add writes a new folder beside the old one and swaps it in, so an
interrupted run never leaves a half-written index.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from ..ground.atomic import atomic_dir, carry_foreign_entries, through_links
from ..errors import HmdeError, InputError
from ..io.growing_npy import GrowingNpy
from ..ground.locks import exclusive_writer, reading
from .language_debias import MODES as DEBIAS_MODES
from .multivector import DEFAULT_DOC_WEIGHT, DEFAULT_TOP_SENTENCES
from .records import SearchHit  # noqa: F401  (hits are named here too)
from .row_file import RowFile, spans_to_rows
from ..io.representation_parquet import metadata_texts
from ..align.similarity import normalize

INDEX_FORMAT = "hmde-index/1"
INDEX_TYPES = ("flat", "hnsw", "ivf", "ivfpq")
PQ_BITS = 8  # 256 centroids per sub-quantiser: one byte per sub-vector


@dataclass
class IndexMeta:
    model: str
    model_sha256: str | None
    dim: int
    method: str
    index_type: str
    count: int
    format: str = INDEX_FORMAT
    hnsw_m: int = 32
    ivf_lists: int = 0
    pq_m: int = 0  # ivfpq: sub-quantisers, i.e. bytes per stored vector
    bm25: bool = False  # a BM25 index of the texts in bm25/ (hmde.index.lexical), for hybrid search
    backend: str = "torch"  # what encoded it (hmde.cli.common.BACKENDS): search and --add default to it
    # multi-vector: sentences.npy holds contextualised sentence vectors, searched through sentences.faiss;
    # docs.duckdb's table sentences maps each to its document row and position (hmde.index.multivector)
    multi_vector: bool = False
    # what sentences.faiss holds: "lower" (the sentence encoder's vectors, the default since issue 42) or
    # "context" (HMDE's contextualised vectors); indexes from before the field held only the latter
    sentence_vectors: str = "context"
    sentence_lists: int = 0  # ivf/ivfpq multi-vector indexes: the inverted lists of sentences.faiss
    # rows of the FAISS indexes whose documents were deleted or replaced (docs.duckdb's table deleted): masked at
    # search time until `compact` drops them; ``count`` counts every row, ``count - deleted`` the live documents
    deleted: int = 0
    # where the vectors live: "" (this folder's FAISS and DuckDB files) or "milvus" (hmde.index.milvus_store: the
    # client's URI and the collections' prefix)
    store: str = ""
    store_uri: str = ""
    store_prefix: str = ""
    # "subspace": each query loses the span of the indexed languages' centred means (hmde.index.language_debias,
    # issue 56); "subspace+calibrate" (the default of new indexes): then the documents in the query's language
    # are calibrated (hmde.index.calibration); "": none (indexes built before issue 56)
    language_debias: str = ""

    @property
    def live(self) -> int:
        return self.count - self.deleted


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


def _new_faiss_index(index_type: str, dim: int, n_train: np.ndarray | None, hnsw_m: int, ivf_lists: int,
                     pq_m: int = 0):
    """An empty (trained, for IVF) FAISS index; inner product on unit vectors, i.e. cosine.

    ``ivfpq`` stores each vector as ``pq_m`` bytes (product quantisation) inside IVF lists:
    100M 768-d documents take about 10 GB instead of 307 GB, at some loss of recall.
    """
    import faiss

    if index_type == "flat":
        return faiss.IndexFlatIP(dim)
    if index_type == "hnsw":
        index = faiss.IndexHNSWFlat(dim, hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efSearch = 128
        return index
    if index_type in ("ivf", "ivfpq"):
        need = max(ivf_lists, 2**PQ_BITS if index_type == "ivfpq" else 0)
        if n_train is None or len(n_train) < need:
            raise HmdeError(f"an {index_type.upper()} index with {ivf_lists} lists needs at least {need} documents to "
                            f"train on, got {0 if n_train is None else len(n_train)}: lower --ivf-lists or use --type flat")
        quantizer = faiss.IndexFlatIP(dim)
        if index_type == "ivf":
            index = faiss.IndexIVFFlat(quantizer, dim, ivf_lists, faiss.METRIC_INNER_PRODUCT)
        else:
            if pq_m < 1 or dim % pq_m:
                raise HmdeError(f"--pq-m must divide the dimension {dim}, got {pq_m}")
            index = faiss.IndexIVFPQ(quantizer, dim, ivf_lists, pq_m, PQ_BITS, faiss.METRIC_INNER_PRODUCT)
        index.train(n_train)
        index.nprobe = max(1, ivf_lists // 8)
        return index
    raise HmdeError(f"unknown index type '{index_type}' ({', '.join(INDEX_TYPES)})")


class DocumentIndex:
    """Open with :meth:`open`; create or extend with :meth:`write`."""

    def __init__(self, path: Path, meta: IndexMeta, index, sentences: np.ndarray, con=None, sentence_index=None,
                 sentence_rows: RowFile | None = None, deleted: np.ndarray | None = None):
        self.path, self.meta, self.index, self.sentence_vectors, self._con = path, meta, index, sentences, con
        self._rows = sentence_rows  # what a search reads of sentences.npy (the memory map is for whole passes)
        self.sentence_index = sentence_index  # multi-vector indexes: FAISS over the sentence vectors
        self._sentence_owner = None
        # (row, sent_start, sent_count) of each deleted document: its rows are masked in every search
        self.deleted = deleted if deleted is not None else np.zeros((0, 3), np.int64)
        self._masks: dict = {}
        self.language_basis = np.zeros((0, meta.dim), np.float32)  # set by open where the index records one
        self._calibration = None  # hmde.index.calibration, made by the first search that calibrates
        self.replaced = 0  # a version opened by an upsert: how many documents that write replaced

    # -- writing ---------------------------------------------------------------------------
    @classmethod
    def write(cls, path: str | Path, meta: IndexMeta, doc_ids: Sequence[str], langs: Sequence[str | None],
              texts: Sequence[str], doc_vectors: np.ndarray, sentences: Sequence[Sequence[str]],
              sentence_vectors: Sequence[np.ndarray], add: bool = False) -> "DocumentIndex":
        """Write a new index at ``path`` (or, with ``add``, the old one plus these documents)."""
        batch = DocumentBatch(list(doc_ids), list(langs), list(texts), doc_vectors, list(sentences),
                              list(sentence_vectors))
        return cls.write_batches(path, meta, [batch], add=add, train_vectors=doc_vectors)

    @classmethod
    def write_batches(cls, path: str | Path, meta: IndexMeta, batches: Iterable["DocumentBatch"], add: bool = False,
                      train_vectors: np.ndarray | None = None,
                      sentence_train: np.ndarray | None = None, replace: bool = False) -> "DocumentIndex":
        """Stream ``batches`` into a new index at ``path`` (or, with ``add``, onto the old one).

        Memory holds the FAISS index and one batch, not the collection: each batch's
        vectors are added and its rows inserted into DuckDB (as an Arrow table) before the
        next is read. ``train_vectors`` trains an IVF index (a sample suffices), ``sentence_train``
        the sentence index of an IVF multi-vector index.
        Documents without sentences (e.g. from ``--engine ray``) get their best sentence
        computed at search time. ``meta.count`` is set from what was written.
        Concurrent writers of one index wait for each other (:mod:`hmde.ground.locks`).
        ``replace`` (an upsert, with ``add``): a document whose id the index holds replaces it; the old row is
        masked (:meth:`live_selector`) until ``compact``.
        """
        path = through_links(path)  # readers and writers of a linked index share the real folder's locks
        with exclusive_writer(path):  # one writer at a time, from reading the old index to the swap
            stored = read_index_meta(path / "index.json") if add and (path / "index.json").is_file() else None
            if (stored or meta).store == "milvus":
                from .milvus_store import write_milvus

                return write_milvus(path, meta, batches, add, replace, read_index_meta, finish_version)
            return cls._write_locked(path, meta, batches, add, train_vectors, sentence_train, replace)

    @classmethod
    def _write_locked(cls, path: Path, meta: IndexMeta, batches: Iterable["DocumentBatch"], add: bool,
                      train_vectors: np.ndarray | None, sentence_train: np.ndarray | None = None,
                      replace: bool = False) -> "DocumentIndex":
        import duckdb
        import faiss
        import pyarrow as pa

        old = cls.open(path) if add else None
        if old is not None:
            old.close()
            check_compatible(old.meta, meta.model_sha256, meta.dim, path)
            if old.meta.method != meta.method:
                raise HmdeError(f"index {path} holds '{old.meta.method}' document vectors; add to it with "
                                f"--method {old.meta.method}, not {meta.method}")
            meta = IndexMeta(**asdict(old.meta))
        # the database closes however the write ends: a failed write (a full disk, a duplicate id answered 4xx
        # by the server) must not keep the temporary's file open in a long-lived process
        with atomic_dir(path) as tmp, GrowingNpy(tmp / "sentences.npy", meta.dim) as sentence_file, \
                contextlib.ExitStack() as open_files:
            if old is not None:
                index = old.index
                sentence_file.extend_from(old.sentence_vectors)  # streamed: memory holds a chunk, not the file
                shutil.copy(path / "docs.duckdb", tmp / "docs.duckdb")
                row, sent_offset = old.meta.count, len(old.sentence_vectors)
                sentence_index = old.sentence_index
            else:
                trains = meta.index_type in ("ivf", "ivfpq") and train_vectors is not None
                sample = normalize(train_vectors) if trains else None  # flat and HNSW need no training
                index = _new_faiss_index(meta.index_type, meta.dim, sample, meta.hnsw_m, meta.ivf_lists, meta.pq_m)
                row, sent_offset = 0, 0
                sentence_index = None
                if meta.multi_vector:
                    if meta.index_type in ("ivf", "ivfpq"):
                        meta.sentence_lists = meta.sentence_lists or sentence_lists_for(meta.ivf_lists, sentence_train)
                    sentence_index = _new_faiss_index(
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
                    what = f"'{known[0][0]}' is already in the index (an upsert replaces it)" if known else \
                        f"'{twice[0][0]}' occurs twice in the input" if twice else str(e)
                    raise HmdeError(f"document ids must be unique: {what}") from None
                finally:
                    con.unregister("batch_rows")
                index.add(vectors)
                flat = [np.asarray(v, np.float32).reshape(-1, meta.dim) for v in (batch.sentence_vectors or [])]
                if sum(len(v) for v in flat):
                    batch_sentences = normalize(np.concatenate(flat))
                    sentence_file.append(batch_sentences)
                    if stats is not None:
                        stats.update(batch.langs, np.split(batch_sentences, np.cumsum([len(v) for v in flat])[:-1]))
                    if sentence_index is not None:
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
            if meta.bm25:  # over every live text, old and new: BM25's statistics are collection-wide
                write_bm25(con, tmp)
            con.close()
            meta.count = row
            if stats is not None:
                stats.save(tmp)
            faiss.write_index(index, str(tmp / "vectors.faiss"))
            if sentence_index is not None:
                faiss.write_index(sentence_index, str(tmp / SENTENCE_INDEX))
            finish_version(path, tmp, meta)
        written = cls.open(path)
        written.replaced = replaced
        return written

    # -- reading ---------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path) -> "DocumentIndex":
        """Open a consistent snapshot: all four files of one version, even while a writer swaps
        in the next (the files stay open, so a later swap does not change what this reads)."""
        path = through_links(path)
        if not path.is_dir():
            raise InputError("index folder not found (build one with `hmde index build`)", path=str(path))
        with reading(path):
            return cls._open_files(path)

    @classmethod
    def _open_files(cls, path: Path) -> "DocumentIndex":
        import duckdb

        meta_path = path / "index.json"
        if not meta_path.exists():
            raise InputError("not an hmde index (no index.json)", path=str(path))
        meta = read_index_meta(meta_path)
        if meta.store == "milvus":
            from .milvus_store import MilvusIndex

            return MilvusIndex.open(path, meta)
        files = ("vectors.faiss", "sentences.npy", "docs.duckdb") + ((SENTENCE_INDEX,) if meta.multi_vector else ())
        for name in files:
            if not (path / name).is_file():
                raise InputError(f"the index lacks {name}; rebuild it", path=str(path / name))
        index = _read_faiss(path / "vectors.faiss")
        sentence_index = _read_faiss(path / SENTENCE_INDEX) if meta.multi_vector else None
        try:
            sentences = np.load(path / "sentences.npy", mmap_mode="r", allow_pickle=False)
            rows_file = RowFile(open(path / "sentences.npy", "rb"), sentences, path / "sentences.npy")  # searches read
        except (ValueError, OSError, EOFError) as exc:
            raise InputError(f"not a readable .npy array ({_first_line(exc)}); rebuild the index",
                             path=str(path / "sentences.npy")) from None
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
            raise InputError(f"not a readable DuckDB database ({_first_line(exc)}); rebuild the index",
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
        if meta.language_debias:
            from .language_debias import LanguageStats

            try:
                opened.language_basis = LanguageStats.load(path, meta.dim).basis()
            except BaseException:
                opened.close()
                raise
        return opened

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None
        if self._rows is not None:
            self._rows.close()
            self._rows = None

    def __enter__(self) -> "DocumentIndex":
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

    def _query(self, sql: str, params=()):
        import duckdb

        if self._con is None:
            raise HmdeError(f"index {self.path} was closed")
        try:
            return self._con.execute(sql, params).fetchall()
        except duckdb.Error as exc:  # damage found where a query reads (open checks only the counts)
            raise InputError(f"not a readable DuckDB database ({_first_line(exc)}); rebuild the index",
                             path=str(self.path / "docs.duckdb")) from None

    @property
    def has_metadata(self) -> bool:
        """Whether the documents table has the metadata column (indexes written before issue 61 gain it on their
        next write)."""
        if getattr(self, "_has_metadata", None) is None:
            self._has_metadata = bool(self._query("SELECT count(*) FROM duckdb_columns() WHERE table_name = 'docs' "
                                                  "AND column_name = 'metadata'")[0][0])
        return self._has_metadata

    def doc_ids(self) -> list[str]:
        return [r[0] for r in self._query("SELECT doc_id FROM docs ORDER BY row")]

    def live_rows_and_languages(self) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """Every live document's row, by row, and its language as a position in the stored languages (-1: none
        given), and those languages: numbers, not strings (ten million documents name a few languages)."""
        import duckdb

        if self._con is None:
            raise HmdeError(f"index {self.path} was closed")
        try:
            names = [r[0] for r in self._con.execute("SELECT DISTINCT lang FROM docs WHERE lang IS NOT NULL "
                                                     "ORDER BY 1").fetchall()]
            columns = self._con.execute("SELECT row, coalesce(list_position(?::VARCHAR[], lang), 0) - 1 AS lang "
                                        "FROM docs ORDER BY row", [names]).fetchnumpy()
        except duckdb.Error as exc:
            raise InputError(f"not a readable DuckDB database ({_first_line(exc)}); rebuild the index",
                             path=str(self.path / "docs.duckdb")) from None
        return np.asarray(columns["row"], np.int64), np.asarray(columns["lang"], np.int32), names

    @property
    def calibrates(self) -> bool:
        """Whether searches calibrate by the query's language (the index records ``subspace+calibrate``)."""
        return self.meta.language_debias == "subspace+calibrate"

    def _calibration_plan(self, q: np.ndarray, query_langs, lang: str | None, multi_vector: bool,
                          top_sentences: int, doc_weight: float):
        """Per query (language number, baseline) for :func:`hmde.index.language_debias.calibrate`, or None
        where nothing is calibrated (the index does not, no query language, one language searched)."""
        if not self.calibrates or query_langs is None or lang:
            return None
        if len(query_langs) != len(q):
            raise HmdeError(f"{len(query_langs)} query languages for {len(q)} queries")
        if self._calibration is None:
            from .calibration import QueryLanguageCalibration

            self._calibration = QueryLanguageCalibration(self)
        codes = self._calibration.plan(query_langs)
        if all(c < 0 for c in codes):
            return None
        baselines = self._calibration.baselines(q, multi_vector, top_sentences, doc_weight)
        return [(c, float(b)) if c >= 0 else None for c, b in zip(codes, baselines)]

    def _calibrated(self, plan, qi: int, rows: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """One query's candidate scores calibrated by its plan (unchanged where it has none)."""
        if plan is None or plan[qi] is None:
            return scores
        from .language_debias import calibrate

        code, baseline = plan[qi]
        return calibrate(scores, self._calibration.row_language[rows] == code, baseline)

    def _search(self, q: np.ndarray, k: int, allowed: set[int] | None, ef_search: int | None, nprobe: int | None):
        """FAISS search; ``allowed`` restricts it to those rows by an ID selector (exact, no over-fetching)."""
        import faiss

        kind = self.meta.index_type
        if (ef_search and kind != "hnsw") or (nprobe and kind not in ("ivf", "ivfpq")):
            option = "--ef-search" if ef_search else "--nprobe"
            raise HmdeError(f"{option} applies to {'HNSW' if ef_search else 'IVF'} indexes; {self.path} is {kind}")
        live = self.live_selector("documents")
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

    def _search_debiased(self, q: np.ndarray, k: int, allowed, ef_search, nprobe):
        """:meth:`_search` where the index removes its languages' directions: a larger pool by the projected
        query, re-scored with each document vector's projected length, best first."""
        total = self.meta.live if allowed is None else len(allowed)
        sims, rows = self._search(q, min(total, max(k, DEBIASED_POOL)), allowed, ef_search, nprobe)
        sims = np.where(rows >= 0, sims, -np.inf).astype(np.float32)
        for qi in range(len(q)):
            found = rows[qi] >= 0
            sims[qi, found] = self._cosines(self.document_vectors(rows[qi][found]), q[qi])
        order = np.argsort(-sims, axis=1, kind="stable")[:, :k]
        return np.take_along_axis(sims, order, 1), np.take_along_axis(rows, order, 1)

    def require_bm25(self):
        """The index's BM25 retriever, loaded and checked once (before any model loads)."""
        from .lexical import BM25_DIR, load_bm25

        if not self.meta.bm25:
            raise HmdeError(f"index {self.path} has no BM25 index: rebuild it with `hmde index build --bm25` for "
                            "--hybrid")
        if getattr(self, "_bm25", None) is None:
            self._bm25 = load_bm25(self.path / BM25_DIR, self.meta.live)
        return self._bm25

    def _fuse(self, dense_rows: np.ndarray, texts: Sequence[str], allowed: set[int] | None, pool: int, top_k: int,
              weights: Sequence[float], rrf_k: int) -> list[list[tuple[float, int]]]:
        from .lexical import bm25_search, reciprocal_rank_fusion

        retriever = self.require_bm25()
        if len(texts) != len(dense_rows):
            raise HmdeError("hybrid search needs each query's text")
        lexical = bm25_search(retriever, texts, self.meta.live if allowed is not None else pool,
                              self.meta.live)
        out = []
        for qi, text_hits in enumerate(lexical):
            bm25_rows = [r for r, _ in text_hits if allowed is None or r in allowed][:pool]
            dense = [int(r) for r in dense_rows[qi] if r >= 0]
            fused = reciprocal_rank_fusion([dense, bm25_rows], weights, rrf_k)[:top_k]
            out.append([(score, row) for row, score in fused])
        return out

    def sentence_owners(self) -> np.ndarray:
        """Each stored sentence's document row (multi-vector indexes), read once from docs.duckdb."""
        if self._sentence_owner is None:  # as one numpy column: 10M Python tuples took gigabytes at 10M sentences
            import duckdb

            if self._con is None:
                raise HmdeError(f"index {self.path} was closed")
            try:
                column = self._con.execute("SELECT doc_row FROM sentences ORDER BY sent_row").fetchnumpy()["doc_row"]
            except duckdb.Error as exc:
                raise InputError(f"not a readable DuckDB database ({_first_line(exc)}); rebuild the index",
                                 path=str(self.path / "docs.duckdb")) from None
            self._sentence_owner = np.asarray(column, dtype=np.int64)
        return self._sentence_owner

    def _multi_vector_rows(self, q: np.ndarray, top_k: int, allowed: set[int] | None, top_sentences: int,
                           doc_weight: float, ef_search: int | None, nprobe: int | None = None,
                           pool: int | None = None, plan=None) -> list[list[tuple[float, int]]]:
        """Documents by their best sentences (:mod:`hmde.index.multivector`): the ``pool`` nearest
        sentences of each query are grouped by document; a document's score is the sum of its
        ``top_sentences`` best among them, plus ``doc_weight`` times its document vector's cosine.
        In an IVF-PQ index the candidates are found by their compressed codes and scored exactly
        from ``sentences.npy``."""
        import faiss

        from .multivector import check_scoring

        check_scoring(top_sentences, doc_weight)
        pool = pool or (COMPRESSED_SENTENCE_POOL if self.meta.index_type == "ivfpq" else SENTENCE_POOL)
        index, n = self.sentence_index, self.sentence_index.ntotal
        if n == 0:
            return [[] for _ in range(len(q))]
        owners = self.sentence_owners()
        kind = self.meta.index_type
        params = faiss.SearchParametersHNSW() if kind == "hnsw" else faiss.SearchParametersIVF() \
            if kind in ("ivf", "ivfpq") else faiss.SearchParameters()
        if allowed is not None:  # only the sentences of allowed documents (live ones: from the documents table)
            selector = faiss.IDSelectorBatch(np.flatnonzero(np.isin(owners, np.fromiter(allowed, np.int64))))
            params.sel = selector
        elif self.live_selector("sentences") is not None:  # no sentence of a deleted document
            params.sel = self.live_selector("sentences")
        if kind == "hnsw":
            params.efSearch = max(ef_search or index.hnsw.efSearch, pool)
        elif kind in ("ivf", "ivfpq"):
            params.nprobe = nprobe or index.nprobe
        sims, rows = index.search(q, min(n, pool), params=params)
        # compressed codes find the candidates, and their stored vectors score them exactly; where the index removes
        # its languages' directions, the candidates' cosines with both sides projected need those vectors too
        if kind == "ivfpq" or len(self.language_basis):
            sims = exact_scores(self._sentence_file(), rows, q, self.language_basis)
        out = []
        for qi in range(len(q)):
            found = rows[qi] >= 0
            docs, scores = owners[rows[qi][found]], sims[qi][found]  # FAISS gives sentences best first
            order = np.argsort(docs, kind="stable")  # grouped by document, best first within each
            docs, scores = docs[order], scores[order]
            starts = np.flatnonzero(np.r_[True, docs[1:] != docs[:-1]])
            rank_in_doc = np.arange(len(docs)) - np.repeat(starts, np.diff(np.r_[starts, len(docs)]))
            keep = rank_in_doc < top_sentences
            unique, slot = np.unique(docs[keep], return_inverse=True)
            total = np.bincount(slot, weights=scores[keep], minlength=len(unique))
            if doc_weight and len(unique):
                stored = self._cosines(self.document_vectors(unique), q[qi])
                total = total + doc_weight * stored
                if kind == "ivfpq":  # the leaders' document vectors exactly, where they can be (codes approximate)
                    lead = np.argsort(-total, kind="stable")[:max(5 * top_k, EXACT_RESCORE)]
                    exact = self.exact_document_vectors(unique[lead])
                    if exact is not None:
                        total[lead] += doc_weight * (self._cosines(exact, q[qi]) - stored[lead])
            total = self._calibrated(plan, qi, unique, total)  # by the query's language, where the index does
            best = np.argsort(-total, kind="stable")[:top_k]
            out.append([(float(total[j]), int(unique[j])) for j in best])
        return out

    def _recalibrated(self, plan, scores: np.ndarray, rows: np.ndarray, k: int):
        """(Q, k) one-vector hits re-ranked after :meth:`_calibrated` (rows -1: none)."""
        scores = np.where(rows >= 0, scores, -np.inf).astype(np.float32)
        for qi in range(len(rows)):
            found = rows[qi] >= 0
            scores[qi, found] = self._calibrated(plan, qi, rows[qi][found], scores[qi, found])
        order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        return np.take_along_axis(scores, order, 1), np.take_along_axis(rows, order, 1)

    def _cosines(self, vectors: np.ndarray, q: np.ndarray) -> np.ndarray:
        """Cosines of stored unit ``vectors`` with a query, (N,), or with several queries (rows of ``q``), (N, Q)
        (projected, where the index removes its languages' directions: then each vector's projected length
        divides; hmde.index.language_debias)."""
        sims = np.asarray(vectors, np.float32) @ q.T
        if len(self.language_basis):
            from .language_debias import residual_norms

            norms = residual_norms(vectors, self.language_basis)
            sims = sims / (norms if sims.ndim == 1 else norms[:, None])
        return sims

    def live_mask(self, kind: str) -> np.ndarray | None:
        """Which rows of ``kind`` ("documents" or "sentences") belong to live documents; None where none was
        deleted."""
        if not len(self.deleted):
            return None
        if kind == "documents":
            live = np.ones(self.meta.count, bool)
            live[self.deleted[:, 0]] = False
            return live
        live = np.ones(len(self.sentence_vectors), bool)
        live[spans_to_rows(self.deleted[:, 1], self.deleted[:, 2])] = False
        return live

    def live_selector(self, kind: str):
        """A FAISS selector of the live rows of ``kind`` (a bitmap: one bit a row), made once per snapshot;
        None where no document was deleted."""
        if not len(self.deleted):
            return None
        if kind not in self._masks:
            import faiss

            live = self.live_mask(kind)
            bits = np.packbits(live, bitorder="little")  # FAISS reads bit i of byte i >> 3, least significant first
            self._masks[kind] = (bits, faiss.IDSelectorBitmap(len(live), faiss.swig_ptr(bits)))
        return self._masks[kind][1]

    def _sentence_file(self) -> RowFile:
        if self._rows is None:
            raise HmdeError(f"index {self.path} was closed")
        return self._rows

    def document_vectors(self, rows: np.ndarray) -> np.ndarray:
        """The stored document vectors of ``rows`` (an IVF-PQ index: as its codes decode them; see
        :meth:`exact_document_vectors`)."""
        if self.meta.index_type in ("ivf", "ivfpq") and not getattr(self, "_direct_map", False):
            import faiss

            faiss.extract_index_ivf(self.index).make_direct_map()
            self._direct_map = True
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

    def search(self, query_vectors: np.ndarray, top_k: int = 10, lang: str | None = None,
               sentences_of: Callable | None = None, ef_search: int | None = None,
               nprobe: int | None = None, hybrid_texts: Sequence[str] | None = None,
               hybrid_weights: Sequence[float] = (1.0, 1.0), rrf_k: int = 60, multi_vector: bool | None = None,
               top_sentences: int = DEFAULT_TOP_SENTENCES, doc_weight: float = DEFAULT_DOC_WEIGHT,
               candidates: int | None = None, query_langs: Sequence[str | None] | None = None,
               filter=None) -> list[list[SearchHit]]:
        """Hits per query, best first; ``lang`` keeps only documents of that language; ``filter`` (an expression
        of :mod:`hmde.index.filters`, or its tree) only the documents it matches: the top hits of those, not a
        post-filtered top (the rows pass FAISS as an ID selector).

        ``query_langs``: each query's language (None: not known); an index that records ``subspace+calibrate``
        lowers the scores of the documents in it (:func:`hmde.index.language_debias.calibrate`).

        ``sentences_of(texts, langs) -> (sentences, vectors)`` gives the best sentence of
        hits whose sentence vectors were not stored (indexes built with ``--engine ray``).
        ``ef_search`` (HNSW) and ``nprobe`` (IVF) trade speed for recall per search.
        ``hybrid_texts`` (the query texts): fuse the dense ranking with BM25's by reciprocal
        rank fusion (:mod:`hmde.index.lexical`); a hit's score is then the fused score.
        ``multi_vector`` (default: the index's own kind) scores documents by their best
        ``top_sentences`` contextualised sentences, plus ``doc_weight`` times the document vector's
        cosine; each hit's ``evidence`` lists the sentences that scored. ``candidates``: the nearest sentences
        a multi-vector search scores per query (default ``SENTENCE_POOL``, ``COMPRESSED_SENTENCE_POOL`` for IVF-PQ;
        more: higher recall, slower).
        """
        if candidates is not None and (isinstance(candidates, bool) or not isinstance(candidates, int) or candidates < 1):
            raise HmdeError(f"candidates must be a whole number >= 1, got {candidates!r}")
        multi_vector = self.meta.multi_vector if multi_vector is None else multi_vector
        if multi_vector and not self.meta.multi_vector:
            raise HmdeError(f"index {self.path} stores one vector per document: build it with --multi-vector "
                            "to score documents by their sentences")
        if multi_vector and hybrid_texts is not None:
            raise HmdeError("--hybrid fuses BM25 with the document vectors: search without --multi-vector scoring")
        q = normalize(query_vectors)
        if q.shape[1] != self.meta.dim:
            raise HmdeError(f"query vectors have dimension {q.shape[1]}, the index {self.meta.dim}: "
                            "search with the model the index was built with")
        if len(self.language_basis):  # no pull towards the query's own language (hmde.index.language_debias)
            from .language_debias import project_out

            q = normalize(project_out(q, self.language_basis))
        n = self.meta.live
        if n == 0:
            return [[] for _ in range(len(q))]
        allowed = None
        if lang:
            from ..text.coverage import language_code

            langs = [r[0] for r in self._query("SELECT DISTINCT lang FROM docs ORDER BY 1")]
            # the code as stored, else every code of the same language (el finds documents stored as ell)
            same = [x for x in langs if x == lang] or [x for x in langs if x and language_code(x) == language_code(lang)]
            allowed = {r[0] for r in self._query("SELECT row FROM docs WHERE lang IN (SELECT unnest(?::VARCHAR[]))",
                                                 (same,))} if same else set()
            if not allowed:
                raise HmdeError(f"the index has no documents in '{lang}' (languages: {', '.join(map(str, langs))})")
        if filter is not None:
            from .filters import filter_rows

            matching = filter_rows(self, filter)
            allowed = matching if allowed is None else allowed & matching
            if not allowed:
                return [[] for _ in range(len(q))]
        pool = min(n, max(top_k, HYBRID_POOL)) if hybrid_texts is not None else min(n, top_k)
        plan = self._calibration_plan(q, query_langs, lang, multi_vector, top_sentences, doc_weight)
        if multi_vector:
            fused = self._multi_vector_rows(q, top_k, allowed, top_sentences, doc_weight, ef_search, nprobe,
                                            candidates, plan)
        else:
            search = self._search_debiased if len(self.language_basis) else self._search
            if plan is None:
                scores, rows = search(q, pool, allowed, ef_search, nprobe)
            else:  # a larger pool re-ranked: the calibration only lowers documents in the query's language
                scores, rows = search(q, min(n, max(pool, DEBIASED_POOL)), allowed, ef_search, nprobe)
                scores, rows = self._recalibrated(plan, scores, rows, pool)
            fused = self._fuse(rows, hybrid_texts, allowed, pool, top_k, hybrid_weights, rrf_k) \
                if hybrid_texts is not None else None
        out = []
        for qi in range(len(q)):
            picked = fused[qi] if fused is not None else \
                [(float(s), int(r)) for s, r in zip(scores[qi], rows[qi]) if r >= 0]
            records = {}
            if picked:
                sentence_file = self._sentence_file()
                marks = ",".join("?" * len(picked))
                metadata = "metadata" if self.has_metadata else "NULL"
                for row, doc_id, dlang, text, start, count, sents, meta in self._query(
                        f"SELECT row, doc_id, lang, text, sent_start, sent_count, sentences, {metadata} FROM docs "
                        f"WHERE row IN ({marks})", [r for _, r in picked]):
                    records[row] = [doc_id, dlang, text, list(sents or []), sentence_file.span(start, start + count),
                                    json.loads(meta) if meta else {}]
            lacking = [r for r in records.values() if not r[3] and r[2] and r[2].strip() and sentences_of is not None]
            if lacking:  # not stored: embed these few documents' sentences now
                units, vectors = sentences_of([r[2] for r in lacking], [r[1] for r in lacking])
                for r, u, v in zip(lacking, units, vectors):
                    r[3], r[4] = list(u), normalize(np.asarray(v, np.float32).reshape(len(u), self.meta.dim))
            hits = []
            for rank, (score, row) in enumerate(picked, 1):
                doc_id, dlang, text, sents, vectors, meta = records[row]
                best, best_score, evidence = "", float("nan"), []
                if len(sents):
                    sims = self._cosines(vectors, q[qi])
                    order = np.argsort(-sims, kind="stable")[:max(1, top_sentences)]
                    evidence = [(sents[j], float(sims[j])) for j in order]
                    best, best_score = evidence[0]
                hits.append(SearchHit(rank, score, doc_id, dlang, best, best_score, text, evidence, meta))
            out.append(hits)
        return out


HYBRID_POOL = 100  # candidates each ranking contributes to the fusion
DEBIASED_POOL = 200  # documents a one-vector search re-scores where the index removes its languages' directions


DOCS_TABLE = ("CREATE TABLE IF NOT EXISTS docs (row BIGINT PRIMARY KEY, doc_id VARCHAR UNIQUE, lang VARCHAR, "
              "text VARCHAR, sent_start BIGINT, sent_count INTEGER, sentences VARCHAR[], metadata VARCHAR)")
# an index written before metadata (issue 61) gains the column on its next write; readers see NULLs till then
METADATA_COLUMN = "ALTER TABLE docs ADD COLUMN IF NOT EXISTS metadata VARCHAR"
SENTENCES_TABLE = "CREATE TABLE IF NOT EXISTS sentences (sent_row BIGINT PRIMARY KEY, doc_row BIGINT, position INTEGER)"
# documents deleted or replaced: their rows stay in the FAISS indexes and sentences.npy, masked, until `compact`
DELETED_TABLE = ("CREATE TABLE IF NOT EXISTS deleted (row BIGINT PRIMARY KEY, doc_id VARCHAR, sent_start BIGINT, "
                 "sent_count INTEGER)")


def finish_version(path: Path, tmp: Path, meta: IndexMeta) -> None:
    """The last step of every write before the swap: the new version's ``index.json``, and the entries of the
    folder that hmde did not write (a user's notes) carried over."""
    (tmp / "index.json").write_text(json.dumps(asdict(meta), indent=2) + "\n", encoding="utf-8")
    carry_foreign_entries(path, tmp, INDEX_ENTRIES)


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


SENTENCE_INDEX = "sentences.faiss"
# everything an index build writes: any other entry of an index folder is the user's and is kept
INDEX_ENTRIES = {"index.json", "vectors.faiss", "sentences.npy", "docs.duckdb", SENTENCE_INDEX, "bm25",
                 "languages.npz"}
SENTENCE_POOL = 1000  # sentences a multi-vector search retrieves per query before scoring their documents
# IVF-PQ: its codes rank the candidates approximately, so more are re-scored exactly (10M sentences, recall@10
# of the documents against exact search: 1,000 -> 0.937, 1,500 -> 0.969, 2,000 -> 0.981; docs/scaling.md)
COMPRESSED_SENTENCE_POOL = 2000
EXACT_RESCORE = 50  # IVF-PQ: documents whose fused score is recomputed from exact vectors
SENTENCE_LISTS_PER_DOCUMENT_LIST = 4  # an IVF sentence index: about sqrt(20 sentences per document) more lists


def sentence_lists_for(ivf_lists: int, sentence_train: np.ndarray | None) -> int:
    """Inverted lists of an IVF sentence index: four times the documents' (a collection holds about 16
    times more sentences than documents, and lists grow with the square root), at most what the training
    sample supports (FAISS wants about 39 vectors per list)."""
    available = 0 if sentence_train is None else len(sentence_train) // 39
    return max(1, min(ivf_lists * SENTENCE_LISTS_PER_DOCUMENT_LIST, available))


def exact_scores(vectors: RowFile, rows: np.ndarray, q: np.ndarray, basis: np.ndarray | None = None) -> np.ndarray:
    """(Q, K) cosines of each query with its candidate rows of ``vectors`` (-1: none), best first per query;
    rows re-ordered to match. ``basis``: directions the (projected) query lacks, projected out of the rows too
    (hmde.index.language_debias), from the same read."""
    sims = np.full(rows.shape, -np.inf, np.float32)
    for qi in range(len(q)):
        found = rows[qi] >= 0
        candidates = vectors.take(rows[qi][found]).astype(np.float32)
        sims[qi, found] = candidates @ q[qi]
        if basis is not None and len(basis) and found.any():
            from .language_debias import residual_norms

            sims[qi, found] /= residual_norms(candidates, basis)
    order = np.argsort(-sims, axis=1, kind="stable")
    rows[:] = np.take_along_axis(rows, order, axis=1)
    return np.take_along_axis(sims, order, axis=1)


def _read_faiss(path: Path):
    import faiss

    try:
        return faiss.read_index(str(path))
    except RuntimeError as exc:
        detail = _first_line(exc).split("Error: ")[-1]  # FAISS prefixes the C++ function's signature
        raise InputError(f"not a readable FAISS index ({detail}); rebuild the index", path=str(path)) from None


def _first_line(exc: BaseException) -> str:
    lines = [x.strip() for x in str(exc).strip().splitlines() if x.strip()]
    return lines[-1] if lines else type(exc).__name__


def read_index_meta(path: Path) -> IndexMeta:
    """``index.json``, checked field by field: a damaged file is a one-line error naming it."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"not readable JSON ({_first_line(exc)}); rebuild the index", path=str(path)) from None
    if not isinstance(raw, dict):
        raise InputError("must hold a JSON object", path=str(path))
    if raw.get("format") != INDEX_FORMAT:
        raise InputError(f"index format {raw.get('format')!r}, expected {INDEX_FORMAT!r}", path=str(path))
    fields = {f.name: f for f in dataclasses.fields(IndexMeta)}
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        raise InputError("unknown field", path=str(path), field=unknown[0])
    for name in ("model", "dim", "method", "index_type", "count"):
        if name not in raw:
            raise InputError("missing field", path=str(path), field=name)
    for name in ("dim", "count", "hnsw_m", "ivf_lists", "pq_m", "sentence_lists", "deleted"):
        if name in raw and (not isinstance(raw[name], int) or isinstance(raw[name], bool) or raw[name] < 0):
            raise InputError(f"must be a whole number >= 0, got {raw[name]!r}", path=str(path), field=name)
    for name in ("model", "method", "index_type", "store", "store_uri", "store_prefix", "language_debias"):
        if name in raw and not isinstance(raw[name], str):
            raise InputError(f"must be a string, got {raw[name]!r}", path=str(path), field=name)
    for name in ("bm25", "multi_vector"):
        if name in raw and not isinstance(raw[name], bool):
            raise InputError(f"must be true or false, got {raw[name]!r}", path=str(path), field=name)
    if raw.get("sentence_vectors", "context") not in ("lower", "context", ""):
        raise InputError(f"must be 'lower' or 'context', got {raw['sentence_vectors']!r}", path=str(path),
                         field="sentence_vectors")
    if raw.get("language_debias", "") not in DEBIAS_MODES:
        raise InputError(f"unknown language_debias {raw['language_debias']!r} (subspace+calibrate, subspace, or "
                         "none)",
                         path=str(path), field="language_debias")
    if raw.get("store", "") not in ("", "milvus"):
        raise InputError(f"unknown store {raw['store']!r} (milvus, or none)", path=str(path), field="store")
    if raw["index_type"] not in INDEX_TYPES:
        raise InputError(f"unknown index type {raw['index_type']!r} ({', '.join(INDEX_TYPES)})", path=str(path),
                         field="index_type")
    return IndexMeta(**raw)


def check_compatible(meta: IndexMeta, model_sha256: str | None, dim: int, path: Path) -> None:
    """An index is searched and extended only with the model it was built with."""
    if meta.dim != dim:
        raise HmdeError(f"index {path} was built with {meta.dim}-dimensional vectors, this model gives {dim}: "
                        f"use the index's model ({meta.model})")
    from ..encoders.registry import same_model_hash

    if not same_model_hash(meta.model_sha256, model_sha256):
        raise HmdeError(f"index {path} was built with another model ({meta.model}, sha256 {meta.model_sha256[:12]}…); "
                        "search it with that model or rebuild the index")
