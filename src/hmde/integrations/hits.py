"""What a RAG application takes from hmde's hits, whatever its framework: the text a hit hands to a prompt (the whole
document, or a passage: the sentence that matched with its neighbours), with its character span, and hmde's additions
(the score, the relevance in [0, 1] that one threshold reads alike across collections: :mod:`hmde.index.relevance`,
the rank and the evidence)."""

from __future__ import annotations

PAGE_CONTENT = ("document", "passage")


def relevance(hit: dict) -> float:
    """The hit's relevance in [0, 1] (0 for a hybrid search's fused ranks, which give none)."""
    value = hit.get("relevance")
    return 0.0 if value is None else float(value)


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


def retrieved(hit: dict, page_content: str, neighbours: int) -> tuple[str, dict]:
    """(text, metadata) of a read-only retriever's document: the document's own metadata with hmde's fields
    (:func:`hmde.integrations.client.hit_metadata`), and the passage's span where it hands on a passage."""
    from .client import hit_metadata

    text, additions = hit_content(hit, page_content, neighbours)
    metadata = hit_metadata(hit)
    if "passage" in additions:
        metadata["passage"] = additions["passage"]
    return text, metadata


def hit_content(hit: dict, page_content: str, neighbours: int) -> tuple[str, dict]:
    """(the text a framework's document holds, hmde's additions): the whole document, or its passage
    (``{"passage": [start, end]}`` in the additions)."""
    additions = {"score": hit["score"], "relevance": hit.get("relevance"), "rank": hit["rank"],
                 "evidence": hit.get("sentences", [])}
    if page_content == "document":
        return hit.get("text") or "", additions
    text, start, end = passage(hit, neighbours)
    return text, {**additions, "passage": [start, end]}
