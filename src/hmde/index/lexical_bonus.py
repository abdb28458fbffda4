"""Hybrid search that helps where it can and never hurts across languages (issue 95). BM25 matches words; a
query's words are shared only by documents in its own language, and fused by reciprocal rank BM25 ranked those
first: on a cross-lingual XQuAD set hmde's P@1 fell from 0.98 to 0.24 (docs/defaults.md). Here the dense ranking
(best sentences + the document vector, as without ``hybrid``) is kept, and each candidate in the query's own language
(given, or detected; in a collection of one language, that one) gains ``weight`` x its BM25 score over the best BM25 score of the query's language's documents.
A document so lifted never passes one of another language that the dense ranking put above it: in a collection of
several languages BM25 reorders the query's language's documents between the others, which keep their places
(fused freely, it lowered the mixed pool's MRR from 0.899 to 0.849). A collection with no document in the query's
language is ranked exactly as without ``hybrid``."""

from __future__ import annotations

from typing import Sequence

LEXICAL_WEIGHT = 0.05  # measured: docs/defaults.md, "Hybrid search by the query's language"
LEXICAL_POOL = 1000  # BM25's best documents a query is scored against (the best of them sets its scale)
CAP_GAP = 1e-6  # a lifted document stays this much below the document of another language above it


def query_codes(calibration, texts: Sequence[str], query_langs: Sequence[str | None] | None) -> list[int]:
    """Each query's language as a number of the index's languages (-1: none of them). A query whose language is not
    known (too short to tell: "volcano ash") takes the collection's where it holds one language only (its words
    are in no other); in a collection of several it gains nothing from BM25."""
    from ..text.coverage import language_code
    from ..text.language_id import detect_languages

    langs = list(query_langs) if query_langs is not None else detect_languages(list(texts))
    codes = [language_code(x) if x else None for x in langs]
    only = 0 if len(calibration.languages) == 1 else -1
    return [calibration.languages.index(c) if c in calibration.languages else only if c is None else -1
            for c in codes]


def lexical_rerank(store, picked: list[list[tuple[float, int]]], texts: Sequence[str],
                   query_langs: Sequence[str | None] | None, weight: float = LEXICAL_WEIGHT
                   ) -> list[list[tuple[float, int]]]:
    """``picked`` (each query's dense candidates, best first) with the BM25 term added to those in the query's
    language, best first again (ties keep the dense order)."""
    from ..ground.once import once
    from .calibration import QueryLanguageCalibration
    from .lexical import bm25_search

    calibration = once(store, "_calibration", lambda: QueryLanguageCalibration(store))
    codes = query_codes(calibration, texts, query_langs)
    if weight <= 0 or all(c < 0 for c in codes):
        return picked
    live = store.meta.live
    lexical = bm25_search(store.require_bm25(), list(texts), min(live, LEXICAL_POOL), live)
    out = []
    for cands, hits, code in zip(picked, lexical, codes):
        same = {row: score for row, score in hits if code >= 0 and calibration.row_language[row] == code}
        best = max(same.values(), default=0.0)
        if best <= 0:
            out.append(cands)
            continue
        rescored, cap = [], float("inf")
        for score, row in cands:  # best first: a document of the query's language stays below the nearest one of
            if calibration.row_language[row] == code:  # another language above it (or not known)
                rescored.append((max(score, min(score + weight * same.get(row, 0.0) / best, cap - CAP_GAP)), row))
            else:
                rescored.append((score, row))
                cap = score
        out.append(sorted(rescored, key=lambda x: -x[0]))
    return out
