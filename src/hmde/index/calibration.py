"""What a search of a mixed-language index needs to calibrate by the query's language (issue 56): each document
row's language, and each query's baseline, its mean score over a fixed sample of the live documents, scored
exactly as the search scores a candidate (:func:`hmde.index.language_debias.calibrate` applies them).

Made once per snapshot of an index that records ``subspace+calibrate``; nothing here is written to disk (the
documents table holds the languages), so every write path stays as it was.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .language_debias import CALIBRATION_SAMPLE
from .multivector import aggregate
from .row_file import spans_to_rows


class QueryLanguageCalibration:
    """One snapshot's document languages (as :func:`hmde.text.coverage.language_code` writes them) and sample."""

    def __init__(self, index):
        from ..text.coverage import language_code

        self.index = index
        rows, positions, names = index.live_rows_and_languages()
        codes = [language_code(name) for name in names]  # eng and en: one language
        self.languages = sorted(set(codes))
        number = np.array([self.languages.index(c) for c in codes] + [-1], np.int32)  # [-1]: none given
        self.row_language = np.full(index.meta.count, -1, np.int32)  # -1: deleted, or no language given
        self.row_language[rows] = number[positions]
        rng = np.random.default_rng(0)
        self.sample = np.sort(rows if len(rows) <= CALIBRATION_SAMPLE else
                              rng.choice(rows, CALIBRATION_SAMPLE, replace=False))
        self._sample_sentences = None

    def plan(self, query_langs: Sequence[str | None]) -> list[int]:
        """Each query's language as a number of :attr:`languages` (-1: no calibration). Only where the index
        holds that language and another: within one language the change is a constant."""
        from ..text.coverage import language_code

        if len(self.languages) < 2:
            return [-1] * len(query_langs)
        return [self.languages.index(language_code(x)) if x and language_code(x) in self.languages else -1
                for x in query_langs]

    def baselines(self, q: np.ndarray, multi_vector: bool, top_sentences: int, doc_weight: float) -> np.ndarray:
        """(Q,) each query's mean score over the sample, as the search scores a document: the sum of its
        ``top_sentences`` best sentence cosines plus ``doc_weight`` x its document vector's (multi-vector), or
        the document vector's cosine alone."""
        index = self.index  # (Q, N) cosines as the search computes them (DocumentIndex._cosines)
        scores = index._cosines(index.document_vectors(self.sample), q).T
        if not multi_vector:
            return scores.mean(1)
        vectors, starts, counts = self.sample_sentences()
        sentence_part = aggregate(index._cosines(vectors, q).T, starts, counts, top_sentences)
        return (sentence_part + doc_weight * scores).mean(1)

    def sample_sentences(self):
        """The sample's stored sentence vectors, read once: (vectors, starts, counts)."""
        if self._sample_sentences is None:
            owners = self.index.sentence_owners()
            starts = np.searchsorted(owners, self.sample, "left")
            counts = np.searchsorted(owners, self.sample, "right") - starts
            rows = spans_to_rows(starts, counts)
            vectors = self.index._sentence_file().take(rows).astype(np.float32) if len(rows) else \
                np.zeros((0, self.index.meta.dim), np.float32)
            self._sample_sentences = (vectors, np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64),
                                      counts.astype(np.int64))
        return self._sample_sentences
