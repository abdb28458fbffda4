"""What a RAG application takes from hmde's hits, whatever its framework: the text a hit hands to a prompt (the whole
document, or a passage: the sentence that matched with its neighbours), with its character span, and a relevance
score in [0, 1] that one threshold reads alike across collections (:func:`relevance`).

The relevance is a logistic function of hmde's score (best sentence + 0.5 x the document vector's cosine), fitted on
dev data (``benchmarks/relevance_calibration.py``: XQuAD articles and paragraphs in several languages, the right
document against the others of the top 10; docs/integrations.md has the table of precision by threshold in each
collection): monotone in the score, so it never reorders hits.
"""

from __future__ import annotations

import math

# P(relevant | hmde's score) = 1 / (1 + exp(-(A * score + B))), fitted for hmde-e5's default ranking
# (benchmarks/relevance_calibration.py); other models and settings use it too (scores of the same cosine scale)
RELEVANCE_SLOPE, RELEVANCE_OFFSET = 12.0, -14.4
PAGE_CONTENT = ("document", "passage")


def relevance(score: float) -> float:
    """hmde's score as a relevance in [0, 1] (monotone: the order of the hits is kept)."""
    z = RELEVANCE_SLOPE * float(score) + RELEVANCE_OFFSET
    return 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0


def check_page_content(page_content: str, passage_sentences: int) -> None:
    from ..errors import HmdeError

    if page_content not in PAGE_CONTENT:
        raise HmdeError(f"page_content must be 'document' or 'passage', got {page_content!r}")
    if isinstance(passage_sentences, bool) or not isinstance(passage_sentences, int) or passage_sentences < 0:
        raise HmdeError(f"passage_sentences must be a whole number >= 0 (sentences on each side of the one that "
                        f"matched), got {passage_sentences!r}")


def passage(hit: dict, neighbours: int) -> tuple[str, int, int]:
    """The sentence of ``hit`` that matched best with ``neighbours`` sentences on each side, as written in the
    document's text, and its ``[start, end)`` there (the sentence alone where it cannot be found)."""
    from ..io.representation_parquet import spans
    from ..text.segmentation import split_sentences

    text = hit.get("text") or ""
    best = hit["sentences"][0]["text"] if hit.get("sentences") else ""
    if not best or not text:
        return best or text, 0, len(best or text)
    sentences = split_sentences(text, hit.get("lang"))
    starts, ends = spans(text, sentences)
    at = text.find(best)
    i = next((j for j, (s, e) in enumerate(zip(starts, ends)) if s <= at < e), None) if at >= 0 else None
    if i is None:
        return best, max(at, 0), max(at, 0) + len(best)
    first, last = max(0, i - neighbours), min(len(sentences) - 1, i + neighbours)
    while starts[first] < 0:
        first += 1
    while ends[last] < 0:
        last -= 1
    return text[starts[first]:ends[last]], starts[first], ends[last]


def hit_content(hit: dict, page_content: str, neighbours: int) -> tuple[str, dict]:
    """(the text a framework's document holds, hmde's additions): the whole document, or its passage
    (``{"passage": [start, end]}`` in the additions)."""
    additions = {"score": hit["score"], "relevance": relevance(hit["score"]), "rank": hit["rank"],
                 "evidence": hit.get("sentences", [])}
    if page_content == "document":
        return hit.get("text") or "", additions
    text, start, end = passage(hit, neighbours)
    return text, {**additions, "passage": [start, end]}
