"""Where a file document's sentences came from. A document read from a file is its parts' texts joined by blank lines;
its metadata keeps, under ``hmde_places``, the character offsets where each page and each section begins. A hit's
sentences are found in the text in order and named by the page and section they fall in ("page 12, section
'Results'"), whichever store holds the document: the places travel as metadata."""

from __future__ import annotations

from bisect import bisect_right
from typing import Sequence

from .extracted import Extracted

PLACES_KEY = "hmde_places"
PART_BREAK = "\n\n"


def assemble(extracted: Extracted) -> tuple[str, dict | None]:
    """The document's text and its places (``{"pages": [[offset, page], ...], "sections": [[offset, heading], ...]}``,
    each listed where it changes; None where the file has neither)."""
    pieces, pages, sections = [], [], []
    offset = 0
    for part in extracted.parts:
        text = part.text.strip()
        if not text:
            continue
        if part.page is not None and (not pages or pages[-1][1] != part.page):
            pages.append([offset, part.page])
        if part.section is not None and (not sections or sections[-1][1] != part.section):
            sections.append([offset, part.section])
        elif part.section is None and sections and sections[-1][1] is not None:
            sections.append([offset, None])
        pieces.append(text)
        offset += len(text) + len(PART_BREAK)
    places = {k: v for k, v in (("pages", pages), ("sections", sections)) if v}
    return PART_BREAK.join(pieces), places or None


def sentence_offsets(text: str, sentences: Sequence[str], upto: int) -> list[int | None]:
    """Where each of the first ``upto + 1`` sentences starts in ``text``, found in order (a sentence the segmenter
    changed is looked for by its first 32 characters; None where it is not found)."""
    offsets: list[int | None] = []
    cursor = 0
    for sentence in sentences[:upto + 1]:
        at = text.find(sentence, cursor)
        if at < 0:
            at = text.find(sentence[:32], cursor)
        offsets.append(at if at >= 0 else None)
        if at >= 0:
            cursor = at + max(1, min(len(sentence), len(text) - at))
    return offsets


def _at(marks: list, offset: int):
    i = bisect_right([m[0] for m in marks], offset) - 1
    return marks[i][1] if i >= 0 else None


def places_of(text: str, sentences: Sequence[str], positions: Sequence[int], metadata: dict | None) -> list[dict]:
    """For each sentence position, ``{"page": ..., "section": ..., "chars": [start, end]}`` (the keys the document
    has; ``chars``: where the sentence stands in the document's text), or ``{}``."""
    places = (metadata or {}).get(PLACES_KEY)
    if not isinstance(places, dict) or not positions or not text:
        return [{} for _ in positions]
    pages = [m for m in places.get("pages") or () if isinstance(m, list) and len(m) == 2]
    sections = [m for m in places.get("sections") or () if isinstance(m, list) and len(m) == 2]
    offsets = sentence_offsets(text, sentences, max(positions))
    out = []
    for position in positions:
        offset = offsets[position] if position < len(offsets) else None
        if offset is None:
            out.append({})
            continue
        place = {}
        if pages:
            place["page"] = _at(pages, offset)
        if sections and _at(sections, offset) is not None:
            place["section"] = _at(sections, offset)
        found = text.startswith(sentences[position], offset)  # its characters in the document's text, where whole
        place["chars"] = [offset, offset + len(sentences[position])] if found else None
        out.append({k: v for k, v in place.items() if v is not None})
    return out
