"""What a store of an hmde index provides, and nothing more: the ranking (:mod:`hmde.index.ranking`) is written once
above it, so that every store ranks the same documents the same way (issue 61).

Two stores implement it: hmde's own files (FAISS + DuckDB, :mod:`hmde.index.local_store`) and Milvus
(:mod:`hmde.index.milvus_store`). A new store is a module with a class that has these members; its tests subclass
``tests/store_contract.py``'s ``StoreContract`` with a fixture that builds an index in it.

Rows: every document version a store holds has a row number (a whole number that a replaced document's new version
does not reuse), and so has every sentence. Deleted or replaced documents' rows are never returned.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np


@dataclass
class Selection:
    """The live documents a search may return (a language, a metadata filter), as a store pushes it down: ``rows``
    (hmde's own index: the matching rows, passed to FAISS as an ID selector) or ``expression`` (Milvus: a boolean
    expression of its scalar filtering, on the documents and on the sentences collection)."""

    count: int  # documents selected
    rows: set | None = None
    expression: str | None = None
    sentence_expression: str | None = None


class DocumentStore(Protocol):
    path: Path
    meta: object  # hmde.index.meta.IndexMeta: its ``live`` count, dimension, index type, multi_vector
    language_basis: np.ndarray  # (k, dim) directions searches project out (empty: none; hmde.index.language_debias)

    def languages(self) -> list[str]:
        """The languages the live documents name, sorted."""

    def select(self, langs: Sequence[str] | None, tree) -> Selection | None:
        """The live documents in one of ``langs`` (None: any) that the filter ``tree`` (hmde.index.filters; None:
        all) matches; None where that is every live document."""

    def nearest_documents(self, q: np.ndarray, k: int, selection: Selection | None, ef_search=None, nprobe=None):
        """(Q, k) inner products and rows of the nearest document vectors, best first (rows -1: none)."""

    def nearest_sentences(self, q: np.ndarray, k: int, selection: Selection | None, ef_search=None, nprobe=None):
        """(Q, k) inner products, sentence rows and their documents' rows of the nearest sentence vectors."""

    def sentence_vectors_of(self, rows: np.ndarray) -> np.ndarray:
        """The stored (unit) vectors of sentence ``rows``, in that order."""

    def sentence_residual_norms(self, rows: np.ndarray) -> np.ndarray | None:
        """Where the store's sentence search gives exact inner products and the index removes its languages'
        directions: each of ``rows``' (any shape; -1 ignored) length outside them
        (:func:`hmde.index.language_debias.residual_norms`) without reading the vectors; else None (the ranking
        reads the vectors, :func:`hmde.index.scoring.exact_scores`)."""

    def document_vectors(self, rows: np.ndarray) -> np.ndarray:
        """The stored (unit) document vectors of ``rows``, in that order."""

    def document_residual_norms(self, rows: np.ndarray) -> np.ndarray | None:
        """As :meth:`sentence_residual_norms`, of document ``rows``: their stored vectors' lengths outside the
        languages' directions, where the store keeps exact document vectors and the index removes those directions;
        else None (the ranking computes them from the vectors it reads)."""

    def exact_document_vectors(self, rows: np.ndarray) -> np.ndarray | None:
        """Where the stored document vectors are approximate codes: the exact ones, else None."""

    def live_rows_and_languages(self) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """Every live document's row (ascending), its language as a position in the returned names (-1: none)."""

    def sentences_of_documents(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The stored sentence vectors of documents ``rows`` (ascending): (vectors, starts, counts)."""

    def records(self, rows: Sequence[int]) -> dict:
        """row -> [doc_id, lang, text, sentences, sentence vectors (n, dim), metadata] of live ``rows``."""

    def rows_where(self, tree) -> list[int]:
        """The live documents' rows a filter's tree matches (None: every live one), ascending (the order written)."""

    def rows_of_ids(self, doc_ids: Sequence[str]) -> dict[str, int]:
        """Each of ``doc_ids`` the index holds -> its live row."""

    def require_bm25(self):
        """The store's BM25 retriever (hybrid search), or a one-line refusal where it has none."""
