"""LlamaIndex: :class:`HmdeEmbedding` (a ``BaseEmbedding``) and :class:`HmdeRetriever` (a ``BaseRetriever``
returning ``NodeWithScore``) over an hmde index, local or served; ``pip install 'hmde[llamaindex]'``.

    from hmde.integrations.llama_index import HmdeRetriever
    nodes = HmdeRetriever(index="my-index", k=5, filter='lang == "deu"').retrieve("who won the final?")

Each node holds the document's text, its id, and in its metadata the document's own metadata plus ``doc_id``,
``lang``, ``score``, ``rank`` and ``sentences`` (the evidence); the node's score is hmde's.
"""

from __future__ import annotations

from typing import Any

from .client import Embedder, Searcher, hit_metadata, needs

try:
    from llama_index.core.embeddings import BaseEmbedding
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from pydantic import PrivateAttr
except ImportError as exc:  # pragma: no cover - without the extra
    raise needs("llamaindex", "llama-index-core", exc) from None


class HmdeEmbedding(BaseEmbedding):
    """Queries through the query path, texts through the document path (a model loaded here, or ``url``)."""

    url: str | None = None
    _embedder: Any = PrivateAttr(default=None)

    def __init__(self, model: str | None = None, url: str | None = None, api_key: str | None = None,
                 device: str = "auto", **kwargs: Any):
        from ..encoders.registry import DEFAULT_MODEL

        super().__init__(model_name=model or DEFAULT_MODEL, url=url, **kwargs)
        self._embedder = Embedder(model, url, api_key, device)

    @classmethod
    def class_name(cls) -> str:
        return "HmdeEmbedding"

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._embedder.embed([query], "query")[0]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._embedder.embed([text], "document")[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._embedder.embed(texts, "document")


class HmdeRetriever(BaseRetriever):
    """``HmdeRetriever(index=PATH, k=10)`` or ``HmdeRetriever(url=SERVER_URL, index=NAME, k=10, api_key=...)``;
    ``filter`` as in ``hmde search --filter``; other keywords (``lang``, ``query_lang``...) go to every search."""

    def __init__(self, index: str | None = None, url: str | None = None, k: int = 10, filter: str | None = None,
                 api_key: str | None = None, model: str | None = None, **search_kwargs: Any):
        super().__init__()
        self.k, self.filter, self.search_kwargs = k, filter, search_kwargs
        self._searcher = Searcher(index, url, api_key, model)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = self._searcher.search([query_bundle.query_str], self.k, self.filter, **self.search_kwargs)[0]
        return [NodeWithScore(node=TextNode(text=h.get("text", ""), id_=h["doc_id"], metadata=hit_metadata(h)),
                              score=h["score"]) for h in hits]
