"""Writes to a Milvus-stored index as commits: after a kill at any moment the index answers from the version before
the write or the one after, never a mix, and nothing is deleted before its replacement is committed.

Milvus has no transactions; hmde's record is the commit. Every row carries the ``generation`` of the write that made
it, and ``index.json`` the last committed generation ``G`` and the ``retired_rows`` (documents replaced or deleted):
a search sees the rows of generations <= G, less the retired ones (:meth:`MilvusIndex.visible`). A write

1. removes what a cut-off writer left (rows of generations > G; rows retired by a commit whose clean-up was cut off),
2. inserts its documents and sentences as generation G + 1 with new row numbers (an upsert's old versions stay),
3. flushes, then commits: one atomic swap of the index folder writes ``index.json`` (G + 1, the count, the rows its
   upsert or delete retired) and the language statistics (``languages.npz``) together,
4. then deletes the retired rows from Milvus and commits once more without them (a kill before that second commit
   leaves them retired, and the next writer removes them).

Readers of an older snapshot keep their generation, so a later write's rows stay invisible to them; the clean-up of
step 4 removes rows such a reader may still have listed (it then misses those documents until it reopens, as
``Index`` does when ``index.json`` changes).
"""

from __future__ import annotations

import re
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from ..align.similarity import normalize
from ..errors import HmdeError, InputError
from ..ground.atomic import atomic_dir
from ..ground.locks import writer_alive
from .meta import IndexMeta, finish_version, read_index_meta
from .filter_checks import value_kind
from .milvus_client import MAX_VARCHAR, client_for, metadata_problem, release, text_too_long
from .milvus_commits import check_current, committed_marker, mark_committed, mark_writing, new_commit_id
from .milvus_filters import KINDS_FIELD, kinds_of
from .milvus_store import MilvusIndex, chunks, quoted
from .records import DuplicateIds

INDEX_TYPES = {"flat": ("FLAT", {}), "hnsw": ("HNSW", {"M": 32, "efConstruction": 200}),
               "ivf": ("IVF_FLAT", {"nlist": 1024}), "ivfpq": ("IVF_PQ", {"nlist": 1024, "m": 48, "nbits": 8})}
INSERT_ROWS = 2_000  # rows per insert call


def collection_schema(meta, sentences: bool):
    """The schema of an index's documents (``sentences``: its sentences) collection, each field described for
    the store's own users (a cluster keeps the descriptions; Milvus Lite 3 drops them)."""
    from pymilvus import DataType, MilvusClient

    what = "sentences" if sentences else "documents"
    schema = MilvusClient.create_schema(auto_id=False, description=(
        f"hmde index {meta.store_prefix}: one row per {what[:-1]} version ({meta.model}, {meta.method}); the index's "
        "record is the index.json of its folder, which names the committed generation and the retired rows"))
    if sentences:
        schema.add_field("id", DataType.INT64, is_primary=True, description="the sentence's row (assigned by hmde)")
        schema.add_field("doc_row", DataType.INT64, description="its document's row")
    else:
        schema.add_field("row", DataType.INT64, is_primary=True, description="the document version's row "
                         "(assigned by hmde; an upsert writes a new one)")
    schema.add_field("doc_id", DataType.VARCHAR, max_length=MAX_VARCHAR, description="the document's id")
    schema.add_field("generation", DataType.INT64, description="the write that made the row (visible once committed)")
    schema.add_field("lang", DataType.VARCHAR, max_length=64, description="the document's language ('': unknown)")
    schema.add_field("metadata", DataType.JSON, description="the document's other fields (title, url, date...)")
    schema.add_field(KINDS_FIELD, DataType.JSON, description="each metadata key's kind of value (string, number, "
                     "boolean, list, object, null): Milvus compares true as 1, so hmde's filters read kinds here")
    if sentences:
        schema.add_field("position", DataType.INT32, description="the sentence's place in its document (0-based)")
    schema.add_field("text", DataType.VARCHAR, max_length=MAX_VARCHAR, description=(
        "the sentence" if sentences else "the document's text"))
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=meta.dim, description=(
        f"the {'sentence' if sentences else 'document'} vector, unit length (inner product = cosine)"))
    return schema


def create_collections(index: MilvusIndex) -> None:
    """The index's two collections, new (:func:`fresh_index` chose names that no collection has)."""
    kind, params = INDEX_TYPES[index.meta.index_type]
    client = index.client
    for name, sentences in ((index.documents, False), (index.sentences, True)):
        schema = collection_schema(index.meta, sentences)
        index_params = client.prepare_index_params()
        index_params.add_index(field_name="vector", index_type=kind, metric_type="IP", params=params)
        index_params.add_index(field_name="doc_row" if sentences else "doc_id", index_type="INVERTED")
        client.create_collection(name, schema=schema, description=schema.description)
        # an empty collection's indexes are built at once: pymilvus's wait polls every 0.5 s (2 s of a new index)
        client.create_index(name, index_params, sync=False)
        client.load_collection(name)  # left loaded: the store's own users query it directly


def _collections(prefix: str) -> tuple[str, str]:
    return f"{prefix}_documents", f"{prefix}_sentences"


def _drop_prefixes(client, prefixes: Sequence[str]) -> None:
    for prefix in prefixes:
        for name in _collections(prefix):
            if client.has_collection(name):
                client.drop_collection(name)


def _family(prefix: str, base: str) -> bool:
    """Whether ``prefix`` names a version of the index whose collections are named for ``base`` (its folder)."""
    return prefix == base or re.fullmatch(re.escape(base) + r"_v\d+", prefix) is not None


def _free_prefix(client, base: str, taken: set[str]) -> str:
    """The first of ``base``, ``base_v2``, ``base_v3``... that no collection of the store (nor ``taken``) has."""
    n = 1
    while True:
        prefix = base if n == 1 else f"{base}_v{n}"
        if prefix not in taken and not any(client.has_collection(x) for x in _collections(prefix)):
            return prefix
        n += 1


def _recommit(path: Path, meta: IndexMeta) -> None:
    """The folder's version as it is, its record changed (an --overwrite build announcing its new collections)."""
    with atomic_dir(path) as tmp:
        if (path / "languages.npz").is_file():
            shutil.copy2(path / "languages.npz", tmp / "languages.npz")
        finish_version(path, tmp, meta)


def fresh_index(path: Path, meta: IndexMeta) -> MilvusIndex:
    """A new index's collections, made empty. Where the folder holds an index of this store already (``--overwrite``),
    its collections stay, and answer its searches, until the new version commits: the new one gets collections of
    another name (``PREFIX_v2``...), which the old record names as stale first, so that a build cut off at any
    moment leaves the old index and its next writer drops the new collections; the commit names the old ones stale
    in turn. Collections of the folder's name that another folder's index holds are refused; collections left by a
    cut-off first build of this very folder (the store's ``hmde.writing`` names it) are dropped."""
    client = client_for(meta.store_uri)
    try:
        base = meta.store_prefix
        old = read_index_meta(path / "index.json") if (path / "index.json").is_file() else None
        ours = old is not None and old.store == "milvus" and old.store_uri == meta.store_uri and \
            _family(old.store_prefix, base)
        stale: list[str] = []
        if ours:
            current = True
            if client.has_collection(_collections(old.store_prefix)[0]):
                try:
                    check_current(client, _collections(old.store_prefix)[0], path, old.generation, old.commit_id,
                                  meta.store_uri)
                except InputError:  # a copy behind the store: the collections are the other folder's index
                    current = False
            prefix = _free_prefix(client, base, {old.store_prefix, *old.stale_prefixes})
            stale = [x for x in old.stale_prefixes if x != prefix] + ([old.store_prefix] if current else [])
            old.stale_prefixes = sorted({*old.stale_prefixes, prefix})
            _recommit(path, old)
        else:
            prefix = base
            documents = _collections(base)[0]
            if any(client.has_collection(x) for x in _collections(base)):
                committed, pending = committed_marker(client, documents) if client.has_collection(documents) \
                    else (None, None)
                if committed is not None or not pending or pending.get("folder") != str(path.absolute()):
                    raise HmdeError(f"the Milvus store {meta.store_uri} holds a collection {documents} already, "
                                    "made by another index folder of the same name: name this index's folder "
                                    "otherwise (its collections are named for it), or drop that index's "
                                    "collections from Milvus first")
                _drop_prefixes(client, [base])  # this folder's own first build, cut off before its commit
    except BaseException:
        release(client, meta.store_uri)
        raise
    meta = IndexMeta(**{**asdict(meta), "generation": 0, "next_row": 0, "next_sentence_row": 0, "retired_rows": [],
                        "metadata_keys": [], "metadata_types": {}, "count": 0, "deleted": 0, "store_prefix": prefix,
                        "stale_prefixes": stale})
    index = MilvusIndex(path, meta, client)
    try:
        create_collections(index)
    except BaseException:
        index.close()
        raise
    return index


def _text(value: str) -> str:
    """The text as stored: whole (what cannot be kept whole was refused before the write began)."""
    problem = text_too_long(value)
    if problem:
        raise HmdeError(problem)
    return value or ""


def _metadata(value: dict | None, doc_id: str) -> dict:
    """The metadata as stored (what Milvus cannot hold was refused before the write began)."""
    problem = metadata_problem(value)
    if problem:
        raise HmdeError(f"document '{doc_id}', field '{problem[0]}': {problem[1]}")
    return value or {}


def _typed_fields(index: MilvusIndex, metadata: dict) -> dict:
    """The row's ``kinds`` (a collection written before they existed has none)."""
    return {KINDS_FIELD: kinds_of(metadata)} if index.typed else {}


def _flush(index: MilvusIndex) -> None:
    for name in (index.documents, index.sentences):
        index.client.flush(name)  # sealed into indexed segments: unflushed rows are searched by brute force


def remove_leftovers(index: MilvusIndex) -> None:
    """What a cut-off writer left: rows of uncommitted generations, retired rows a commit could not yet remove, and
    the collections of stale prefixes (an --overwrite build's, old or cut off). The caller has checked that the record
    is the store's current one (:meth:`MilvusIndex.open`): rows of later generations are no other folder's commits.
    The write's commit records that the stale prefixes are gone."""
    _drop_prefixes(index.client, index.meta.stale_prefixes)
    index.meta.stale_prefixes = []
    later = f"generation > {int(index.meta.generation)}"
    if not index.meta.retired_rows and not any(index.count(later, name) for name in (index.documents, index.sentences)):
        return  # nothing left: no delete and no flush to pay
    index.client.delete(index.documents, filter=later)
    index.client.delete(index.sentences, filter=later)
    _purge(index, index.meta.retired_rows)


def _begin(index: MilvusIndex, fresh: bool) -> IndexMeta:
    """A write's first steps (``fresh``: into new collections): no other folder's write in flight, leftovers removed,
    the store told which generation this write makes (:mod:`hmde.index.milvus_commits`); returns the record to
    fill."""
    if not fresh:
        pending = check_current(index.client, index.documents, index.path, index.meta.generation,
                                index.meta.commit_id, index.meta.store_uri)
        if pending and pending.get("folder") != str(index.path.absolute()) and writer_alive(pending["folder"]):
            raise HmdeError(f"the Milvus store {index.meta.store_uri} is being written through another folder "
                            f"naming the same collections ({pending['folder']}): wait for that write, and write "
                            "through one folder")
        remove_leftovers(index)
    meta = IndexMeta(**asdict(index.meta))
    meta.generation += 1
    meta.commit_id = new_commit_id()
    mark_writing(index.client, index.documents, index.path.absolute(), meta.generation, meta.commit_id)
    return meta


def _purge(index: MilvusIndex, rows: Sequence[int]) -> None:
    for part in chunks(list(rows)):
        index.client.delete(index.documents, filter=f"row in {quoted(part)}")
        index.client.delete(index.sentences, filter=f"doc_row in {quoted(part)}")
    _flush(index)


def _commit(index: MilvusIndex, path: Path, meta: IndexMeta, stats) -> None:
    """One atomic swap of the index folder (``index.json`` and the language statistics of this version), then the
    store told that this generation is committed."""
    with atomic_dir(path) as tmp:
        if stats is not None:  # an index without language debiasing keeps none
            stats.save(tmp)
        finish_version(path, tmp, meta)
    mark_committed(index.client, index.documents, path.absolute(), meta.generation, meta.commit_id)


def _commit_and_purge(index: MilvusIndex, path: Path, meta: IndexMeta, stats, retired: list[int]) -> None:
    meta.retired_rows = sorted(set(meta.retired_rows) | set(retired))
    _commit(index, path, meta, stats)
    if meta.retired_rows or meta.stale_prefixes:  # committed: the old versions leave Milvus, then the record forgets
        index.meta = meta
        _purge(index, meta.retired_rows)
        _drop_prefixes(index.client, meta.stale_prefixes)
        meta.retired_rows, meta.stale_prefixes = [], []
        _commit(index, path, meta, stats)


def _stats(path: Path, meta: IndexMeta, add: bool):
    if not meta.language_debias:
        return None
    from .language_debias import LanguageStats

    return LanguageStats.load(path, meta.dim) if add else LanguageStats(meta.dim)


def _insert(index: MilvusIndex, batch, generation: int, row: int, sentence_row: int) -> tuple[int, int]:
    """One batch of documents and their sentences as rows of ``generation``; returns the next free rows."""
    dim = index.meta.dim
    vectors = normalize(np.asarray(batch.doc_vectors, np.float32).reshape(len(batch.doc_ids), -1))
    if vectors.shape[1] != dim:
        raise HmdeError(f"vectors have dimension {vectors.shape[1]}, the index {dim}")
    metadata = [_metadata(m, x) for m, x in zip(batch.metadata or [{}] * len(batch.doc_ids), batch.doc_ids)]
    docs, sentences = [], []
    for i, (doc_id, lang, text, vector) in enumerate(zip(batch.doc_ids, batch.langs, batch.texts, vectors)):
        docs.append({"row": row + i, "doc_id": doc_id, "generation": generation, "lang": lang or "",
                     "metadata": metadata[i], **_typed_fields(index, metadata[i]), "text": _text(text),
                     "vector": vector.tolist()})
    for i, units in enumerate(batch.sentences or []):
        if not len(units):
            continue
        sv = normalize(np.asarray(batch.sentence_vectors[i], np.float32).reshape(-1, dim))
        for p, (unit, v) in enumerate(zip(units, sv)):
            sentences.append({"id": sentence_row, "doc_row": row + i, "doc_id": batch.doc_ids[i],
                              "generation": generation, "lang": batch.langs[i] or "", "metadata": metadata[i],
                              **_typed_fields(index, metadata[i]), "position": p, "text": _text(unit),
                              "vector": v.tolist()})
            sentence_row += 1
    for start in range(0, len(docs), INSERT_ROWS):
        index.client.insert(index.documents, docs[start:start + INSERT_ROWS])
    for start in range(0, len(sentences), INSERT_ROWS):
        index.client.insert(index.sentences, sentences[start:start + INSERT_ROWS])
    return row + len(docs), sentence_row


def write_milvus(path: Path, meta: IndexMeta, batches: Iterable, add: bool, replace: bool) -> MilvusIndex:
    """Create (or, ``add``, extend; ``replace``, upsert into) the Milvus collections of the index at ``path`` as one
    commit (the caller holds the writer's lock); returns the index, open."""
    if add:
        index = MilvusIndex.open(path, read_index_meta(path / "index.json"))
    else:  # new collections; an old index of this folder stays until the commit (fresh_index)
        index = fresh_index(path, meta)
    try:
        meta = _begin(index, fresh=not add)
        generation, stats = meta.generation, _stats(path, meta, add)
        row, sentence_row = meta.next_row, meta.next_sentence_row
        written: dict[str, tuple[int, str]] = {}  # this write's documents: id -> (row, lang)
        retired, replaced = [], 0
        kinds = {k: set(v) for k, v in meta.metadata_types.items()} | {k: {"unknown"} for k in meta.metadata_keys
                                                                         if k not in meta.metadata_types}
        for batch in batches:
            old = {r["doc_id"]: (r["row"], r.get("lang") or None) for r in index.rows_of(batch.doc_ids)}
            seen = set()
            for doc_id in batch.doc_ids:
                if doc_id in seen or (doc_id in written and not replace):
                    raise HmdeError(f"document ids must be unique: '{doc_id}' occurs twice in the input")
                seen.add(doc_id)
                if doc_id in old and not replace:
                    raise DuplicateIds(doc_id)
            leaving = [old[x] for x in batch.doc_ids if x in old and x not in written] + \
                [written[x] for x in batch.doc_ids if x in written]
            replaced += sum(1 for x in batch.doc_ids if x in old and x not in written)
            retired += [r for r, _ in leaving]
            if stats is not None and leaving:
                vectors, starts, counts = index.sentences_of_documents([r for r, _ in leaving])
                stats.update([lang for _, lang in leaving], np.split(vectors, np.cumsum(counts)[:-1]), sign=-1)
            start_row = row
            row, sentence_row = _insert(index, batch, generation, row, sentence_row)
            written.update((x, (start_row + i, lang)) for i, (x, lang) in enumerate(zip(batch.doc_ids, batch.langs)))
            if stats is not None and batch.sentence_vectors:
                stats.update(batch.langs, [normalize(np.asarray(v, np.float32).reshape(-1, meta.dim)) if len(v) else
                                           np.zeros((0, meta.dim), np.float32) for v in batch.sentence_vectors])
            for m in batch.metadata or []:
                for k, v in (m or {}).items():
                    kinds.setdefault(k, set()).add(value_kind(v))
        _flush(index)
        meta.count, meta.deleted = meta.count - replaced + len(written), 0  # written: each id's last version
        meta.next_row, meta.next_sentence_row = row, sentence_row
        meta.metadata_keys = sorted(kinds)
        # the kinds are kept where every key's are known (a record from before kinds were kept: after a rebuild)
        meta.metadata_types = {} if any("unknown" in v for v in kinds.values()) else \
            {k: sorted(v) for k, v in sorted(kinds.items())}
        _commit_and_purge(index, path, meta, stats, retired)
    finally:
        index.close()
    opened = MilvusIndex.open(path, meta)
    opened.replaced = replaced
    return opened


def delete_milvus(path: Path, meta: IndexMeta, doc_ids: Sequence[str], ignore_missing: bool) -> int:
    """Delete ``doc_ids`` as one commit (the caller holds the writer's lock); returns how many were deleted."""
    from .records import UnknownIds

    with MilvusIndex.open(path, meta) as index:
        rows = {r["doc_id"]: (r["row"], r.get("lang") or None) for r in index.rows_of(list(doc_ids))}
        missing = [x for x in doc_ids if x not in rows]
        if missing and not ignore_missing:
            raise UnknownIds(missing, path)
        if not rows:
            return 0
        meta = _begin(index, fresh=False)
        stats = _stats(path, meta, add=True)
        leaving = list(rows.values())
        if stats is not None:
            vectors, starts, counts = index.sentences_of_documents([r for r, _ in leaving])
            stats.update([lang for _, lang in leaving], np.split(vectors, np.cumsum(counts)[:-1]), sign=-1)
        meta.count -= len(leaving)
        _commit_and_purge(index, path, meta, stats, [r for r, _ in leaving])
        return len(rows)
