"""Filling an index: document batches (vectors, sentences, texts) from a method's vectorizer or
from the Ray engine's Parquet shards, written by :class:`~hmde.index.store.DocumentIndex` a batch
at a time; an IVF index trains on the first batches, which are kept and written after."""

from __future__ import annotations

import itertools
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from ..encoders.finite_vectors import require_finite
from ..methods.vectorizer import flat_text
from .store import SENTENCE_LISTS_PER_DOCUMENT_LIST, DocumentBatch, DocumentIndex, IndexMeta

IVF_TRAIN_PER_LIST = 64  # training vectors per IVF list (FAISS wants 30-256)
PQ_TRAIN = 256 * 40  # product quantisation: FAISS wants 39 vectors per centroid, 256 centroids per sub-vector


def encoded_batches(vectorizer, chunks: Iterable[Sequence], contextual: bool = False,
                    done: Callable[[int], None] = lambda n: None) -> Iterator[DocumentBatch]:
    """One batch per chunk of records (``doc_id``, ``text``, ``lang``): document vectors and the
    sentences with their vectors (``contextual``: HMDE's contextualised ones, a multi-vector index)."""
    for chunk in chunks:
        langs = [r.lang for r in chunk]
        vectors, units, sents = vectorizer.encode_with_sentences([r.text for r in chunk], langs, contextual=contextual)
        require_finite(vectors, [r.doc_id for r in chunk])
        done(len(chunk))
        yield DocumentBatch([r.doc_id for r in chunk], langs, [flat_text(r.text) for r in chunk], vectors, units, sents,
                            [r.extra for r in chunk])


def write_batches(output, meta: IndexMeta, batches: Iterator[DocumentBatch], add: bool,
                  replace: bool = False, skip_known: bool = False, delete_ids=()) -> DocumentIndex:
    """Write (or, ``add``, extend; ``replace``, extend replacing the documents whose ids it holds) the index; a new IVF index first trains on the batches' first
    ``ivf_lists * IVF_TRAIN_PER_LIST`` vectors (a multi-vector one also on as many sentence vectors per
    sentence list), holding those batches until they are written: memory holds that sample, not the
    collection."""
    first, train, sentence_train = [], None, None
    if meta.ivf_lists and not add:
        need = max(meta.ivf_lists * IVF_TRAIN_PER_LIST, PQ_TRAIN if meta.pq_m else 0)
        sentence_need = max(meta.ivf_lists * IVF_TRAIN_PER_LIST * SENTENCE_LISTS_PER_DOCUMENT_LIST,
                            PQ_TRAIN if meta.pq_m else 0) if meta.multi_vector else 0
        for batch in batches:
            first.append(batch)
            sentences = sum(len(v) for b in first for v in (b.sentence_vectors or []))
            if sum(len(b.doc_ids) for b in first) >= need and sentences >= sentence_need:
                break
        train = np.concatenate([b.doc_vectors for b in first])[:need]
        if meta.multi_vector:
            rows = [np.asarray(v, np.float32).reshape(-1, meta.dim) for b in first for v in (b.sentence_vectors or [])]
            sentence_train = np.concatenate(rows)[:sentence_need] if rows else np.zeros((0, meta.dim), np.float32)
    return DocumentIndex.write_batches(output, meta, itertools.chain(first, batches), add=add, train_vectors=train,
                                       sentence_train=sentence_train, replace=replace, skip_known=skip_known,
                                       delete_ids=delete_ids)


def shard_batches(vectors_dir, shards, written: list[int]) -> Iterator[DocumentBatch]:
    """The Ray engine's shards (vectors, ids, languages, texts, and the sentences with their vectors where they were
    encoded with them) as batches; ``written[0]`` counts rows."""
    from ..scale.ray_encode import iter_shard_tables, table_vectors

    from ..io.representation_parquet import table_documents

    for _, table in iter_shard_tables(vectors_dir, shards):
        written[0] += len(table)
        if "sentence_vectors" in table.column_names:  # encoded with the sentences: a multi-vector index's batch
            yield DocumentBatch(*table_documents(table, table.schema.field("vector").type.list_size))
            continue
        yield DocumentBatch(table.column("doc_id").to_pylist(), table.column("lang").to_pylist(),
                            table.column("text").to_pylist(), table_vectors(table))


def shard_training_vectors(vectors_dir, shards, ivf_lists: int) -> np.ndarray:
    """IVF training vectors: a sample from the first shards."""
    from ..scale.ray_encode import iter_shard_tables, table_vectors

    parts, need = [], ivf_lists * IVF_TRAIN_PER_LIST
    for _, table in iter_shard_tables(vectors_dir, shards):
        parts.append(table_vectors(table)[:need])
        need -= len(parts[-1])
        if need <= 0:
            break
    return np.concatenate(parts)
