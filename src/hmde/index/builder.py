"""Every write to an index, one path for the command line, Python and the server.

``hmde index build|add|upsert|delete|compact``, :class:`hmde.Index`'s ``create``/``add``/``upsert``/``delete``/
``compact`` and the server's ``POST``/``DELETE /indexes/{name}/documents`` all end here:

- :func:`write_records` embeds documents a chunk at a time (the model's method, the sentences with their
  vectors) and commits them to the index: created, extended (``add``), or with each known id replaced
  (``upsert``);
- :func:`write_embedded` commits documents embedded already (the server embeds through its shared batcher);
- :func:`write_shards` commits the Ray engine's encoded shards;
- :func:`hmde.index.mutations.delete_documents` and :func:`~hmde.index.mutations.compact_index`.

Each is one commit: the new version is written beside the old one and swapped in by one rename, under the
index's writer lock (:mod:`hmde.index.store`, :mod:`hmde.ground.atomic`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from ..errors import HmdeError
from .meta import SENTENCE_DTYPES
from .store import DocumentBatch, DocumentIndex, IndexMeta, INDEX_TYPES

# an index embeds its documents in chunks of at least --batch-size documents and this much text (about 1,000 news
# sentences), and at most CHUNK_DOCUMENTS documents (memory holds one chunk, not the input): embedding_chunks
CHUNK_CHARACTERS = 120_000
CHUNK_DOCUMENTS = 2048
MODES = ("create", "add", "upsert", "skip")  # skip: add, passing over the ids the index holds (under the lock)


@dataclass
class IndexSettings:
    """What ``hmde index build`` lets one choose for a new index (the defaults are its defaults)."""

    index_type: str = "flat"
    hnsw_m: int = 32
    ivf_lists: int = 1024
    pq_m: int = 96
    bm25: bool = False
    multi_vector: bool = True  # every sentence's vector too: best sentence + document vector ranking
    sentence_vectors: str = "lower"  # the sentence encoder's vectors, or HMDE's contextualised ones ("context")
    method: str | None = None  # None: the model's recommended method
    backend: str = "auto"  # hmde.encoders.backends: ONNX Runtime for a bundled model on a CPU, else PyTorch
    store: str = ""  # "milvus:PATH_OR_URI": the vectors in Milvus (hmde.index.milvus_store); "": this folder
    language_debias: str = "subspace+calibrate"  # hmde.index.language_debias.MODES (issue 56); "": none
    # how sentences.npy stores the sentence vectors: "float32" (the default) or "float16" (the dev collections rank
    # alike, half the bytes, a flat search faster: docs/scaling.md; hmde's own files only)
    sentence_dtype: str = "float32"

    def check(self) -> None:
        if self.index_type not in INDEX_TYPES:
            raise HmdeError(f"unknown index type '{self.index_type}' ({', '.join(INDEX_TYPES)})")
        if self.sentence_vectors not in ("lower", "context"):
            raise HmdeError(f"sentence_vectors must be 'lower' or 'context', got {self.sentence_vectors!r}")
        if self.hnsw_m < 2 or self.ivf_lists < 1 or self.pq_m < 1:
            raise HmdeError("hnsw_m must be >= 2, ivf_lists and pq_m >= 1")
        if self.sentence_dtype not in SENTENCE_DTYPES:
            raise HmdeError(f"sentence_dtype must be one of {', '.join(SENTENCE_DTYPES)}, got {self.sentence_dtype!r}")
        if self.sentence_dtype == "float16" and self.store:
            raise HmdeError(f"sentence_dtype {self.sentence_dtype} applies to hmde's own files; a store keeps the "
                            "vectors it is given (float32 in Milvus)")


def new_meta(settings: IndexSettings, model: str, model_sha256: str | None, dim: int, method: str,
             path: str | Path | None = None) -> IndexMeta:
    """The record of a new index (``index.json``) at ``path``."""
    ivf = settings.index_type in ("ivf", "ivfpq")
    from .language_debias import MODES

    if settings.language_debias not in MODES:
        raise HmdeError(f"language_debias must be one of {', '.join(map(repr, MODES))} (\"\": none), got "
                        f"{settings.language_debias!r}")
    store = {}
    if settings.store:
        from .milvus_client import collection_prefix, parse_store

        if path is None:
            raise HmdeError("an index stored in Milvus needs its folder's path (its collections are named for it)")
        store = {"store": "milvus", "store_uri": parse_store(settings.store), "store_prefix": collection_prefix(path)}
    return IndexMeta(**store, model=model, model_sha256=model_sha256, dim=dim, method=method, index_type=settings.index_type,
                     count=0, hnsw_m=settings.hnsw_m, ivf_lists=settings.ivf_lists if ivf else 0,
                     pq_m=settings.pq_m if settings.index_type == "ivfpq" else 0, bm25=bool(settings.bm25),
                     backend=settings.backend or "auto", multi_vector=bool(settings.multi_vector),
                     language_debias=settings.language_debias,
                     sentence_vectors=(settings.sentence_vectors or "lower") if settings.multi_vector else "",
                     sentences_once=settings.index_type == "flat" and bool(settings.multi_vector) and not settings.store,
                     sentence_dtype=settings.sentence_dtype)


def contextual(meta: IndexMeta) -> bool:
    """Whether the index stores HMDE's contextualised sentence vectors (so its writes must compute them)."""
    return bool(meta.multi_vector) and meta.sentence_vectors == "context"


def write_records(path: str | Path, vectorizer, meta: IndexMeta, chunks: Iterable[Sequence], mode: str = "create",
                  done: Callable[[int], None] = lambda n: None, delete_ids: Sequence[str] = ()) -> DocumentIndex:
    """Embed ``chunks`` of records (``doc_id``, ``text``, ``lang``; :func:`hmde.io.documents.records_from`) with
    ``vectorizer`` and commit them to the index at ``path`` (``mode``: create, add or upsert); ``done(n)`` after
    each chunk; ``delete_ids`` leave in the same commit. Returns the new version, open (``skipped``: the documents a
    skip passed over)."""
    from .build import encoded_batches, write_batches

    if mode not in MODES:
        raise HmdeError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    batches = encoded_batches(vectorizer, chunks, contextual(meta), done)
    return write_batches(path, meta, batches, add=mode != "create", replace=mode == "upsert", skip_known=mode == "skip",
                         delete_ids=delete_ids)


def write_embedded(path: str | Path, meta: IndexMeta, batches: Iterable[DocumentBatch],
                   mode: str = "upsert") -> DocumentIndex:
    """Commit documents embedded already (vectors, sentences and their vectors) to an existing index."""
    from .build import write_batches

    if mode not in ("add", "upsert", "skip"):
        raise HmdeError(f"mode must be add, upsert or skip, got {mode!r}")
    return write_batches(path, meta, iter(batches), add=True, replace=mode == "upsert", skip_known=mode == "skip")


def stored_batch(store, rows: Sequence[int], metadata: Sequence[dict]) -> DocumentBatch | None:
    """Documents ``rows`` as the index holds them (text, language, sentences, vectors), with new ``metadata``: what
    a metadata update commits without embedding anything again; None where the stored document vectors are not exact
    (an IVF-PQ index's codes, unless they are the mean of the stored sentences), so that the caller embeds."""
    rows = [int(r) for r in rows]
    vectors = store.exact_document_vectors(np.asarray(rows, np.int64))
    if vectors is None:
        if store.meta.index_type == "ivfpq":
            return None
        vectors = store.document_vectors(np.asarray(rows, np.int64))
    records = store.records(rows)
    return DocumentBatch([records[r][0] for r in rows], [records[r][1] for r in rows], [records[r][2] for r in rows],
                         np.asarray(vectors, np.float32), [list(records[r][3]) for r in rows],
                         [np.asarray(records[r][4], np.float32) for r in rows], [dict(m) for m in metadata])


def write_shards(path: str | Path, meta: IndexMeta, vectors_dir, shards, add: bool,
                 ivf_lists: int = 0) -> tuple[DocumentIndex, int]:
    """The Ray engine's encoded shards streamed into the index, shard by shard (an IVF index first trained on
    a sample of them); returns the index and how many documents were written."""
    from .build import shard_batches, shard_training_vectors

    train = shard_training_vectors(vectors_dir, shards, ivf_lists) \
        if meta.index_type in ("ivf", "ivfpq") and not add else None
    written = [0]
    index = DocumentIndex.write_batches(path, meta, shard_batches(vectors_dir, shards, written), add=add,
                                        train_vectors=train)
    return index, written[0]


def embedding_chunks(records: Iterable, size: int, characters: int = CHUNK_CHARACTERS,
                     most: int = CHUNK_DOCUMENTS) -> Iterator[list]:
    """``records`` (with a ``text``) in the chunks an index embeds and writes together: each of at least ``size``
    documents and ``characters`` of text, and at most ``most`` documents (the last: what is left). A chunk's
    sentences are sorted by length and packed into the encoder's batches together, so short documents in chunks of
    ``size`` alone padded more: 200 documents of 5 WMT sentences took 5.33 s in chunks of 64, 4.95 s in one (int8
    graph, docs/speed.md); long documents fill ``characters`` by ``size`` anyway."""
    chunk, held = [], 0
    for record in records:
        chunk.append(record)
        text = record.text  # a string, or a list of sentences
        held += len(text) if isinstance(text, str) else sum(len(x) for x in text if isinstance(x, str))
        if len(chunk) >= most or (len(chunk) >= max(1, size) and held >= characters):
            yield chunk
            chunk, held = [], 0
    if chunk:
        yield chunk


def describe(index: DocumentIndex) -> dict:
    """What ``hmde index info``, :meth:`hmde.Index.info` and ``GET /indexes/{name}`` say of an index: its model
    and settings, live and deleted (masked) documents and sentences, documents per language with the model's
    measured tier in each (:mod:`hmde.text.language_tiers`), bytes on disk."""
    from ..text.language_tiers import with_tiers

    # stored elsewhere (Milvus): the store counts
    info = index.describe() if hasattr(index, "describe") else _describe_local(index)
    info["languages"] = merged_languages(info["languages"])
    return {**info, "language_quality": with_tiers(info["model"], info["languages"])}


def merged_languages(counts: dict[str, int]) -> dict[str, int]:
    """Documents per language, the codes of one language and script counted as one (``ace``, ``ACE``, ``ace_Latn``:
    issue 94 counted three languages), under the code most of them were stored with; most documents first."""
    from ..text.language_codes import language_group

    groups: dict = {}
    for code, n in counts.items():
        key = ("unknown", None) if code == "unknown" else language_group(code)
        groups.setdefault(key, []).append((code, n))
    merged = {max(members, key=lambda m: (m[1], -len(m[0]), m[0]))[0]: sum(n for _, n in members)
              for members in groups.values()}
    return dict(sorted(merged.items(), key=lambda item: (-item[1], item[0])))


def _describe_local(index: DocumentIndex) -> dict:
    meta = index.meta
    deleted_sentences = int(index.deleted[:, 2].sum()) if len(index.deleted) else 0
    languages = {str(lang) if lang is not None else "unknown": int(n) for lang, n in index._query(
        "SELECT lang, count(*) FROM docs GROUP BY lang ORDER BY count(*) DESC, lang")}
    on_disk = sum(p.stat().st_size for p in Path(index.path).rglob("*") if p.is_file())
    return {"path": str(index.path), "model": meta.model, "model_sha256": meta.model_sha256, "method": meta.method,
            "dim": meta.dim, "index_type": meta.index_type, "multi_vector": meta.multi_vector,
            "sentence_vectors": meta.sentence_vectors or None, "sentence_dtype": meta.sentence_dtype, "bm25": meta.bm25,
            "backend": meta.backend, "documents": meta.live, "deleted_documents": meta.deleted,
            "sentences": int(len(index.sentence_vectors)) - deleted_sentences,
            "deleted_sentences": deleted_sentences, "languages": languages,
            "language_debias": meta.language_debias or "none", "bytes_on_disk": int(on_disk)}


def embedded_batch(records: Sequence, rows: Sequence[tuple]) -> DocumentBatch:
    """A batch from records and, for each, ``(document vector, sentences, sentence vectors)``."""
    from ..methods.vectorizer import flat_text

    vectors = np.stack([np.asarray(r[0], np.float32) for r in rows]) if rows else np.zeros((0, 1), np.float32)
    return DocumentBatch([r.doc_id for r in records], [r.lang for r in records], [flat_text(r.text) for r in records],
                         vectors, [list(r[1]) for r in rows], [np.asarray(r[2], np.float32) for r in rows],
                         [r.extra for r in records])


def write_representation(path: str | Path, vectorizer, info, chunks: Iterable[Sequence],
                         done: Callable[[int], None] = lambda n: None) -> int:
    """Embed ``chunks`` of records as an index would (document vectors, every sentence with its vector) and
    write them to a Parquet file (:mod:`hmde.io.representation_parquet`), a row group per chunk; returns the
    number of documents. ``hmde index build FILE.parquet`` reads it back without embedding again."""
    from ..io.representation_parquet import RepresentationWriter
    from .build import encoded_batches

    with RepresentationWriter(path, info) as writer:
        for batch in encoded_batches(vectorizer, chunks, info.sentence_vectors == "context", done):
            writer.write(batch.doc_ids, batch.langs, batch.texts, batch.doc_vectors, batch.sentences or [],
                         batch.sentence_vectors or [], batch.metadata)
    return info.rows


def representation_batches(path: str | Path, info) -> Iterator[DocumentBatch]:
    """A representation file's documents as index batches, a row group at a time (nothing embedded)."""
    from ..io.representation_parquet import read_batches

    for documents in read_batches(path, info):
        yield DocumentBatch(*documents)
