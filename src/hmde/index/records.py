"""What an index search returns and what a refused delete says: plain records shared by hmde's own index
(:mod:`hmde.index.store`), the Milvus store and the writes, with no dependency on either."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import HmdeError

MISSING_SHOWN = 10  # unknown ids named in a refused delete


@dataclass
class SearchHit:
    rank: int
    score: float
    doc_id: str
    lang: str | None
    best_sentence: str
    sentence_score: float
    text: str
    evidence: list[tuple[str, float]] = field(default_factory=list)  # the sentences that scored, best first
    metadata: dict = field(default_factory=dict)  # the document's other fields (title, url, date...)
    relevance: float | None = None  # the probability that it answers the query, in [0, 1] (hmde.index.relevance)
    places: list[dict] = field(default_factory=list)  # each evidence sentence's page and section (file documents)

    def as_dict(self, include_text: bool = True) -> dict:
        """The hit as ``/search`` answers it and the framework integrations hand it on: rank, doc_id, score (6
        places), lang, the sentences that scored (text and score, best first), metadata and the text."""
        out = {"rank": self.rank, "doc_id": self.doc_id, "score": round(float(self.score), 6),
               "relevance": None if self.relevance is None else round(float(self.relevance), 6), "lang": self.lang,
               "sentences": [{"text": text, "score": round(float(score), 6), **place}
                             for (text, score), place in zip(self.evidence, self.places or [{}] * len(self.evidence))]
               or ([{"text": self.best_sentence, "score": round(float(self.sentence_score), 6)}]
                   if self.best_sentence else []),
               "metadata": self.metadata}
        if include_text:
            out["text"] = self.text
        return out

    def where(self) -> str:
        """A file document's title and the page and section of its best sentence ("Das Finale, page 2, section
        'Die Tore'"); empty for documents that came without them."""
        place = self.places[0] if self.places else {}
        title = self.metadata.get("title") if "path" in self.metadata else None
        parts = ([str(title)] if title else []) + ([f"page {place['page']}"] if "page" in place else []) + \
            ([f"section '{place['section']}'"] if "section" in place else [])
        return ", ".join(parts)

    def snippet(self, width: int = 160) -> str:
        s = self.best_sentence or self.text
        return s if len(s) <= width else s[: width - 1] + "…"


class UnknownIds(HmdeError):
    """A delete names ids the index does not hold (nothing was deleted)."""

    def __init__(self, missing: list[str], path: Path, option: str = "--ignore-missing"):
        """``option``: how the caller asks to delete the others (the command line's flag, Python's argument)."""
        shown = ", ".join(repr(x) for x in missing[:MISSING_SHOWN])
        more = f" and {len(missing) - MISSING_SHOWN} more" if len(missing) > MISSING_SHOWN else ""
        super().__init__(f"index {path} holds no document {shown}{more}: nothing was deleted ({option} "
                         "deletes the others)")
        self.missing, self.path = missing, path


class DuplicateIds(HmdeError):
    """A write that adds (never replaces) brings an id the index holds already; checked under the writer's lock, so
    that of two writers racing with one id exactly one is refused (issue 92). Nothing was written."""

    def __init__(self, doc_id: str):
        super().__init__(f"document ids must be unique: '{doc_id}' is already in the index (an upsert replaces it)")
        self.doc_id = doc_id
