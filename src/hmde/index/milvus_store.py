"""An hmde index whose vectors live in Milvus: the store that scales past one machine.

``hmde index build docs.jsonl -o IDX --store milvus:PATH_OR_URI`` writes two collections (the client code is
the same for a Milvus Lite file, ``milvus:./hmde.db``, and a cluster, ``milvus:http://host:19530``)::

    {prefix}_documents  row (primary key), doc_id, generation, lang, metadata, text, vector
    {prefix}_sentences  id (the sentence's row), doc_row, doc_id, generation, lang, metadata, position, text, vector

and ``IDX/index.json`` keeps hmde's record (model, method, the store's address and prefix, the committed generation,
the language statistics beside it), so that ``hmde search IDX``, ``hmde.Index.open(IDX)`` and ``hmde serve IDX``
work unchanged. :class:`MilvusIndex` provides what :mod:`hmde.index.store_protocol` asks (nearest documents and
sentences with a filter pushed into Milvus's scalar filtering, vectors and records of given rows, the live rows and
their languages), and :mod:`hmde.index.ranking` ranks with it exactly as it ranks hmde's own index: the language
subspace, the query-language calibration, exact scores, evidence. Writes are commits (:mod:`hmde.index.milvus_write`):
a search sees the rows of committed generations only, less the rows of replaced and deleted documents.

Vectors are stored L2-normalised and searched by inner product, i.e. cosine, as in hmde's FAISS indexes. Milvus's
VARCHAR holds at most 65,535 bytes: a document whose text is longer is refused in one line before anything is written
(:func:`check_records_fit`), as is a sentence that long, or an integer in its metadata beyond 64 bits. Each document's metadata is a JSON field of both collections
(a sentence carries its document's, so that a filter runs inside the sentence search).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import HmdeError, InputError, exception_line
from .milvus_client import client_for, release, remove_empty_lite_indexes
from .milvus_commits import check_current
from .language_debias import recorded_basis
from .milvus_filters import KINDS_FIELD, literal
from .store_protocol import Selection

MAX_RESULTS = 16_384  # Milvus answers at most this many rows a search or a query
CHUNK = 1_000  # ids a query names at once
QUERIES_PER_CALL = 32  # queries a search call sends (a gRPC message holds at most 256 MB of answers)
CACHED_VECTORS = 65_536  # vectors of each collection kept by row (a row's vector never changes: rows are not reused)


def quoted(values: Sequence) -> str:
    return "[" + ", ".join(literal(x) for x in values) + "]"


def chunks(values: Sequence, size: int = CHUNK):
    for start in range(0, len(values), size):
        yield list(values[start:start + size])


class MilvusIndex:
    """An open hmde index stored in Milvus, as of its record's committed generation."""

    def __init__(self, path: Path, meta, client):
        self.path, self.meta, self.client = Path(path), meta, client
        self.documents, self.sentences = f"{meta.store_prefix}_documents", f"{meta.store_prefix}_sentences"
        self.deleted = np.zeros((0, 3), np.int64)
        self.sentence_index = None
        self.language_basis = np.zeros((0, meta.dim), np.float32)
        self._calibration = None
        self._languages = None
        self.replaced = 0
        self.typed = True  # rows carry kinds (collections written before they existed: False, set by open)
        # row -> vector, of each collection: a search's hits bring their vectors, which its re-scoring then reads
        # without another call (a row's vector never changes, so the cache outlives a snapshot)
        self._vector_cache: dict[str, dict[int, list]] = {self.documents: {}, self.sentences: {}}

    @classmethod
    def open(cls, path: Path, meta, repaired: bool = False) -> "MilvusIndex":
        """The index's collections, checked against its record: a damaged store (a truncated segment, a bad schema,
        collections of an hmde before commits) and one whose documents disagree with ``index.json``'s count (a garbled
        manifest that fell back to an older version answered "(no hits)") are one line naming the store and what to
        do. An index file Milvus Lite left empty when a writer was killed is removed (it is made again) and said."""
        client = client_for(meta.store_uri)
        index = cls(path, meta, client)
        record = str(path / "index.json")
        try:
            for name in (index.documents, index.sentences):
                if not client.has_collection(name):
                    raise InputError(f"the Milvus store {meta.store_uri} has no collection {name}; rebuild the index",
                                     record)
                fields = {f.get("name") for f in client.describe_collection(name).get("fields", [])}
                if name == index.documents:
                    index.typed = KINDS_FIELD in fields
                if "generation" not in fields:
                    raise InputError(f"the Milvus collection {name} was written by an hmde before Milvus writes were "
                                     "commits (issue 61); rebuild the index (hmde index build ... --store ... "
                                     "--overwrite)", record)
                client.load_collection(name)
            check_current(client, index.documents, path, meta.generation, meta.commit_id, meta.store_uri)
            held = index.count()
        except HmdeError:
            index.close()
            raise
        except Exception as exc:  # noqa: BLE001 - the engine's errors come in many classes (MilvusException, OSError)
            index.close()
            if not repaired and (removed := remove_empty_lite_indexes(meta.store_uri, exc)):
                logging.getLogger(__name__).warning("hmde: %s: removed %d empty index file(s) a killed write left in "
                                                    "Milvus Lite's folder (made again from its segments): %s",
                                                    meta.store_uri, len(removed), ", ".join(removed))
                return cls.open(path, meta, repaired=True)
            raise InputError(f"the Milvus store {meta.store_uri} cannot be read ({exception_line(exc)}): rebuild the "
                             "index (hmde index build ... --store ... --overwrite)", record) from None
        if held != meta.live:
            index.close()
            raise InputError(f"the Milvus store {meta.store_uri} holds {held} documents in {index.documents}, and "
                             f"the index's record says {meta.live}: the store was changed outside hmde or damaged; "
                             "rebuild the index", record)
        try:
            index.language_basis = recorded_basis(path, meta)
        except BaseException:
            index.close()
            raise
        return index

    def close(self) -> None:
        if self.client is not None:
            release(self.client, self.meta.store_uri)
            self.client = None

    def __enter__(self) -> "MilvusIndex":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- what is visible: committed generations, less the retired rows ----------------------------------------------
    def visible(self, sentences: bool = False) -> str:
        """The expression of this snapshot's rows: written by a committed write, not replaced or deleted since."""
        expr = f"generation <= {int(self.meta.generation)}"
        if self.meta.retired_rows:
            expr += f" and {'doc_row' if sentences else 'row'} not in {quoted(self.meta.retired_rows)}"
        return expr

    def _client(self):
        if self.client is None:
            raise HmdeError(f"index {self.path} was closed")
        return self.client

    def _all(self, collection: str, expr: str, fields: list[str]) -> list[dict]:
        """Every row ``expr`` selects. A query answers at most 16,384 rows: where one fills that, the rows are read
        by ranges of the primary key (hmde numbers them: at most 16,384 in a range). pymilvus's query iterator would
        do it too, but it warns on every call against Milvus Lite."""
        client = self._client()
        rows = client.query(collection, filter=expr, output_fields=fields, limit=MAX_RESULTS)
        if len(rows) < MAX_RESULTS:
            return rows
        key, end = ("id", self.meta.next_sentence_row) if collection == self.sentences else ("row", self.meta.next_row)
        out = []
        for start in range(0, end, MAX_RESULTS):
            out += client.query(collection, filter=f"({expr}) and {key} >= {start} and {key} < {start + MAX_RESULTS}",
                                output_fields=fields, limit=MAX_RESULTS)
        return out

    def count(self, expr: str | None = None, collection: str | None = None) -> int:
        """Visible documents (or the rows ``expr`` selects)."""
        rows = self._client().query(collection or self.documents, filter=self.visible() if expr is None else expr,
                                    output_fields=["count(*)"])
        return int(rows[0]["count(*)"]) if rows else 0

    def known_ids(self, doc_ids: Sequence[str]) -> list[str]:
        found = set()
        for part in chunks(list(doc_ids)):
            found |= {r["doc_id"] for r in self._all(self.documents, f"{self.visible()} and doc_id in {quoted(part)}",
                                                     ["doc_id"])}
        return [x for x in doc_ids if x in found]

    def rows_of(self, doc_ids: Sequence[str], expr: str | None = None) -> list[dict]:
        """The visible (or ``expr``'s) rows of ``doc_ids``: row, doc_id and lang."""
        out = []
        for part in chunks(list(doc_ids)):
            out += self._all(self.documents, f"({expr or self.visible()}) and doc_id in {quoted(part)}",
                             ["row", "doc_id", "lang"])
        return out

    def doc_ids(self) -> list[str]:
        return [r["doc_id"] for r in sorted(self._all(self.documents, self.visible(), ["row", "doc_id"]),
                                            key=lambda r: r["row"])]

    def ids_with_whitespace(self) -> str | None:
        return next((x for x in self.doc_ids() if re.search(r"\s", x)), None)

    def require_bm25(self):
        raise HmdeError(f"index {self.path} is stored in Milvus: BM25 fusion (--hybrid) needs an index of hmde's own")

    def metadata_fields(self) -> dict[str, list[str]] | list[str]:
        """The keys and kinds the record keeps (a record written before kinds were kept: the keys alone)."""
        if self.meta.metadata_types or not self.meta.metadata_keys:
            return {k: list(v) for k, v in self.meta.metadata_types.items()}
        return list(self.meta.metadata_keys)

    @property
    def calibrates(self) -> bool:
        return self.meta.language_debias == "subspace+calibrate"

    def describe(self) -> dict:
        meta = self.meta
        languages: dict[str, int] = {}
        for row in self._all(self.documents, self.visible(), ["lang"]):
            key = row.get("lang") or "unknown"
            languages[key] = languages.get(key, 0) + 1
        return {"path": str(self.path), "model": meta.model, "model_sha256": meta.model_sha256, "method": meta.method,
                "dim": meta.dim, "index_type": meta.index_type, "multi_vector": meta.multi_vector,
                "sentence_vectors": meta.sentence_vectors or None, "sentence_dtype": meta.sentence_dtype, "bm25": False,
                "backend": meta.backend,
                "documents": sum(languages.values()), "deleted_documents": 0,
                "sentences": self.count(self.visible(True), self.sentences), "deleted_sentences": 0,
                "languages": dict(sorted(languages.items(), key=lambda kv: (-kv[1], kv[0]))),
                "language_debias": meta.language_debias or "none", "bytes_on_disk": 0,
                "store": f"milvus:{meta.store_uri}", "collections": [self.documents, self.sentences],
                "generation": meta.generation}

    # -- what the ranking asks of a store (hmde.index.store_protocol) ----------------------------------------------
    def languages(self) -> list[str]:
        return sorted({n for n in self.live_rows_and_languages()[2]})

    def live_rows_and_languages(self):
        if self._languages is None:  # once per snapshot
            rows = sorted((r["row"], r.get("lang") or "") for r in self._all(self.documents, self.visible(),
                                                                              ["row", "lang"]))
            names = sorted({lang for _, lang in rows if lang})
            where = {n: i for i, n in enumerate(names)}
            self._languages = (np.array([r for r, _ in rows], np.int64),
                               np.array([where.get(lang, -1) for _, lang in rows], np.int32), names)
        return self._languages

    def select(self, langs, tree) -> Selection | None:
        if langs is None and tree is None:
            return None
        docs, sentences = [self.visible()], [self.visible(True)]
        if langs is not None:
            docs.append(f"lang in {quoted(list(langs))}")
            sentences.append(docs[-1])
        if tree is not None:
            from .filter_checks import check_fields
            from .milvus_filters import to_milvus

            check_fields(tree, self.metadata_fields())
            docs.append(to_milvus(tree, self.typed))
            sentences.append(docs[-1])
        expr = " and ".join(f"({x})" for x in docs)
        return Selection(self.count(expr), expression=expr, sentence_expression=" and ".join(f"({x})" for x in sentences))

    def _search(self, collection: str, q: np.ndarray, k: int, expr: str, ef_search, nprobe, owner: str | None):
        k = max(1, min(k, MAX_RESULTS))
        sims = np.full((len(q), k), -np.inf, np.float32)
        rows = np.full((len(q), k), -1, np.int64)
        owners = np.full((len(q), k), -1, np.int64)
        found = []
        fields = [owner or "row"]
        for start in range(0, len(q), QUERIES_PER_CALL):  # [] would ask for every field, the texts too
            found += self._client().search(collection, data=q[start:start + QUERIES_PER_CALL].tolist(), limit=k,
                                           filter=expr, output_fields=fields, search_params={"metric_type": "IP"})
        cache = self._cached(collection)
        for qi, hits in enumerate(found):
            for j, h in enumerate(hits):
                sims[qi, j], rows[qi, j] = h["distance"], h["id" if owner else "row"]  # each collection's key
                entity = h["entity"]
                if owner:
                    owners[qi, j] = entity[owner]
                if "vector" in entity:
                    cache[int(rows[qi, j])] = entity["vector"]
        return sims, rows, owners

    def _cached(self, collection: str) -> dict:
        cache = self._vector_cache[collection]
        if len(cache) > CACHED_VECTORS:
            cache.clear()
        return cache

    def nearest_documents(self, q, k, selection, ef_search=None, nprobe=None):
        expr = self.visible() if selection is None else selection.expression
        sims, rows, _ = self._search(self.documents, q, k, expr, ef_search, nprobe, None)
        return sims, rows

    def nearest_sentences(self, q, k, selection, ef_search=None, nprobe=None):
        expr = self.visible(True) if selection is None else selection.sentence_expression
        return self._search(self.sentences, q, k, expr, ef_search, nprobe, "doc_row")

    def _vectors(self, collection: str, key: str, rows) -> np.ndarray:
        rows = [int(r) for r in rows]
        cache = self._cached(collection)
        # this call's own vectors: another thread may clear the shared cache between its reads (issue 92)
        found = {r: v for r in dict.fromkeys(rows) if (v := cache.get(r)) is not None}
        missing = [r for r in dict.fromkeys(rows) if r not in found]
        for part in chunks(missing):
            for r in self._all(collection, f"{key} in {quoted(part)}", [key, "vector"]):
                found[r[key]] = cache[r[key]] = r["vector"]
        return np.asarray([found[r] for r in rows], np.float32).reshape(len(rows), self.meta.dim)

    def sentence_vectors_of(self, rows) -> np.ndarray:
        return self._vectors(self.sentences, "id", rows)

    def document_vectors(self, rows) -> np.ndarray:
        return self._vectors(self.documents, "row", rows)

    def exact_document_vectors(self, rows):
        return None

    def sentence_residual_norms(self, rows):
        return None  # the ranking reads the candidates' vectors (one call) and scores them exactly

    def document_residual_norms(self, rows):
        return None  # the ranking projects the candidates' document vectors it reads

    def _sentences(self, rows, fields: list[str]) -> dict[int, list[dict]]:
        """Each document row's stored sentences (``fields`` and position), in order."""
        out: dict[int, list[dict]] = {int(r): [] for r in rows}
        for part in chunks([int(r) for r in rows], 200):
            for r in self._all(self.sentences, f"doc_row in {quoted(part)}", ["doc_row", "position"] + fields):
                out[r["doc_row"]].append(r)
        for found in out.values():
            found.sort(key=lambda r: r["position"])
        return out

    def sentences_of_documents(self, rows):
        per_doc = self._sentences(rows, ["vector"])
        counts = np.array([len(per_doc[int(r)]) for r in rows], np.int64)
        flat = [s["vector"] for r in rows for s in per_doc[int(r)]]
        vectors = np.asarray(flat, np.float32).reshape(-1, self.meta.dim)
        return vectors, np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64), counts

    def rows_where(self, tree) -> list[int]:
        expr = self.visible() if tree is None else self.select(None, tree).expression
        return sorted(r["row"] for r in self._all(self.documents, expr, ["row"]))

    def rows_of_ids(self, doc_ids) -> dict[str, int]:
        return {r["doc_id"]: r["row"] for r in self.rows_of(list(doc_ids))}

    def records(self, rows) -> dict:
        rows = [int(r) for r in rows]
        docs = {r["row"]: r for part in chunks(rows) for r in self._all(
            self.documents, f"row in {quoted(part)}", ["row", "doc_id", "lang", "text", "metadata"])}
        sentences = self._sentences(rows, ["text", "vector"])
        return {row: [d["doc_id"], d.get("lang") or None, d.get("text", ""), [s["text"] for s in sentences[row]],
                      np.asarray([s["vector"] for s in sentences[row]], np.float32).reshape(-1, self.meta.dim),
                      d.get("metadata") or {}] for row, d in docs.items()}

    def search(self, query_vectors: np.ndarray, top_k: int = 10, lang: str | None = None, **options):
        """Hits per query, best first: :func:`hmde.index.ranking.search` over this store, as over hmde's own."""
        from .ranking import search

        return search(self, query_vectors, top_k, lang, **options)
