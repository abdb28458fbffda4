"""What a search of a mixed-language index needs to calibrate by the query's language (issue 56): each document
row's language, and each query's baseline, its mean score over a fixed sample of the live documents, scored
exactly as the search scores a candidate (:func:`hmde.index.language_debias.calibrate` applies them).

Made once per snapshot of an index that records ``subspace+calibrate``, from what every store provides
(:mod:`hmde.index.store_protocol`: the live rows and their languages, document and sentence vectors); nothing here is
written to disk (the stores hold the languages), so every write path stays as it was.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..ground.once import once
from .language_debias import CALIBRATION_SAMPLE, residual_norms
from .multivector import aggregate


class QueryLanguageCalibration:
    """One snapshot's document languages (as :func:`hmde.text.coverage.language_code` writes them) and sample."""

    def __init__(self, index):
        import weakref

        from ..text.coverage import language_code

        # the store owns this (``store._calibration``): a strong reference back made a cycle that kept a closed
        # snapshot, and its FAISS indexes (15.4 GB for a flat index of 10M sentences), alive until Python's cycle
        # collector ran, so a benchmark's or a server's next snapshot was opened beside it (killed for memory)
        self.index = weakref.proxy(index)
        rows, positions, names = index.live_rows_and_languages()
        codes = [language_code(name) for name in names]  # eng and en: one language
        self.languages = sorted(set(codes))
        number = np.array([self.languages.index(c) for c in codes] + [-1], np.int32)  # [-1]: none given
        size = max(index.meta.count, int(rows.max()) + 1 if len(rows) else 0)  # Milvus: rows up to its next free one
        self.row_language = np.full(size, -1, np.int32)  # -1: deleted, or no language given
        self.row_language[rows] = number[positions]
        rng = np.random.default_rng(0)
        self.sample = np.sort(rows if len(rows) <= CALIBRATION_SAMPLE else
                              rng.choice(rows, CALIBRATION_SAMPLE, replace=False))
        self._sample_sentences = None
        self._sample_vectors = None

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
        documents, sentences, starts, counts = self.scaled_sample(multi_vector)
        scores = (documents @ q.T).T  # (Q, N) cosines as the search computes them (hmde.index.scoring.cosines)
        if not multi_vector:
            return scores.mean(1)
        return (aggregate((sentences @ q.T).T, starts, counts, top_sentences) + doc_weight * scores).mean(1)

    def scaled_sample(self, multi_vector: bool):
        """The sample's document vectors and (multi-vector) sentence vectors with their starts and counts, each vector
        divided by its length outside the index's language directions: a query's cosines with them are one product.
        Read and divided once per snapshot (a store over the network: one call, not a query's), whichever thread asks
        first (issue 96: the division, every query, was 2.9 of 14 ms at 50k sentences)."""
        def scaled(vectors):
            vectors, basis = np.asarray(vectors, np.float32), self.index.language_basis
            return vectors / residual_norms(vectors, basis)[:, None] if len(basis) and len(vectors) else vectors

        documents = once(self, "_sample_vectors", lambda: scaled(self.index.document_vectors(self.sample)))
        if not multi_vector:
            return documents, None, None, None
        vectors, starts, counts = once(self, "_sample_sentences", lambda: self._scaled_sentences(scaled))
        return documents, vectors, starts, counts

    def _scaled_sentences(self, scaled):
        vectors, starts, counts = self.index.sentences_of_documents(self.sample)
        return scaled(vectors), starts, counts


def query_languages(index, queries: list, query_lang: str | None) -> list[str | None] | None:
    """Each query's language for an index that calibrates by it (:mod:`hmde.index.calibration`): the one
    given, else each query's own (:func:`hmde.text.language_id.detect_languages`); None where the index does
    not calibrate or ``query_lang`` is "none"."""
    if not getattr(index, "calibrates", False) or query_lang == "none":
        return None
    if query_lang:
        return [query_lang] * len(queries)
    from ..text.language_id import detect_languages

    return detect_languages(queries)
