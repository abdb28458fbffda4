"""Haystack 2: :class:`HmdeRetriever`, :class:`HmdeTextEmbedder` and :class:`HmdeDocumentEmbedder` components over
an hmde index or model, local or served; ``pip install 'hmde[haystack]'``.

    from haystack import Pipeline
    from hmde.integrations.haystack import HmdeRetriever
    pipeline = Pipeline()
    pipeline.add_component("retriever", HmdeRetriever(index="my-index", k=5))
    pipeline.run({"retriever": {"query": "who won the final?", "filter": 'section == "sport"'}})

Each ``Document`` holds the document's text, its id and hmde's score, and in ``meta`` the document's own metadata
plus ``doc_id``, ``lang``, ``score``, ``rank`` and ``sentences`` (the evidence).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .client import Embedder, Searcher, hit_metadata, needs

try:
    from haystack import Document, component, default_from_dict, default_to_dict
except ImportError as exc:  # pragma: no cover - without the extra
    raise needs("haystack", "haystack-ai", exc) from None


@component
class HmdeRetriever:
    """``HmdeRetriever(index=PATH, k=10)`` or ``HmdeRetriever(url=SERVER_URL, index=NAME, k=10, api_key=...)``;
    ``run(query, top_k=None, filter=None)``: hmde search's ranking of the documents the filter matches."""

    def __init__(self, index: str | None = None, url: str | None = None, k: int = 10, filter: str | None = None,
                 api_key: str | None = None, model: str | None = None, search_kwargs: dict | None = None):
        self.index, self.url, self.k, self.filter, self.api_key, self.model = index, url, k, filter, api_key, model
        self.search_kwargs = dict(search_kwargs or {})
        self._searcher = Searcher(index, url, api_key, model)

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, index=self.index, url=self.url, k=self.k, filter=self.filter,
                               api_key=self.api_key, model=self.model, search_kwargs=self.search_kwargs)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "HmdeRetriever":
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document])
    def run(self, query: str, top_k: int | None = None, filter: str | None = None) -> dict[str, list[Document]]:
        hits = self._searcher.search([query], self.k if top_k is None else top_k,
                                     filter if filter is not None else self.filter,
                                     k_name="k" if top_k is None else "top_k", **self.search_kwargs)[0]
        return {"documents": [Document(id=h["doc_id"], content=h.get("text", ""), meta=hit_metadata(h),
                                       score=h["score"]) for h in hits]}


@component
class HmdeTextEmbedder:
    """A query's vector through hmde's query path (e5's ``query:`` prompt), as hmde's searches embed queries."""

    def __init__(self, model: str | None = None, url: str | None = None, api_key: str | None = None):
        self.model, self.url, self.api_key = model, url, api_key
        self._embedder = Embedder(model, url, api_key)

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, model=self.model, url=self.url, api_key=self.api_key)

    @component.output_types(embedding=list[float])
    def run(self, text: str) -> dict[str, list[float]]:
        return {"embedding": self._embedder.embed([text], "query")[0]}


@component
class HmdeDocumentEmbedder:
    """Each document's vector through the model's document path, as its ``embedding`` (new documents: Haystack's
    are not changed in place)."""

    def __init__(self, model: str | None = None, url: str | None = None, api_key: str | None = None):
        self.model, self.url, self.api_key = model, url, api_key
        self._embedder = Embedder(model, url, api_key)

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, model=self.model, url=self.url, api_key=self.api_key)

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        vectors = self._embedder.embed([d.content or "" for d in documents], "document")
        return {"documents": [replace(d, embedding=v) for d, v in zip(documents, vectors)]}
