"""Documents scored by their best sentences: late interaction between a query and a document's vectors.

Why: one vector per document averages a long document's sentences, and a question whose
answer is one sentence of it loses to shorter documents. Scoring a document by its best
sentences keeps that sentence. With HMDE's contextualised sentence vectors
(``encode_documents(output="sentences")``) each sentence is read in the context of its
document, for documents of any length.

A document's score for a query (all vectors L2-normalised, so dot products are cosines):

- ``top=1`` (default): the best sentence's cosine (MaxSim);
- ``top=k``: the sum of the k best sentences' cosines (a document with fewer has fewer terms);
- ``doc_weight=w``: plus ``w`` times the cosine of the query and the document vector.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import HmdeError
from ..align.similarity import normalize


# What `hmde search` (and hmde.Index.search) ranks a multi-vector index by when not told: the best sentence
# plus this weight times the document vector's cosine, the fusion the dev sets rank first (docs/defaults.md).
# `hmde eval clir --multi-vector` keeps 0, so that each row there measures one thing.
DEFAULT_TOP_SENTENCES = 1
DEFAULT_DOC_WEIGHT = 0.5  # measured over questions, sentence and keyword queries (docs/defaults.md): best macro average


@dataclass
class SentenceMatrix:
    """Every document's sentence vectors in one normalised matrix, documents contiguous."""

    vectors: np.ndarray  # (N, H) float32, unit rows
    starts: np.ndarray  # (D,) first row of each document
    counts: np.ndarray  # (D,) rows of each document (0: no sentence, score 0)

    @classmethod
    def from_documents(cls, per_doc: Sequence[np.ndarray]) -> "SentenceMatrix":
        counts = np.array([len(v) for v in per_doc], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64) if len(counts) else counts
        dim = next((v.shape[1] for v in per_doc if len(v)), 0)
        rows = [np.asarray(v, np.float32).reshape(-1, dim) for v in per_doc if len(v)]
        vectors = normalize(np.concatenate(rows)) if rows else np.zeros((0, dim), np.float32)
        return cls(vectors, starts, counts)

    @property
    def documents(self) -> int:
        return len(self.counts)


def check_scoring(top: int, doc_weight: float) -> None:
    if top < 1:
        raise HmdeError(f"the number of best sentences that score a document must be >= 1, got {top}")
    if doc_weight < 0:
        raise HmdeError(f"the document vector's weight must be >= 0, got {doc_weight}")


def aggregate(sims: np.ndarray, starts: np.ndarray, counts: np.ndarray, top: int = 1) -> np.ndarray:
    """(Q, N) sentence cosines -> (Q, D) document scores: per document, the sum of its ``top`` best."""
    q = sims.shape[0]
    out = np.zeros((q, len(counts)), np.float32)
    starts, counts = np.asarray(starts, np.int64), np.asarray(counts, np.int64)
    filled = counts > 0
    first, sizes = starts[filled], counts[filled]
    if top == 1 and len(first) and first[0] >= 0 and np.array_equal(first[1:], first[:-1] + sizes[:-1]) and \
            first[-1] + sizes[-1] <= sims.shape[1]:
        # documents side by side (every caller's layout): one reduction, not a Python loop over them (the
        # calibration's 256 sampled documents: 0.4 ms of every calibrated query, issue 96)
        out[:, filled] = np.maximum.reduceat(sims[:, first[0]:first[-1] + sizes[-1]], first - first[0], axis=1)
        return out
    for d, (start, count) in enumerate(zip(starts, counts)):
        if count == 0:
            continue
        block = sims[:, start:start + count]
        if top == 1 or count == 1:
            out[:, d] = block.max(1) if top == 1 else block.sum(1)
        else:
            k = min(top, count)
            out[:, d] = np.partition(block, count - k, axis=1)[:, count - k:].sum(1)
    return out


def score_documents(query_vectors: np.ndarray, sentences: SentenceMatrix, top: int = 1,
                    doc_vectors: np.ndarray | None = None, doc_weight: float = 0.0) -> np.ndarray:
    """(Q, D) scores of every document for every query (see the module docstring)."""
    check_scoring(top, doc_weight)
    q = normalize(np.asarray(query_vectors, np.float32))
    scores = aggregate(q @ sentences.vectors.T, sentences.starts, sentences.counts, top)
    if doc_weight:
        if doc_vectors is None or len(doc_vectors) != sentences.documents:
            raise HmdeError("mixing in the document vector's score needs one document vector per document")
        scores = scores + doc_weight * (q @ normalize(np.asarray(doc_vectors, np.float32)).T)
    return scores

