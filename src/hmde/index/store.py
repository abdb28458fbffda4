"""An index as hmde opens and writes it, whatever its store: :class:`DocumentIndex` opens a folder's snapshot (hmde's
own files, :mod:`hmde.index.local_store`, or, where ``index.json`` names it, Milvus, :mod:`hmde.index.milvus_store`)
and writes a new version through the store's write path (:mod:`hmde.index.local_write`,
:mod:`hmde.index.milvus_write`). Both stores provide what :mod:`hmde.index.store_protocol` names, and one ranking
(:mod:`hmde.index.ranking`) searches either.

Queries go through the lower encoder alone (the paper's CLIR protocol). For each hit the sentences of the document
most similar to the query are shown: the hierarchical model has the sentence vectors anyway.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np

from ..ground.atomic import through_links
from ..ground.locks import exclusive_writer
from .faiss_files import SENTENCE_INDEX, SENTENCE_LISTS_PER_DOCUMENT_LIST, sentence_lists_for  # noqa: F401
from .local_store import LocalStore
from .local_write import (DELETED_TABLE, DOCS_TABLE, METADATA_COLUMN, SENTENCES_TABLE, DocumentBatch,  # noqa: F401
                          move_to_deleted, write_bm25, write_local)
from .meta import (INDEX_ENTRIES, INDEX_FORMAT, INDEX_TYPES, PQ_BITS, IndexMeta, check_compatible,  # noqa: F401
                   finish_version, read_index_meta)
from .ranking import COMPRESSED_SENTENCE_POOL, DEBIASED_POOL, EXACT_RESCORE, HYBRID_POOL, SENTENCE_POOL  # noqa: F401
from .records import SearchHit  # noqa: F401  (hits are named here too)


DETECT_CHARS = 2_000  # of a document's text, for its language (the identifier's answer settles long before)


def with_languages(batches: Iterable[DocumentBatch]) -> Iterator[DocumentBatch]:
    """Each batch with a language for every document that came without one, where hmde's language identifier
    (:func:`hmde.text.language_id.detect_languages`, as for queries) is sure of it; stored as ISO 639-3, so that ``index info``
    counts it and the query-language calibration and the language subspace see it (documents without ``lang`` were
    "unknown", and the correction the index recorded did nothing for them, silently)."""
    for batch in batches:
        lacking = [i for i, lang in enumerate(batch.langs) if not lang]
        if lacking:
            from ..text.coverage import iso639_3
            from ..text.language_id import detect_languages

            found = detect_languages([(batch.texts[i] or "")[:DETECT_CHARS] for i in lacking])
            langs = list(batch.langs)
            for i, lang in zip(lacking, found):
                langs[i] = iso639_3(lang) if lang else None  # as hmde's data writes languages: deu, zho
            batch = dataclasses.replace(batch, langs=langs)
        yield batch


class DocumentIndex(LocalStore):
    """Open with :meth:`open` (an index in Milvus opens as :class:`hmde.index.milvus_store.MilvusIndex`); create or
    extend with :meth:`write_batches`."""

    @classmethod
    def _open_files(cls, path: Path):
        meta_path = path / "index.json"
        if meta_path.exists():
            meta = read_index_meta(meta_path)
            if meta.store == "milvus":
                from .milvus_store import MilvusIndex

                return MilvusIndex.open(path, meta)
        return super()._open_files(path)

    @classmethod
    def write(cls, path: str | Path, meta: IndexMeta, doc_ids: Sequence[str], langs: Sequence[str | None],
              texts: Sequence[str], doc_vectors: np.ndarray, sentences: Sequence[Sequence[str]],
              sentence_vectors: Sequence[np.ndarray], add: bool = False):
        """Write a new index at ``path`` (or, with ``add``, the old one plus these documents)."""
        batch = DocumentBatch(list(doc_ids), list(langs), list(texts), doc_vectors, list(sentences),
                              list(sentence_vectors))
        return cls.write_batches(path, meta, [batch], add=add, train_vectors=doc_vectors)

    @classmethod
    def write_batches(cls, path: str | Path, meta: IndexMeta, batches: Iterable[DocumentBatch], add: bool = False,
                      train_vectors: np.ndarray | None = None,
                      sentence_train: np.ndarray | None = None, replace: bool = False, skip_known: bool = False,
                      delete_ids: Sequence[str] = ()):
        """Stream ``batches`` into a new index at ``path`` (or, with ``add``, onto the old one).

        Each batch's vectors are added and its rows inserted before the next is read. ``train_vectors`` trains an
        IVF index (a sample suffices), ``sentence_train`` the sentence index of an IVF multi-vector index.
        Documents without sentences (e.g. from ``--engine ray``) get their best sentence computed at search time.
        ``meta.count`` is set from what was written. Concurrent writers of one index wait for each other
        (:mod:`hmde.ground.locks`). ``replace`` (an upsert, with ``add``): a document whose id the index holds
        replaces it; the old version is invisible from the commit on. ``skip_known`` (with ``add``): a document whose
        id the index holds is passed over, decided under the writer's lock (the version returned counts them in
        ``skipped``). ``delete_ids`` (with ``add``): documents that leave in the same write (Milvus: right after it,
        under the same lock).
        """
        path = through_links(path)  # readers and writers of a linked index share the real folder's locks
        batches = with_languages(batches)
        with exclusive_writer(path):  # one writer at a time, from reading the old index to the swap
            stored = read_index_meta(path / "index.json") if add and (path / "index.json").is_file() else None
            skipped = [0]
            if skip_known and stored is not None:
                batches = _without_known(cls.open(path), batches, skipped)
            if (stored or meta).store == "milvus":
                from .milvus_write import write_milvus

                written = write_milvus(path, meta, batches, add, replace)
                if delete_ids:
                    from .milvus_write import delete_milvus

                    written.close()
                    delete_milvus(path, IndexMeta(**dataclasses.asdict(written.meta)), list(delete_ids), True)
                    written = cls.open(path)
            else:
                written = write_local(cls, path, meta, batches, add, train_vectors, sentence_train, replace,
                                      delete_ids)
            written.skipped = skipped[0]
            return written


def _without_known(current, batches: Iterable[DocumentBatch], skipped: list) -> Iterator[DocumentBatch]:
    """Each batch without the documents whose ids ``current`` (the version under the writer's lock) holds, or an
    earlier batch of this write brought; ``skipped[0]`` counts them. ``current`` is closed at the end."""
    seen: set = set()
    try:
        for batch in batches:
            known = set(current.rows_of_ids(batch.doc_ids)) | seen
            keep = [i for i, x in enumerate(batch.doc_ids) if x not in known]
            seen.update(batch.doc_ids)
            skipped[0] += len(batch.doc_ids) - len(keep)
            if len(keep) == len(batch.doc_ids):
                yield batch
            elif keep:
                yield batch_subset(batch, keep)
    finally:
        current.close()


def batch_subset(batch: DocumentBatch, keep: Sequence[int]) -> DocumentBatch:
    """The documents ``keep`` (positions) of ``batch``."""
    def pick(values):
        return None if values is None else [values[i] for i in keep]

    return DocumentBatch(pick(batch.doc_ids), pick(batch.langs), pick(batch.texts),
                         np.asarray(batch.doc_vectors)[list(keep)], pick(batch.sentences), pick(batch.sentence_vectors),
                         pick(batch.metadata))
