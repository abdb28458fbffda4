"""Cosines as every search computes them, whatever the store: of stored unit vectors with (projected) queries, each
vector's projected length dividing where the index removes its languages' directions (hmde.index.language_debias)."""

from __future__ import annotations

from typing import Callable

import numpy as np


def cosines(vectors: np.ndarray, q: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """Cosines of stored unit ``vectors`` with a query, (N,), or with several queries (rows of ``q``), (N, Q)."""
    sims = np.asarray(vectors, np.float32) @ q.T
    if len(basis):
        from .language_debias import residual_norms

        norms = residual_norms(vectors, basis)
        sims = sims / (norms if sims.ndim == 1 else norms[:, None])
    return sims


def exact_scores(vectors_of: Callable[[np.ndarray], np.ndarray], rows: np.ndarray, q: np.ndarray,
                 basis: np.ndarray | None = None, companion: np.ndarray | None = None) -> np.ndarray:
    """(Q, K) cosines of each query with its candidate rows (-1: none), read by ``vectors_of(rows)``, best first per
    query; ``rows`` (and ``companion``, e.g. each row's document) re-ordered in place to match. ``basis``: directions the (projected) query lacks, projected out of
    the rows too, from the same read."""
    sims = np.full(rows.shape, -np.inf, np.float32)
    wanted = np.unique(rows[rows >= 0])  # read once for all queries (a store over the network: one call)
    vectors = np.asarray(vectors_of(wanted), np.float32) if len(wanted) else np.zeros((0, q.shape[1]), np.float32)
    norms = None
    if basis is not None and len(basis) and len(wanted):
        from .language_debias import residual_norms

        norms = residual_norms(vectors, basis)
    for qi in range(len(q)):
        found = rows[qi] >= 0
        at = np.searchsorted(wanted, rows[qi][found])
        sims[qi, found] = vectors[at] @ q[qi]
        if norms is not None:
            sims[qi, found] /= norms[at]
    return best_first(sims, rows, companion)


def rescaled_scores(sims: np.ndarray, rows: np.ndarray, norms: np.ndarray, companion: np.ndarray | None = None
                    ) -> np.ndarray:
    """:func:`exact_scores` where the store's search gave exact inner products already (a flat or HNSW index's
    ``sims`` of the projected queries, with their candidate ``rows``): each divided by its row's length outside
    the languages' directions, ``norms`` (:meth:`hmde.index.store_protocol.DocumentStore.sentence_residual_norms`,
    one per candidate, in ``rows``' shape), best first per query, ``rows`` and ``companion`` re-ordered in place to
    match; rows -1 score -inf. No vector is read: at 50k sentences this was 0.8 of a query's 8.7 ms (issue 96)."""
    found = rows >= 0
    out = np.where(found, np.asarray(sims, np.float32) / np.where(found, norms, np.float32(1)), -np.inf)
    return best_first(out.astype(np.float32), rows, companion)


def best_first(sims: np.ndarray, rows: np.ndarray, companion: np.ndarray | None = None) -> np.ndarray:
    """``sims`` sorted best first per query (ties in their order), ``rows`` and ``companion`` re-ordered in place
    to match."""
    order = np.argsort(-sims, axis=1, kind="stable")
    rows[:] = np.take_along_axis(rows, order, axis=1)
    if companion is not None:
        companion[:] = np.take_along_axis(companion, order, axis=1)
    return np.take_along_axis(sims, order, axis=1)
