"""LangChain: :class:`HmdeVectorStore` (a ``VectorStore`` whose documents live in an hmde index), :class:`HmdeRetriever`
(a read-only ``BaseRetriever`` over an index) and :class:`HmdeEmbeddings` (an ``Embeddings``); ``pip install
'hmde[langchain]'``.

    from hmde.integrations.langchain import HmdeVectorStore
    store = HmdeVectorStore(index="my-index")                    # or url="http://127.0.0.1:8000", index="news"
    store.add_documents(docs, ids=[...])                          # through hmde's one write path; a known id replaced
    store.as_retriever(search_kwargs={"k": 5, "filter": {"section": "sport"}}).invoke("wer hat gewonnen?")

The store ranks with hmde's one ranking (best sentence + document vector, language calibration) over the index's own
model; a document comes back as it was written (``page_content``, ``metadata``, ``id``). ``page_content="passage"``
hands a prompt the sentence that matched with ``passage_sentences`` neighbours on each side instead of the whole
document, and ``evidence=True`` adds hmde's score, relevance, rank, evidence (and the passage's character span) under
``metadata["hmde"]``. ``similarity_search_with_score`` gives hmde's score, ``similarity_search_with_relevance_scores``
a relevance in [0, 1] calibrated on dev data (:func:`hmde.integrations.hits.relevance`). Filters: LangChain's dict
form, or hmde's expression (:mod:`hmde.index.filter_forms`).
"""

from __future__ import annotations

import uuid
import warnings
from typing import Any, Callable, Iterable, Sequence

from .client import Embedder, IndexClient, needs, off_the_loop
from .hits import check_page_content, hit_content, relevance, retrieved

try:
    from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.vectorstores import VectorStore
    from pydantic import ConfigDict, PrivateAttr
except ImportError as exc:  # pragma: no cover - without the extra
    raise needs("langchain", "langchain-core", exc) from None

SEARCH_OPTIONS = ("lang", "query_lang", "hybrid", "top_sentences", "doc_weight", "candidates", "group_by")


class HmdeEmbeddings(Embeddings):
    """``embed_documents``: the model's document path; ``embed_query``: the query path (e5's ``query:`` prompt),
    as hmde's searches embed queries. A model loaded here (``model``, default hmde-e5) or a server (``url``)."""

    def __init__(self, model: str | None = None, url: str | None = None, api_key: str | None = None,
                 device: str = "auto", batch_size: int = 32, threads: int | None = None, show_progress: bool = False):
        self._embedder = Embedder(model, url, api_key, device, batch_size=batch_size, threads=threads,
                                  show_progress=show_progress)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._embedder.embed(texts, "document")

    def embed_query(self, text: str) -> list[float]:
        return self._embedder.embed([text], "query")[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return await off_the_loop(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        return await off_the_loop(self.embed_query, text)


class HmdeVectorStore(VectorStore):
    """LangChain's ``VectorStore`` over an hmde index: ``index`` (a folder, created empty where it does not exist yet,
    with ``model``; its vectors in hmde's own files, or in Milvus with ``store="milvus:PATH_OR_URI"``) or ``url``
    (a server, ``index``: its name; writes need ``hmde serve --writable``). ``embedding`` is accepted for LangChain's
    constructors and not used: hmde ranks by the index's own model (a warning says so)."""

    def __init__(self, index: str | None = None, model: str | None = None, url: str | None = None,
                 api_key: str | None = None, embedding: Embeddings | None = None, *, device: str = "auto",
                 threads: int | None = None, batch_size: int = 32, show_progress: bool = False,
                 page_content: str = "document", passage_sentences: int = 1, evidence: bool = False,
                 timeout: float = 120.0, group_by_source: bool = False, **index_settings: Any):
        check_page_content(page_content, passage_sentences)
        self.group_by_source = group_by_source  # one document per metadata["source"] (LangChain's loaders' field)
        if embedding is not None and not isinstance(embedding, HmdeEmbeddings):
            warnings.warn(f"HmdeVectorStore ranks with the hmde index's own model; the embedding given "
                          f"({type(embedding).__name__}) is not used", stacklevel=2)
        self.client = IndexClient(index, url, api_key, model, device, timeout, batch_size, threads, show_progress,
                                  create=url is None, settings=index_settings)
        self.page_content, self.passage_sentences, self.evidence = page_content, passage_sentences, evidence
        self._embeddings = HmdeEmbeddings(model, url, api_key, device, batch_size, threads, show_progress)

    @property
    def embeddings(self) -> Embeddings:
        return self._embeddings

    # -- writing -----------------------------------------------------------------------------------------------------
    def add_texts(self, texts: Iterable[str], metadatas: list[dict] | None = None, *, ids: list[str] | None = None,
                  **kwargs: Any) -> list[str]:
        """Embed and commit ``texts`` (with their ``metadatas`` and ``ids``; new ids where none are given) in one
        write; a known id is replaced. Their ids."""
        texts = list(texts)
        metadatas = list(metadatas) if metadatas is not None else [{} for _ in texts]
        ids = [x or uuid.uuid4().hex for x in ids] if ids is not None else [uuid.uuid4().hex for _ in texts]
        if not len(texts) == len(metadatas) == len(ids):
            raise ValueError(f"{len(texts)} texts, {len(metadatas)} metadatas and {len(ids)} ids: give one of each "
                             "per text")
        _refuse_options(kwargs, ())
        self.client.write([_record(x, t, m) for x, t, m in zip(ids, texts, metadatas)])
        return ids

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Delete ``ids`` (those the index does not hold are passed over); ``ids=None``: every document."""
        _refuse_options(kwargs, ())
        if ids is None:
            ids = self.client.document_ids()  # however many (issue 94: the first 100,000 were deleted)
        self.client.delete(ids)
        return True

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The documents of ``ids`` the index holds, as written (in the order written)."""
        return [Document(page_content=d["text"], metadata=d["metadata"], id=d["doc_id"])
                for d in self.client.all_documents(list(ids))]

    # -- searching -------------------------------------------------------------------------------------------------
    def _hits(self, query: str, k: int, filter, kwargs) -> list[dict]:
        options = _refuse_options(kwargs, SEARCH_OPTIONS)
        if self.group_by_source:
            options.setdefault("group_by", "source")
        return self.client.search([query], k, filter, **options)[0]

    def _document(self, hit: dict) -> Document:
        text, additions = hit_content(hit, self.page_content, self.passage_sentences)
        metadata = dict(hit.get("metadata") or {})
        if self.evidence or self.page_content == "passage":
            metadata["hmde"] = additions
        return Document(page_content=text, metadata=metadata, id=hit["doc_id"])

    def similarity_search(self, query: str, k: int = 4, filter: Any = None, **kwargs: Any) -> list[Document]:
        """The ``k`` best documents by hmde's ranking of those ``filter`` matches."""
        return [self._document(h) for h in self._hits(query, k, filter, kwargs)]

    def similarity_search_with_score(self, query: str, k: int = 4, filter: Any = None,
                                     **kwargs: Any) -> list[tuple[Document, float]]:
        """(document, hmde's score: higher is better), best first."""
        return [(self._document(h), float(h["score"])) for h in self._hits(query, k, filter, kwargs)]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        raise NotImplementedError("hmde's relevance reads each hit among its query's candidates, not a score alone: "
                                  "use similarity_search_with_relevance_scores")

    def _similarity_search_with_relevance_scores(self, query: str, k: int = 4,
                                                 **kwargs: Any) -> list[tuple[Document, float]]:
        """(document, hmde's relevance in [0, 1]: :mod:`hmde.index.relevance`), best first."""
        filter = kwargs.pop("filter", None)
        return [(self._document(h), relevance(h)) for h in self._hits(query, k, filter, kwargs)]

    def max_marginal_relevance_search(self, query: str, k: int = 4, fetch_k: int = 20, lambda_mult: float = 0.5,
                                      filter: Any = None, **kwargs: Any) -> list[Document]:
        """``k`` of hmde's ``fetch_k`` best documents, chosen by maximal marginal relevance over their stored
        document vectors and the query's vector (LangChain's own ``maximal_marginal_relevance``)."""
        import numpy as np
        from langchain_core.vectorstores.utils import maximal_marginal_relevance

        hits = self._hits(query, max(fetch_k, k), filter, kwargs)
        if not hits:
            return []
        ids, vectors = self.client.document_vectors([h["doc_id"] for h in hits])
        by_id = {h["doc_id"]: h for h in hits}
        query_vector = np.asarray(self.client.encode_queries([query])[0], np.float32)
        chosen = maximal_marginal_relevance(query_vector, vectors.tolist(), lambda_mult=lambda_mult, k=k)
        return [self._document(by_id[ids[i]]) for i in chosen]

    # -- LangChain's async twins: the same work in a worker thread, the event loop free meanwhile (issue 92) -------
    async def aadd_texts(self, texts: Iterable[str], metadatas: list[dict] | None = None, *,
                         ids: list[str] | None = None, **kwargs: Any) -> list[str]:
        return await off_the_loop(self.add_texts, list(texts), metadatas, ids=ids, **kwargs)

    async def aadd_documents(self, documents: list[Document], **kwargs: Any) -> list[str]:
        return await off_the_loop(self.add_documents, documents, **kwargs)

    async def adelete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        return await off_the_loop(self.delete, ids, **kwargs)

    async def aget_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        return await off_the_loop(self.get_by_ids, ids)

    async def asimilarity_search(self, query: str, k: int = 4, filter: Any = None, **kwargs: Any) -> list[Document]:
        return await off_the_loop(self.similarity_search, query, k, filter, **kwargs)

    async def asimilarity_search_with_score(self, query: str, k: int = 4, filter: Any = None,
                                            **kwargs: Any) -> list[tuple[Document, float]]:
        return await off_the_loop(self.similarity_search_with_score, query, k, filter, **kwargs)

    async def asimilarity_search_with_relevance_scores(self, query: str, k: int = 4,
                                                       **kwargs: Any) -> list[tuple[Document, float]]:
        """LangChain's own (its score threshold, its checks) over hmde's relevance, in a worker thread."""
        return await off_the_loop(self.similarity_search_with_relevance_scores, query, k, **kwargs)

    async def _asimilarity_search_with_relevance_scores(self, query: str, k: int = 4,
                                                        **kwargs: Any) -> list[tuple[Document, float]]:
        return await off_the_loop(self._similarity_search_with_relevance_scores, query, k, **kwargs)

    async def amax_marginal_relevance_search(self, query: str, k: int = 4, fetch_k: int = 20,
                                             lambda_mult: float = 0.5, filter: Any = None,
                                             **kwargs: Any) -> list[Document]:
        return await off_the_loop(self.max_marginal_relevance_search, query, k, fetch_k, lambda_mult, filter, **kwargs)

    @classmethod
    def from_texts(cls, texts: list[str], embedding: Embeddings | None = None, metadatas: list[dict] | None = None,
                   *, ids: list[str] | None = None, **kwargs: Any) -> "HmdeVectorStore":
        """A store (``index=``/``url=`` and the other settings in ``kwargs``) holding ``texts``."""
        store = cls(embedding=embedding, **kwargs)
        store.add_texts(texts, metadatas, ids=ids)
        return store

    @classmethod
    def from_documents(cls, documents: list[Document], embedding: Embeddings | None = None,
                       **kwargs: Any) -> "HmdeVectorStore":
        ids = kwargs.pop("ids", None) or ([d.id for d in documents] if any(d.id for d in documents) else None)
        return cls.from_texts([d.page_content for d in documents], embedding, [d.metadata for d in documents],
                              ids=ids, **kwargs)

    def close(self) -> None:
        self.client.close()


def _record(doc_id: str, text: str, metadata: dict | None):
    from ..io.documents import DocumentRecord

    if not isinstance(text, str):
        raise ValueError(f"page_content must be a string, got {type(text).__name__}")
    return DocumentRecord(doc_id, text, None, dict(metadata or {}))


def _refuse_options(kwargs: dict, known: Sequence[str]) -> dict:
    unknown = sorted(set(kwargs) - set(known))
    if unknown:
        from ..errors import HmdeError

        raise HmdeError(f"unknown option {unknown[0]!r} (hmde's searches take filter, k"
                        f"{', ' + ', '.join(known) if known else ''})")
    return {k: v for k, v in kwargs.items() if v is not None}


class HmdeRetriever(BaseRetriever):
    """hmde's search as a LangChain retriever, read-only: ``HmdeRetriever(index=PATH, k=10)`` for a local index,
    ``HmdeRetriever(url=SERVER_URL, index=NAME, k=10, api_key=...)`` for a served one; ``filter`` in any form
    (hmde's expression, LangChain's dict). ``invoke(query, k=..., filter=..., lang=..., query_lang=...)`` overrides
    them per call; ``search_kwargs`` are passed to every search. Each document's metadata holds the document's own
    plus ``doc_id``, ``lang``, ``score``, ``rank`` and ``sentences`` (the evidence); ``page_content="passage"`` hands
    on the sentence that matched with its neighbours instead of the whole document."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    index: str | None = None
    url: str | None = None
    k: int = 10
    filter: Any = None
    api_key: str | None = None
    model: str | None = None
    search_kwargs: dict = {}
    device: str = "auto"
    threads: int | None = None
    batch_size: int = 32
    show_progress: bool = False
    page_content: str = "document"
    passage_sentences: int = 1
    _searcher: Any = PrivateAttr(default=None)

    def model_post_init(self, __context: Any) -> None:
        check_page_content(self.page_content, self.passage_sentences)
        self._searcher = IndexClient(self.index, self.url, self.api_key, self.model, self.device,
                                     batch_size=self.batch_size, threads=self.threads,
                                     show_progress=self.show_progress)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        k = kwargs.pop("k", self.k)
        chosen = kwargs.pop("filter", self.filter)
        hits = self._searcher.search([query], k, chosen, **{**self.search_kwargs, **kwargs})[0]
        out = []
        for h in hits:
            text, metadata = retrieved(h, self.page_content, self.passage_sentences)
            out.append(Document(page_content=text, metadata=metadata, id=h["doc_id"]))
        return out

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       **kwargs: Any) -> list[Document]:
        """The search on a worker thread: the event loop goes on meanwhile."""
        return await off_the_loop(lambda: self._get_relevant_documents(query, run_manager=run_manager.get_sync(),
                                                                       **kwargs))
