"""LlamaIndex: :class:`HmdeVectorStore` (a vector store whose nodes live in an hmde index, text included),
:class:`HmdeRetriever` (a read-only ``BaseRetriever`` over an index) and :class:`HmdeEmbedding` (a
``BaseEmbedding``); ``pip install 'hmde[llamaindex]'``.

    from llama_index.core import StorageContext, VectorStoreIndex
    from hmde.integrations.llama_index import HmdeVectorStore
    store = HmdeVectorStore(index="my-index")                       # or url="http://127.0.0.1:8000", index="news"
    index = VectorStoreIndex.from_documents(documents, storage_context=StorageContext.from_defaults(
        vector_store=store), embed_model=store.embed_model)          # hmde embeds: LlamaIndex's vectors are not used
    index.as_retriever(filters=MetadataFilters(...)).retrieve("wer hat gewonnen?")

Nodes keep their id, text, metadata, ``ref_doc_id`` and relationships (stored the way LlamaIndex's own vector stores
store them: ``node_to_metadata_dict``); the query ranks with hmde's one ranking over the index's own model, so the
query needs no embedding (``is_embedding_query`` is False) and ``store.embed_model`` gives LlamaIndex a vector of
nothing for the nodes it would embed. A node's score is hmde's relevance in [0, 1] (``scores="hmde"``: hmde's own
score). Filters: LlamaIndex's ``MetadataFilters`` (:mod:`hmde.index.filter_forms`), ``doc_ids`` and ``node_ids``.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

from .client import Embedder, IndexClient, needs, off_the_loop
from .hits import check_page_content, hit_content, relevance, retrieved

try:
    from llama_index.core.bridge.pydantic import PrivateAttr
    from llama_index.core.embeddings import BaseEmbedding
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle, TextNode
    from llama_index.core.vector_stores.types import (BasePydanticVectorStore, MetadataFilters, VectorStoreQuery,
                                                      VectorStoreQueryResult)
    from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict
except ImportError as exc:  # pragma: no cover - without the extra
    raise needs("llamaindex", "llama-index-core", exc) from None

NODE_KEYS = ("_node_content", "_node_type", "ref_doc_id")  # what LlamaIndex's own stores keep beside the metadata


class HmdeEmbedding(BaseEmbedding):
    """Queries through the query path, texts through the document path (a model loaded here, or ``url``)."""

    url: Optional[str] = None
    _embedder: Any = PrivateAttr(default=None)

    def __init__(self, model: str | None = None, url: str | None = None, api_key: str | None = None,
                 device: str = "auto", batch_size: int = 32, threads: int | None = None,
                 show_progress: bool = False, **kwargs: Any):
        from ..encoders.registry import DEFAULT_MODEL

        super().__init__(model_name=model or DEFAULT_MODEL, url=url, embed_batch_size=batch_size, **kwargs)
        self._embedder = Embedder(model, url, api_key, device, batch_size=batch_size, threads=threads,
                                  show_progress=show_progress)

    @classmethod
    def class_name(cls) -> str:
        return "HmdeEmbedding"

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._embedder.embed([query], "query")[0]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await off_the_loop(self._get_query_embedding, query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._embedder.embed([text], "document")[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._embedder.embed(texts, "document")

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return await off_the_loop(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return await off_the_loop(self._get_text_embeddings, texts)


class NoVectors(BaseEmbedding):
    """What an :class:`HmdeVectorStore`'s index gives LlamaIndex to embed nodes with: nothing (a vector of one zero,
    at once); the store embeds with hmde's model when it writes."""

    @classmethod
    def class_name(cls) -> str:
        return "HmdeNoVectors"

    def _get_query_embedding(self, query: str) -> list[float]:
        return [0.0]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return [0.0]

    def _get_text_embedding(self, text: str) -> list[float]:
        return [0.0]


NO_EMBED_MODEL = ("LlamaIndex has no embed_model (Settings.embed_model is unset and its default, OpenAI's, is not "
                  "installed): pass embed_model=store.embed_model to VectorStoreIndex (hmde embeds the nodes itself)")


class NoEmbedModel(NoVectors):
    """LlamaIndex's default embed model where it has none (``Settings.embed_model`` unset and
    llama-index-embeddings-openai not installed, so its default would fail with an ImportError naming a package): a
    node or query it is asked to embed is one line naming ``embed_model=store.embed_model`` (issue 95)."""

    @classmethod
    def class_name(cls) -> str:
        return "HmdeNoEmbedModel"

    def _get_query_embedding(self, query: str) -> list[float]:
        from ..errors import HmdeError

        raise HmdeError(NO_EMBED_MODEL)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_query_embedding(text)


def name_the_embed_model() -> None:
    """Where LlamaIndex's default embed model cannot load, make it :class:`NoEmbedModel` (a store user's
    ``VectorStoreIndex.from_documents(docs, storage_context=...)`` then says what to pass); a set one, or an
    installed default, is left as it is."""
    from llama_index.core import Settings

    if getattr(Settings, "_embed_model", "unknown") is not None:
        return
    try:
        import llama_index.embeddings.openai  # noqa: F401  (the default LlamaIndex resolves)
    except ImportError:
        Settings._embed_model = NoEmbedModel()


class HmdeVectorStore(BasePydanticVectorStore):
    """LlamaIndex's vector store over an hmde index: ``index`` (a folder, created empty where it does not exist
    yet, with ``model``; its vectors in Milvus with ``store="milvus:PATH_OR_URI"``) or ``url`` (a server,
    ``index``: its name; writes need ``hmde serve --writable``)."""

    stores_text: bool = True
    is_embedding_query: bool = False
    flat_metadata: bool = False
    scores: str = "relevance"
    page_content: str = "document"
    passage_sentences: int = 1
    group_by_source: bool = False  # one node per ref_doc_id (the document LlamaIndex split into nodes), its best
    _client: Any = PrivateAttr(default=None)

    def __init__(self, index: str | None = None, model: str | None = None, url: str | None = None,
                 api_key: str | None = None, *, device: str = "auto", threads: int | None = None,
                 batch_size: int = 32, show_progress: bool = False, scores: str = "relevance",
                 page_content: str = "document", passage_sentences: int = 1, timeout: float = 120.0,
                 group_by_source: bool = False, **index_settings: Any):
        if scores not in ("relevance", "hmde"):
            raise ValueError(f"scores must be 'relevance' or 'hmde', got {scores!r}")
        check_page_content(page_content, passage_sentences)
        super().__init__(scores=scores, page_content=page_content, passage_sentences=passage_sentences,
                         group_by_source=group_by_source)
        self._client = IndexClient(index, url, api_key, model, device, timeout, batch_size, threads, show_progress,
                                   create=url is None, settings=index_settings)
        name_the_embed_model()

    @classmethod
    def class_name(cls) -> str:
        return "HmdeVectorStore"

    @property
    def client(self) -> IndexClient:
        return self._client

    @property
    def embed_model(self) -> BaseEmbedding:
        return NoVectors()

    # -- writing -------------------------------------------------------------------------------------------------------
    def add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> List[str]:
        """Embed and commit ``nodes`` (a known node id replaced) in one write; their ids."""
        from ..io.documents import DocumentRecord

        records = []
        for node in nodes:
            stored = node_to_metadata_dict(node, remove_text=True, flat_metadata=self.flat_metadata)
            stored.pop("doc_id", None)  # ref_doc_id says it (and doc_id is hmde's own field)
            stored.pop("document_id", None)
            records.append(DocumentRecord(node.node_id, node.get_content(), None, stored))
        self._client.write(records)
        return [node.node_id for node in nodes]

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Delete the nodes of the document ``ref_doc_id``."""
        self.delete_nodes(filters=_ref_docs([ref_doc_id]))

    def delete_nodes(self, node_ids: Optional[List[str]] = None, filters: Optional[MetadataFilters] = None,
                     **delete_kwargs: Any) -> None:
        ids = self._client.document_ids(node_ids, filters)
        self._client.delete(ids)

    def clear(self) -> None:
        self._client.delete(self._client.document_ids())

    # -- reading -------------------------------------------------------------------------------------------------------
    def get_nodes(self, node_ids: Optional[List[str]] = None,
                  filters: Optional[MetadataFilters] = None) -> List[BaseNode]:
        return [_node(d) for d in self._client.all_documents(node_ids, filters)]

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """hmde's ranking of the nodes ``query.filters``, ``doc_ids`` and ``node_ids`` allow, the
        ``similarity_top_k`` best; ``query_str`` is embedded by hmde (a query embedding given is not used)."""
        from ..index.filter_forms import to_tree
        from ..index.filters import And, In

        if not query.query_str:
            raise ValueError("HmdeVectorStore ranks by the query's text: give query_str (a query embedding alone "
                             "is not what hmde ranks with)")
        parts = [t for t in (to_tree(query.filters),
                             to_tree(_ref_docs(query.doc_ids)) if query.doc_ids else None,
                             In("doc_id", tuple(query.node_ids)) if query.node_ids else None) if t is not None]
        tree = None if not parts else parts[0] if len(parts) == 1 else And(tuple(parts))
        options = {"hybrid": True} if str(getattr(query.mode, "value", query.mode)) == "hybrid" else {}
        if self.group_by_source:
            options["group_by"] = "ref_doc_id"
        hits = self._client.search([query.query_str], query.similarity_top_k, tree, k_name="similarity_top_k",
                                   **options)[0]  # as_retriever(vector_store_query_mode="hybrid"): BM25 fused
        nodes = []
        for h in hits:
            node = _node({"doc_id": h["doc_id"], "text": h.get("text", ""), "metadata": h.get("metadata") or {}})
            if self.page_content == "passage" and isinstance(node, TextNode):
                text, additions = hit_content(h, "passage", self.passage_sentences)
                node.text, node.start_char_idx, node.end_char_idx = text, *additions["passage"]
            nodes.append(node)
        scores = [relevance(h) if self.scores == "relevance" else h["score"] for h in hits]
        return VectorStoreQueryResult(nodes=nodes, similarities=scores, ids=[h["doc_id"] for h in hits])

    # -- LlamaIndex's async twins: the same work in a worker thread, the event loop free meanwhile (issue 92) -----
    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        return await off_the_loop(self.query, query, **kwargs)

    async def async_add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> List[str]:
        return await off_the_loop(self.add, nodes, **kwargs)

    async def adelete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        return await off_the_loop(self.delete, ref_doc_id, **delete_kwargs)

    async def adelete_nodes(self, node_ids: Optional[List[str]] = None, filters: Optional[MetadataFilters] = None,
                            **delete_kwargs: Any) -> None:
        return await off_the_loop(self.delete_nodes, node_ids, filters, **delete_kwargs)

    async def aclear(self) -> None:
        return await off_the_loop(self.clear)

    async def aget_nodes(self, node_ids: Optional[List[str]] = None,
                         filters: Optional[MetadataFilters] = None) -> List[BaseNode]:
        return await off_the_loop(self.get_nodes, node_ids, filters)

    def persist(self, persist_path: str, fs=None) -> None:
        """Nothing to do: every write is committed to the index as it happens."""


def _ref_docs(ref_doc_ids) -> MetadataFilters:
    from llama_index.core.vector_stores.types import MetadataFilter

    return MetadataFilters(filters=[MetadataFilter(key="ref_doc_id", operator="in", value=list(ref_doc_ids))])


def _node(stored: dict) -> BaseNode:
    """A node as it was added, from what the index keeps (its id, text and LlamaIndex's metadata dict)."""
    metadata = dict(stored.get("metadata") or {})
    if "_node_content" in metadata:
        try:
            node = metadata_dict_to_node(metadata, text=stored.get("text", ""))
            node.id_ = stored["doc_id"]
            return node
        except (ValueError, TypeError, KeyError):  # a _node_content that LlamaIndex did not write (issue 94: every
            pass  # later query and get_nodes raised JSONDecodeError): the document read as a plain text node
    # written by something else than this store: a plain text node
    return TextNode(id_=stored["doc_id"], text=stored.get("text", ""), metadata=metadata)


class HmdeRetriever(BaseRetriever):
    """``HmdeRetriever(index=PATH, k=10)`` or ``HmdeRetriever(url=SERVER_URL, index=NAME, k=10, api_key=...)``;
    ``filter``/``filters`` in any form (hmde's expression, LlamaIndex's ``MetadataFilters``), also per call
    (``retrieve(query, filters=...)`` is not LlamaIndex's; use :meth:`retrieve_filtered`); other keywords (``lang``,
    ``query_lang``...) go to every search. Each node's metadata holds the document's own plus ``doc_id``, ``lang``,
    ``score``, ``rank`` and ``sentences`` (the evidence); the node's score is hmde's."""

    def __init__(self, index: str | None = None, url: str | None = None, k: int = 10, filter: Any = None,
                 api_key: str | None = None, model: str | None = None, filters: Any = None,
                 page_content: str = "document", passage_sentences: int = 1, device: str = "auto",
                 threads: int | None = None, batch_size: int = 32, show_progress: bool = False,
                 **search_kwargs: Any):
        super().__init__()
        check_page_content(page_content, passage_sentences)
        self.k, self.filter, self.search_kwargs = k, filters if filters is not None else filter, search_kwargs
        self.page_content, self.passage_sentences = page_content, passage_sentences
        self._searcher = IndexClient(index, url, api_key, model, device, batch_size=batch_size, threads=threads,
                                     show_progress=show_progress)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self.retrieve_filtered(query_bundle.query_str, self.filter)

    def retrieve_filtered(self, query: str, filters: Any = None, k: int | None = None) -> list[NodeWithScore]:
        """One search with its own filter (any form) and count."""
        hits = self._searcher.search([query], self.k if k is None else k, filters, **self.search_kwargs)[0]
        out = []
        for h in hits:
            text, metadata = retrieved(h, self.page_content, self.passage_sentences)
            out.append(NodeWithScore(node=TextNode(text=text, id_=h["doc_id"], metadata=metadata), score=h["score"]))
        return out

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return await off_the_loop(self._retrieve, query_bundle)
