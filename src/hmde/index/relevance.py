"""Each hit's relevance in [0, 1]: how likely it is the right document, read the same in different collections, so
that one threshold keeps about the same precision (what a RAG application thresholds; LangChain's relevance helpers,
LlamaIndex's node scores, Haystack's ``scale_score``).

hmde's score (best sentence + 0.5 x the document vector's cosine) has no scale a threshold can read across
collections: the same right answer scores about 0.1 higher among news in its own language than among articles in four
(benchmarks/relevance_calibration.py: a logistic fit of the raw score kept 0.98 precision at 0.7 on XQuAD and 0.14 on
Hausa news). What carries over is how far a hit stands out from the query's other candidates: its score's z-value
among the query's best :data:`POOL` candidates (the ranking has them anyway), through a logistic fitted on the dev
XQuAD articles and paragraphs (7,200 hits; checked on four MasakhaNEWS collections it never saw, docs/integrations.md).
Where a collection gives fewer than :data:`MIN_POOL` candidates there is no spread to read, and the raw score's
logistic (fitted on the same hits) is used. Monotone within a query: it never reorders its hits.

Both fits are hmde-e5's (:data:`CALIBRATED`). Another model's scores have another scale (hmde-mini's query path
gave a document's own text 0.0203, issue 94): where its pool is too small for the z-value, its relevance is the
score over the most it can be (``top_sentences + doc_weight``: an exact match 1.0), and the first search says once
that the model's relevance is not calibrated.
"""

from __future__ import annotations

import logging

import numpy as np

POOL = 50  # a query's candidates whose scores give the reference
MIN_POOL = 10  # fewer: the raw score's logistic
Z_SLOPE, Z_OFFSET = 3.15, -9.77  # relevance = 1 / (1 + exp(-(A z + B))), z among the pool
RAW_SLOPE, RAW_OFFSET = 83.0, -107.0  # relevance = 1 / (1 + exp(-(A score + B)))
CALIBRATED = frozenset({"hmde-e5"})  # the models these fits were made on
_SAID: set = set()


def _logistic(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(x, -700, 700)))


def relevances(scores, pool, raw=None) -> list[float]:
    """The relevance of each of ``scores`` (a query's hits) given ``pool``, the scores of its best candidates (the
    hits among them), best first; ``raw(scores)``: the relevance where the pool has no spread to read (default:
    hmde-e5's logistic of the raw score)."""
    scores, pool = np.asarray(scores, np.float64), np.asarray(pool, np.float64)[:POOL]
    pool = pool[np.isfinite(pool)]
    if len(pool) < MIN_POOL or float(pool.std()) <= 1e-9:
        return [float(x) for x in (raw(scores) if raw is not None else _logistic(RAW_SLOPE * scores + RAW_OFFSET))]
    z = (scores - pool.mean()) / pool.std()
    return [float(x) for x in _logistic(Z_SLOPE * z + Z_OFFSET)]



class Relevance:
    """The relevance of one model's hits: :func:`relevances` for a calibrated model; for another, the z-value's where
    the pool gives one, else the score over ``most`` (the highest score a hit can have), in [0, 1]."""

    def __init__(self, model: str | None, most: float):
        self.model, self.most = model, most
        self.calibrated = model in CALIBRATED

    def of(self, scores, pool) -> list[float]:
        if self.calibrated:
            return relevances(scores, pool)
        if self.model not in _SAID:
            _SAID.add(self.model)
            logging.getLogger(__name__).warning(
                "hmde: relevance of %s is not calibrated (hmde-e5's is): where a query has few candidates it is the "
                "score over its most, %g", self.model, self.most)
        return relevances(scores, pool, raw=lambda raw_scores: np.clip(raw_scores / self.most, 0.0, 1.0))
