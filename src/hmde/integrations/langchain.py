"""LangChain: :class:`HmdeEmbeddings` (an ``Embeddings``) and :class:`HmdeRetriever` (a ``BaseRetriever``) over an
hmde index, local or served; ``pip install 'hmde[langchain]'``.

    from hmde.integrations.langchain import HmdeRetriever
    retriever = HmdeRetriever(index="my-index", k=5)                       # or url="http://127.0.0.1:8000", index="news"
    docs = retriever.invoke("wer hat das Finale gewonnen?", filter='section == "sport"')

Each ``Document`` holds the document's text, its id, and in its metadata the document's own metadata plus
``doc_id``, ``lang``, ``score``, ``rank`` and ``sentences`` (the evidence: the sentences that matched, best first).
The ranking is ``hmde search``'s (:mod:`hmde.integrations.client`).
"""

from __future__ import annotations

from typing import Any

from .client import Embedder, Searcher, hit_metadata, needs

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict, PrivateAttr
except ImportError as exc:  # pragma: no cover - without the extra
    raise needs("langchain", "langchain-core", exc) from None


class HmdeEmbeddings(Embeddings):
    """``embed_documents``: the model's document path; ``embed_query``: the query path (e5's ``query:`` prompt),
    as hmde's searches embed queries. A model loaded here (``model``, default hmde-e5) or a server (``url``)."""

    def __init__(self, model: str | None = None, url: str | None = None, api_key: str | None = None,
                 device: str = "auto"):
        self._embedder = Embedder(model, url, api_key, device)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._embedder.embed(texts, "document")

    def embed_query(self, text: str) -> list[float]:
        return self._embedder.embed([text], "query")[0]


class HmdeRetriever(BaseRetriever):
    """hmde's search as a LangChain retriever: ``HmdeRetriever(index=PATH, k=10)`` for a local index,
    ``HmdeRetriever(url=SERVER_URL, index=NAME, k=10, api_key=...)`` for a served one; ``filter`` as in
    ``hmde search --filter``. ``invoke(query, k=..., filter=..., lang=..., query_lang=...)`` overrides them per
    call; ``search_kwargs`` are passed to every search."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    index: str | None = None
    url: str | None = None
    k: int = 10
    filter: str | None = None
    api_key: str | None = None
    model: str | None = None
    search_kwargs: dict = {}
    _searcher: Any = PrivateAttr(default=None)

    def model_post_init(self, __context: Any) -> None:
        self._searcher = Searcher(self.index, self.url, self.api_key, self.model)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        k = kwargs.pop("k", self.k)
        chosen = kwargs.pop("filter", self.filter)
        hits = self._searcher.search([query], k, chosen, **{**self.search_kwargs, **kwargs})[0]
        return [Document(page_content=h.get("text", ""), metadata=hit_metadata(h), id=h["doc_id"]) for h in hits]
