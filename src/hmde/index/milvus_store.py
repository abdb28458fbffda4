"""An hmde index whose vectors live in Milvus: the store that scales past one machine.

``hmde index build docs.jsonl -o IDX --store milvus:PATH_OR_URI`` writes two collections (the client code is
the same for a Milvus Lite file, ``milvus:./hmde.db``, and a cluster, ``milvus:http://host:19530``)::

    {prefix}_documents  id (the document id, primary key), lang, text, vector
    {prefix}_sentences  id (auto), doc_id, lang, position, text, vector

and ``IDX/index.json`` keeps hmde's record (model, method, the store's address and prefix), so that
``hmde search IDX``, ``hmde.Index.open(IDX)`` and ``hmde serve IDX`` work unchanged. A search ranks as hmde's
own multi-vector index does: Milvus finds the documents of the nearest sentences (``group_by_field="doc_id"``,
the ``top_sentences`` best of each: the evidence), the candidates' document vectors are fetched, and each is
scored by its best sentences + ``doc_weight`` x the document vector's cosine. Upserts and deletes go to Milvus
(a document's rows are deleted by its id, then the new ones inserted); Milvus compacts by itself.

Vectors are stored L2-normalised and searched by inner product, i.e. cosine, as in hmde's FAISS indexes.
Milvus's VARCHAR holds at most 65,535 bytes: a document whose text is longer is refused in one line before anything
is written (:func:`check_texts_fit`; it was stored cut, silently), as is a sentence that long. Each document's
metadata is a JSON field of the documents collection, returned with its hits; searches of a Milvus-stored index take
no metadata filter yet (refused in one line).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from ..align.similarity import normalize
from ..errors import HmdeError, InputError, exception_line
from .multivector import DEFAULT_DOC_WEIGHT, DEFAULT_TOP_SENTENCES

SCHEME = "milvus:"
MAX_VARCHAR = 65_535
GROUPS = 200  # documents (by their best sentences) a search re-scores with the document vector
INDEX_TYPES = {"flat": ("FLAT", {}), "hnsw": ("HNSW", {"M": 32, "efConstruction": 200}),
               "ivf": ("IVF_FLAT", {"nlist": 1024}), "ivfpq": ("IVF_PQ", {"nlist": 1024, "m": 48, "nbits": 8})}
INSERT_ROWS = 2_000  # rows per insert call


def parse_store(value: str) -> str:
    """``milvus:PATH_OR_URI`` -> the URI a client connects to (a local path made absolute: the record must not
    depend on the directory hmde was run from)."""
    if not value.startswith(SCHEME) or not value[len(SCHEME):].strip():
        raise HmdeError(f"--store takes milvus:PATH (a Milvus Lite file) or milvus:URI (a Milvus server), got "
                        f"'{value}'")
    target = value[len(SCHEME):].strip()
    if re.match(r"^[a-z][a-z0-9+.-]*://", target):
        return target
    return check_lite_path(str(Path(target).absolute()))


def check_lite_path(uri: str) -> str:
    """A Milvus Lite path must not be a file: milvus-lite keeps a folder there, and on a user's file (a SQLite
    database, say) it failed with its own traceback."""
    if not re.match(r"^[a-z][a-z0-9+.-]*://", uri) and Path(uri).is_file():
        raise HmdeError(f"--store milvus:{uri}: that is a file, and a Milvus Lite database is a folder that "
                        "milvus-lite makes: name a new path (hmde never opens a file it did not write)")
    return uri


def client_for(uri: str):
    """A pymilvus client of ``uri``; one line saying what to install where pymilvus is missing."""
    try:
        from pymilvus import MilvusClient
    except ImportError:
        raise HmdeError("an index stored in Milvus needs pymilvus (and, for a local file, milvus-lite): pip install "
                        "'hmde[milvus]'") from None
    check_lite_path(uri)
    try:
        return MilvusClient(uri)
    except Exception as exc:  # noqa: BLE001 - connection and engine errors come in many classes
        raise HmdeError(f"cannot open the Milvus store {uri} ({exception_line(exc)})") from None


def collection_prefix(index_path: Path) -> str:
    """Collection names from the index folder's name (Milvus takes letters, digits and underscores)."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", Path(index_path).absolute().name) or "index"
    return ("hmde_" + name)[:200]


def text_too_long(value) -> str | None:
    """Why a document's text cannot be kept whole in Milvus (its VARCHAR holds 65,535 bytes), or None."""
    from ..methods.base import flat_text

    size = len(flat_text(value or "").encode("utf-8"))
    if size <= MAX_VARCHAR:
        return None
    return (f"the text is {size:,} bytes of UTF-8, and an index stored in Milvus keeps at most {MAX_VARCHAR:,} "
            "(Milvus's VARCHAR): split the document, or keep the index in hmde's own files (no --store)")


def check_texts_fit(records, where: str) -> None:
    """Refuse, before anything is written, a document whose text Milvus would have to cut (records with ``text``,
    ``doc_id`` and ``line``); it was stored cut, silently."""
    for i, record in enumerate(records):
        problem = text_too_long(record.text)
        if problem:
            at = where if record.line is not None else f"{where}[{i}]"
            raise InputError(f"document '{record.doc_id}': {problem}", at, record.line, "text")


def fitting(records, path):
    """The records of a file as they stream by, each refused in one line where Milvus would have to cut its text."""
    for record in records:
        check_texts_fit([record], str(path))
        yield record


def _text(value: str) -> str:
    """The text as stored: whole (what cannot be kept whole was refused before the write began)."""
    problem = text_too_long(value)
    if problem:
        raise HmdeError(problem)
    return value or ""


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _literal(value: str) -> str:
    """A string literal of Milvus's expressions: it reads backslash escapes of the backslash, the double quote, newline,
    carriage return and tab, and any other character as written; JSON's u-escapes (json.dumps of a control
    character) were refused ("unknown escape sequence")."""
    return '"' + "".join(_ESCAPES.get(c, c) for c in str(value)) + '"'


def _quoted(ids: Sequence[str]) -> str:
    return "[" + ", ".join(_literal(x) for x in ids) + "]"


def collection_schema(meta, sentences: bool):
    """The schema of an index's documents (``sentences``: its sentences) collection, each field described for
    the store's own users (a cluster keeps the descriptions; Milvus Lite 3 drops them)."""
    from pymilvus import DataType, MilvusClient

    what = "sentences" if sentences else "documents"
    schema = MilvusClient.create_schema(auto_id=sentences, description=(
        f"hmde index {meta.store_prefix}: one row per {what[:-1]} ({meta.model}, {meta.method}); the index's record "
        "is the index.json of its folder"))
    if sentences:
        schema.add_field("id", DataType.INT64, is_primary=True, description="row number (assigned by Milvus)")
        schema.add_field("doc_id", DataType.VARCHAR, max_length=MAX_VARCHAR, description="the document's id")
        schema.add_field("position", DataType.INT32, description="the sentence's place in its document (0-based)")
    else:
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=MAX_VARCHAR,
                         description="the document's id")
    schema.add_field("lang", DataType.VARCHAR, max_length=64, description="the document's language ('': unknown)")
    if not sentences:
        schema.add_field("metadata", DataType.JSON, description="the document's other fields (title, url, date...)")
    schema.add_field("text", DataType.VARCHAR, max_length=MAX_VARCHAR, description=(
        "the sentence" if sentences else "the document's text"))
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=meta.dim, description=(
        f"the {'sentence' if sentences else 'document'} vector, unit length (inner product = cosine)"))
    return schema


class MilvusIndex:
    """An open hmde index stored in Milvus: what :class:`~hmde.index.store.DocumentIndex` offers a search."""

    def __init__(self, path: Path, meta, client):
        self.path, self.meta, self.client = Path(path), meta, client
        self.documents, self.sentences = f"{meta.store_prefix}_documents", f"{meta.store_prefix}_sentences"
        self.deleted = np.zeros((0, 3), np.int64)
        self.sentence_index = None

    @classmethod
    def open(cls, path: Path, meta) -> "MilvusIndex":
        """The index's collections, checked against its record: a damaged store (a truncated segment, a bad schema)
        and one whose documents disagree with ``index.json``'s count (a garbled manifest that fell back to an older
        version answered "(no hits)") are one line naming the store and what to do."""
        client = client_for(meta.store_uri)
        index = cls(path, meta, client)
        record = str(path / "index.json")
        try:
            for name in (index.documents,) + ((index.sentences,) if meta.multi_vector else ()):
                if not client.has_collection(name):
                    raise InputError(f"the Milvus store {meta.store_uri} has no collection {name}; rebuild the index",
                                     record)
                client.load_collection(name)
            held = index.count()
        except HmdeError:
            client.close()
            raise
        except Exception as exc:  # noqa: BLE001 - the engine's errors come in many classes (MilvusException, OSError)
            client.close()
            raise InputError(f"the Milvus store {meta.store_uri} cannot be read ({exception_line(exc)}): rebuild the "
                             "index (hmde index build ... --store ... --overwrite)", record) from None
        if held != meta.count:
            client.close()
            raise InputError(f"the Milvus store {meta.store_uri} holds {held} documents in {index.documents}, and "
                             f"the index's record says {meta.count}: a write was cut off or is under way, or the store "
                             "was changed outside hmde or damaged; retry, or rebuild the index", record)
        return index

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def __enter__(self) -> "MilvusIndex":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- reading -------------------------------------------------------------------------------
    @property
    def has_metadata_field(self) -> bool:
        """Whether the documents collection keeps metadata (collections made before issue 61 do not)."""
        if getattr(self, "_metadata_field", None) is None:
            fields = self.client.describe_collection(self.documents).get("fields", [])
            self._metadata_field = any(f.get("name") == "metadata" for f in fields)
        return self._metadata_field

    def _all(self, collection: str, expr: str, fields: list[str]) -> list[dict]:
        return list(self.client.query(collection, filter=expr, output_fields=fields))

    def count(self, collection: str | None = None) -> int:
        rows = self.client.query(collection or self.documents, filter="", output_fields=["count(*)"])
        return int(rows[0]["count(*)"]) if rows else 0

    def known_ids(self, doc_ids: Sequence[str]) -> list[str]:
        found = set()
        for start in range(0, len(doc_ids), 1000):
            part = list(doc_ids[start:start + 1000])
            found |= {r["id"] for r in self._all(self.documents, f"id in {_quoted(part)}", ["id"])}
        return [x for x in doc_ids if x in found]

    def doc_ids(self) -> list[str]:
        return [r["id"] for r in self._all(self.documents, 'id != ""', ["id"])]

    def ids_with_whitespace(self) -> str | None:
        return next((x for x in self.doc_ids() if re.search(r"\s", x)), None)

    def require_bm25(self):
        raise HmdeError(f"index {self.path} is stored in Milvus: BM25 fusion (--hybrid) needs an index of hmde's own")

    def describe(self) -> dict:
        meta = self.meta
        languages: dict[str, int] = {}
        for row in self._all(self.documents, 'id != ""', ["lang"]):
            key = row.get("lang") or "unknown"
            languages[key] = languages.get(key, 0) + 1
        return {"path": str(self.path), "model": meta.model, "model_sha256": meta.model_sha256, "method": meta.method,
                "dim": meta.dim, "index_type": meta.index_type, "multi_vector": meta.multi_vector,
                "sentence_vectors": meta.sentence_vectors or None, "bm25": False, "backend": meta.backend,
                "documents": sum(languages.values()), "deleted_documents": 0,
                "sentences": self.count(self.sentences) if meta.multi_vector else 0, "deleted_sentences": 0,
                "languages": dict(sorted(languages.items(), key=lambda kv: (-kv[1], kv[0]))),
                "language_debias": "none", "bytes_on_disk": 0,
                "store": f"milvus:{meta.store_uri}", "collections": [self.documents, self.sentences]}

    def search(self, query_vectors: np.ndarray, top_k: int = 10, lang: str | None = None, sentences_of=None,
               ef_search: int | None = None, nprobe: int | None = None, hybrid_texts=None,
               hybrid_weights=(1.0, 1.0), rrf_k: int = 60, multi_vector: bool | None = None,
               top_sentences: int = DEFAULT_TOP_SENTENCES, doc_weight: float = DEFAULT_DOC_WEIGHT,
               candidates: int | None = None, query_langs=None, filter=None):
        """Hits per query, best first, ranked as :meth:`hmde.index.store.DocumentIndex.search` ranks a
        multi-vector index (``candidates``: documents re-scored, default :data:`GROUPS`). ``query_langs`` is
        not used: an index in Milvus records no language debiasing (its searches run in Milvus)."""
        from .multivector import check_scoring
        from .records import SearchHit

        check_scoring(top_sentences, doc_weight)
        if filter is not None:
            raise HmdeError(f"index {self.path} keeps its vectors in Milvus, whose searches take no filter yet: build "
                            "the index without --store to filter by metadata")
        if hybrid_texts is not None:
            self.require_bm25()
        if ef_search or nprobe:
            raise HmdeError("--ef-search and --nprobe tune hmde's own FAISS indexes; a Milvus index is tuned in Milvus")
        q = normalize(np.asarray(query_vectors, np.float32))
        if q.shape[1] != self.meta.dim:
            raise HmdeError(f"query vectors have dimension {q.shape[1]}, the index {self.meta.dim}")
        expr = f"lang == {_literal(lang)}" if lang else ""
        extra = ["metadata"] if self.has_metadata_field else []
        multi = self.meta.multi_vector if multi_vector is None else multi_vector
        if multi and not self.meta.multi_vector:
            raise HmdeError(f"index {self.path} stores one vector per document: build it with --multi-vector")
        out = []
        if not multi:
            found = self.client.search(self.documents, data=q.tolist(), limit=top_k, filter=expr,
                                       output_fields=["lang", "text"] + extra, search_params={"metric_type": "IP"})
            for qi, hits in enumerate(found):
                out.append([SearchHit(rank, float(h["distance"]), h["id"], h["entity"].get("lang") or None, "",
                                      float("nan"), h["entity"].get("text", ""), [],
                                      h["entity"].get("metadata") or {}) for rank, h in enumerate(hits, 1)])
            return out
        groups = max(top_k, candidates or GROUPS)
        found = self.client.search(self.sentences, data=q.tolist(), limit=groups, filter=expr,
                                   group_by_field="doc_id", group_size=max(1, top_sentences),
                                   output_fields=["doc_id", "text"], search_params={"metric_type": "IP"})
        for qi, hits in enumerate(found):
            evidence: dict[str, list[tuple[str, float]]] = {}
            for h in hits:
                evidence.setdefault(h["entity"]["doc_id"], []).append((h["entity"]["text"], float(h["distance"])))
            if not evidence:
                out.append([])
                continue
            docs = {r["id"]: r for r in self._all(self.documents, f"id in {_quoted(list(evidence))}",
                                                   ["id", "lang", "text", "vector"] + extra)}
            scored = []
            for doc_id, sentences in evidence.items():
                if doc_id not in docs:
                    continue  # deleted between the two calls
                sentences.sort(key=lambda x: -x[1])
                best = sum(s for _, s in sentences[:top_sentences])
                cosine = float(np.asarray(docs[doc_id]["vector"], np.float32) @ q[qi]) if doc_weight else 0.0
                scored.append((best + doc_weight * cosine, doc_id, sentences[:top_sentences]))
            scored.sort(key=lambda x: (-x[0], x[1]))
            out.append([SearchHit(rank, score, doc_id, docs[doc_id].get("lang") or None, ev[0][0], ev[0][1],
                                  docs[doc_id].get("text", ""), ev, docs[doc_id].get("metadata") or {})
                        for rank, (score, doc_id, ev) in enumerate(scored[:top_k], 1)])
        return out

    # -- writing -------------------------------------------------------------------------------
    def create_collections(self, index_type: str, overwrite: bool) -> None:
        kind, params = INDEX_TYPES[index_type]
        for name, with_position in ((self.documents, False), (self.sentences, True)):
            if name == self.sentences and not self.meta.multi_vector:
                continue
            if self.client.has_collection(name):
                if not overwrite:  # --overwrite replaces only the collections this folder's own index.json names
                    raise HmdeError(f"the Milvus store {self.meta.store_uri} holds a collection {name} already, "
                                    "made by another index folder of the same name: name this index's folder "
                                    "otherwise (its collections are named for it), or drop that index's "
                                    "collections from Milvus first")
                self.client.drop_collection(name)
            schema = collection_schema(self.meta, with_position)
            index_params = self.client.prepare_index_params()
            index_params.add_index(field_name="vector", index_type=kind, metric_type="IP", params=params)
            if with_position:
                index_params.add_index(field_name="doc_id", index_type="INVERTED")
            self.client.create_collection(name, schema=schema, index_params=index_params,
                                          description=schema.description)
            self.client.load_collection(name)  # left loaded: the store's own users query it directly

    def insert(self, batch) -> int:
        """One batch of documents (and their sentences); returns the documents written."""
        vectors = normalize(np.asarray(batch.doc_vectors, np.float32).reshape(len(batch.doc_ids), -1))
        rows = [{"id": i, "lang": lang or "", "text": _text(t), "vector": v.tolist()}
                for i, lang, t, v in zip(batch.doc_ids, batch.langs, batch.texts, vectors)]
        if self.has_metadata_field:  # collections made before issue 61 have no metadata field
            for row, metadata in zip(rows, batch.metadata or [{}] * len(rows)):
                row["metadata"] = metadata or {}
        for start in range(0, len(rows), INSERT_ROWS):
            self.client.insert(self.documents, rows[start:start + INSERT_ROWS])
        if self.meta.multi_vector and batch.sentence_vectors:
            sentence_rows = []
            for doc_id, lang, units, sv in zip(batch.doc_ids, batch.langs, batch.sentences or [],
                                               batch.sentence_vectors):
                sv = normalize(np.asarray(sv, np.float32).reshape(-1, self.meta.dim)) if len(units) else []
                sentence_rows += [{"doc_id": doc_id, "lang": lang or "", "position": p, "text": _text(u),
                                   "vector": v.tolist()} for p, (u, v) in enumerate(zip(units, sv))]
            for start in range(0, len(sentence_rows), INSERT_ROWS):
                self.client.insert(self.sentences, sentence_rows[start:start + INSERT_ROWS])
        return len(rows)

    def remove(self, doc_ids: Sequence[str]) -> None:
        for start in range(0, len(doc_ids), 1000):
            part = _quoted(list(doc_ids[start:start + 1000]))
            self.client.delete(self.documents, filter=f"id in {part}")
            if self.meta.multi_vector:
                self.client.delete(self.sentences, filter=f"doc_id in {part}")


def write_milvus(path: Path, meta, batches: Iterable, add: bool, replace: bool, read_index_meta, finish_version):
    """Create (or, ``add``, extend; ``replace``, upsert into) the Milvus collections of the index at ``path``, then
    commit ``index.json`` (``read_index_meta`` and ``finish_version``: the store's, passed in); returns the index,
    open."""
    from ..ground.atomic import atomic_dir

    if add:
        meta = read_index_meta(path / "index.json")
    # a new index replaces collections only where they are this folder's own (its index.json names them): another
    # folder of the same name, elsewhere, may have made them
    ours = False
    if not add and (path / "index.json").is_file():
        old = read_index_meta(path / "index.json")
        ours = (old.store_uri, old.store_prefix) == (meta.store_uri, meta.store_prefix)
    index = MilvusIndex(path, meta, client_for(meta.store_uri))
    replaced = 0
    try:
        if not add:
            index.create_collections(meta.index_type, overwrite=ours)
        for batch in batches:
            if replace:
                replaced += len(index.known_ids(batch.doc_ids))
                index.remove(batch.doc_ids)
            elif add:
                known = index.known_ids(batch.doc_ids)
                if known:
                    raise HmdeError(f"document ids must be unique: '{known[0]}' is already in the index")
            index.insert(batch)
        for name in (index.documents,) + ((index.sentences,) if meta.multi_vector else ()):
            index.client.flush(name)  # sealed into indexed segments: unflushed rows are searched by brute force
        meta.count, meta.deleted = index.count(), 0
        with atomic_dir(path) as tmp:
            finish_version(path, tmp, meta)
    except BaseException:
        index.close()
        raise
    index.meta = meta
    index.replaced = replaced
    return index


def delete_milvus(path: Path, meta, doc_ids: Sequence[str], ignore_missing: bool, finish_version) -> int:
    from ..ground.atomic import atomic_dir
    from .records import UnknownIds

    with MilvusIndex.open(path, meta) as index:
        known = set(index.known_ids(list(doc_ids)))
        missing = [x for x in doc_ids if x not in known]
        if missing and not ignore_missing:
            raise UnknownIds(missing, path)
        index.remove([x for x in doc_ids if x in known])
        index.client.flush(index.documents)
        meta.count = index.count()  # the record follows the store, so the next open finds them equal
        with atomic_dir(path) as tmp:
            finish_version(path, tmp, meta)
        return len(known)
