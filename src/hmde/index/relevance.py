"""Each hit's relevance in [0, 1]: the probability that it answers the query, "no answer here" included (issue 95),
read alike in different collections, so that one threshold means about the same thing (what a RAG application
thresholds; LangChain's relevance helpers, LlamaIndex's node scores, Haystack's ``scale_score``).

hmde's score (best sentence + 0.5 x the document vector's cosine) has no scale a threshold can read across
collections, and a query whose answer is not in the collection still has a best hit. What tells them apart is how a
hit stands among the query's best :data:`POOL` candidates (the ranking has them anyway): :func:`hit_features` (its z,
its lead over the best other candidate, its raw score, and the query's head: its best candidate over its fifth),
through a logistic fitted per model (:data:`FITS`, benchmarks/answerability.py) on dev collections that hold only half
of the documents their queries ask for (questions and sentences, nine languages, 8 to 397 documents). Its offset puts
0.5 where 8% of the dev unanswerable queries' top hits pass (docs/integrations.md: the rates per collection, and on
collections the fit never saw). Where a collection gives fewer than :data:`MIN_POOL` candidates, the raw score's
logistic. Monotone within a query (every fit's lead and raw weights >= 0, and z + lead >= 0): it never reorders hits.

A model without a fit (a user's, the paper's LaBSE) is no answerability: its relevance is the z-value logistic
fitted on hmde-e5's answerable queries (issue 76), or where its pool is too small the score over the most it can be
(``top_sentences + doc_weight``: an exact match 1.0, never hmde-e5's 0.0203 of issue 94), and the first search says
once that the model's relevance is not calibrated.
"""

from __future__ import annotations

import logging

import numpy as np

POOL = 50  # a query's candidates whose scores give the reference
MIN_POOL = 10  # fewer: the raw score's logistic
# a model without a fit (hmde-e5's answerable queries, issue 76): 1 / (1 + exp(-(A z + B))), z among the pool; under
# MIN_POOL candidates 1 / (1 + exp(-(A score + B))) (relevances' default; such a model's own is the score over its most)
Z_SLOPE, Z_OFFSET = 3.15, -9.77
RAW_SLOPE, RAW_OFFSET = 83.0, -107.0
# Each bundled model's answerability (issue 95; benchmarks/answerability.py, dev collections holding half of the
# documents their queries ask for): ((z, lead, raw score, head) weights and offset, with MIN_POOL candidates or more;
# (raw score weight, offset) with fewer). Lead and raw >= 0, z + lead >= 0: relevances never rise down a ranking.
FITS = {
    "hmde-e5": ((-0.854, 2.034, 13.469, 42.475, -19.771), (56.802, -72.203)),
    "hmde-use": ((-0.577, 1.129, 4.361, 4.342, -3.792), (10.951, -5.404)),
    "hmde-mini": ((-0.113, 1.104, 1.627, 8.576, -3.411), (10.146, -7.273)),
}
_SAID: set = set()


def _logistic(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(x, -700, 700)))


def hit_features(scores, pool) -> np.ndarray:
    """(H, 4) each of ``scores``' (a query's hits) z among ``pool`` (its best candidates, best first), its lead (how
    far it stands above the best other candidate, in the pool's spread: the top hit's over the second, every other's
    below the top, so never rising down the ranking), its raw score, and the query's head (how far its best candidate
    stands above its fifth, raw: one value for all its hits). A ``pool`` of under two finite scores or no spread:
    z, lead and head 0."""
    scores, pool = np.asarray(scores, np.float64), np.asarray(pool, np.float64)[:POOL]
    pool = np.sort(pool[np.isfinite(pool)])[::-1]
    spread = float(pool.std()) if len(pool) > 1 else 0.0
    if spread <= 1e-9:
        zero = np.zeros_like(scores)
        return np.stack([zero, zero, scores, zero], 1)
    other = np.where(scores >= pool[0], pool[1], pool[0])  # the best candidate that is not this hit
    head = np.full_like(scores, pool[0] - pool[min(4, len(pool) - 1)])
    return np.stack([(scores - pool.mean()) / spread, (scores - other) / spread, scores, head], 1)


def _spread_pool(pool) -> np.ndarray | None:
    """The finite scores of ``pool``'s first :data:`POOL`, or None where they are fewer than :data:`MIN_POOL` or
    have no spread to read (then a relevance reads the raw score)."""
    pool = np.asarray(pool, np.float64)[:POOL]
    pool = pool[np.isfinite(pool)]
    return None if len(pool) < MIN_POOL or float(pool.std()) <= 1e-9 else pool


def relevances(scores, pool, raw=None) -> list[float]:
    """The relevance of each of ``scores`` (a query's hits) given ``pool``, the scores of its best candidates (the
    hits among them), best first; ``raw(scores)``: the relevance where the pool has no spread to read (default:
    hmde-e5's logistic of the raw score)."""
    scores, pool = np.asarray(scores, np.float64), _spread_pool(pool)
    if pool is None:
        return [float(x) for x in (raw(scores) if raw is not None else _logistic(RAW_SLOPE * scores + RAW_OFFSET))]
    z = (scores - pool.mean()) / pool.std()
    return [float(x) for x in _logistic(Z_SLOPE * z + Z_OFFSET)]



class Relevance:
    """The relevance of one model's hits: for a model of :data:`FITS`, the probability that a hit answers the query
    (the logistic of its :func:`hit_features`; under :data:`MIN_POOL` candidates, of its raw score); for another,
    :func:`relevances` where the pool gives a z-value, else the score over ``most`` (the highest score a hit can
    have), in [0, 1], said once a process to be uncalibrated."""

    def __init__(self, model: str | None, most: float):
        self.model, self.most = model, most
        self.fit = FITS.get(str(model)) if model else None
        self.calibrated = self.fit is not None

    def of(self, scores, pool) -> list[float]:
        if self.fit is not None:
            return answer_probabilities(scores, pool, self.fit)
        if self.model not in _SAID:
            _SAID.add(self.model)
            logging.getLogger(__name__).warning(
                "hmde: relevance of %s is not calibrated (only %s are): it is no answerability, and where a query has "
                "few candidates it is the score over its most, %g", self.model, ", ".join(sorted(FITS)), self.most)
        return relevances(scores, pool, raw=lambda raw_scores: np.clip(raw_scores / self.most, 0.0, 1.0))


def answer_probabilities(scores, pool, fit) -> list[float]:
    """The probability that each of ``scores`` (a query's hits) answers the query, given ``pool`` (its best
    candidates, best first) and ``fit``, a model's ``((z, lead, raw, head, offset), (raw, offset))`` of
    :data:`FITS`."""
    (*weights, offset), (few_raw, few_offset) = fit
    scores, pool = np.asarray(scores, np.float64), _spread_pool(pool)
    if pool is None:
        return [float(x) for x in _logistic(few_raw * scores + few_offset)]
    f = hit_features(scores, pool)
    return [float(x) for x in _logistic(f @ np.array(weights) + offset)]
