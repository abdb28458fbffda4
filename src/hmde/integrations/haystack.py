"""Haystack (haystack-ai 2 and 3): :class:`HmdeDocumentStore` (a ``DocumentStore`` whose documents live in an hmde
index), :class:`HmdeRetriever` (over a store, or an index by path or URL), :class:`HmdeTextEmbedder` and
:class:`HmdeDocumentEmbedder`; ``pip install 'hmde[haystack]'``.

    from haystack import Pipeline
    from hmde.integrations.haystack import HmdeDocumentStore, HmdeRetriever
    store = HmdeDocumentStore(index="my-index")           # or url="http://127.0.0.1:8000", index="news"
    store.write_documents(documents)                      # through hmde's one write path
    pipeline = Pipeline()
    pipeline.add_component("retriever", HmdeRetriever(document_store=store, top_k=5))
    pipeline.run({"retriever": {"query": "who won the final?", "filters": {"field": "meta.section",
                                                                          "operator": "==", "value": "sport"}}})

A saved pipeline names hmde's classes, and Haystack 3 loads only allowed modules:
``Pipeline.loads(text, allowed_modules=["hmde.integrations.haystack"])`` (or the environment variable
``HAYSTACK_DESERIALIZATION_ALLOWLIST=hmde.integrations.haystack``).

Documents come back as written (``content``, ``meta``, ``id``, and the ``embedding``, ``sparse_embedding`` and
``blob`` a framework computed, which hmde keeps with them and does not rank by); a retriever's documents carry hmde's
score (``scale_score=True``: its relevance in [0, 1]). Filters are Haystack's own (:mod:`hmde.index.filter_forms`),
pushed down into the index as ``hmde search --filter`` is.
"""

from __future__ import annotations

import base64
import warnings
from dataclasses import replace
from typing import Any

from ..index.records import DuplicateIds
from .client import Embedder, IndexClient, needs, off_the_loop
from .hits import check_page_content, hit_content, relevance, retrieved

try:
    from haystack import Document, component, default_from_dict, default_to_dict
    from haystack.dataclasses import ByteStream, SparseEmbedding
    from haystack.document_stores.errors import DuplicateDocumentError
    from haystack.document_stores.types import DuplicatePolicy
    from haystack.errors import FilterError as HaystackFilterError
    from haystack.utils import Secret, deserialize_secrets_inplace
except ImportError as exc:  # pragma: no cover - without the extra
    raise needs("haystack", "haystack-ai", exc) from None

KEPT = "_haystack"  # the metadata key under which a document's embedding, sparse embedding and blob are kept


def _secret(value):
    return value.resolve_value() if isinstance(value, Secret) else value


def _secret_dict(value):
    if value is None or isinstance(value, Secret):
        return None if value is None else value.to_dict()
    raise ValueError("an api_key given as a string is not written into a pipeline's file: give "
                     "Secret.from_env_var('HMDE_API_KEY') instead")


def _filter_errors(call, *args, **kwargs):
    """A filter hmde cannot honour is Haystack's FilterError (one line naming the operator)."""
    from ..index.filters import FilterError

    try:
        return call(*args, **kwargs)
    except FilterError as exc:
        raise HaystackFilterError(str(exc)) from None


def _duplicate(doc_id: str) -> "DuplicateDocumentError":
    return DuplicateDocumentError(f"ID '{doc_id}' already exists in the document store (nothing was written)")


class HmdeDocumentStore:
    """Haystack's ``DocumentStore`` over an hmde index: ``index`` (a folder, created empty where it does not exist
    yet, with ``model``; its vectors in Milvus with ``store="milvus:PATH_OR_URI"``) or ``url`` (a server, ``index``:
    its name; writes need ``hmde serve --writable``). ``write_documents``' default policy is FAIL (a known id is
    refused), as in Haystack's in-memory store."""

    def __init__(self, index: str | None = None, model: str | None = None, url: str | None = None,
                 api_key: Secret | str | None = None, *, device: str = "auto", threads: int | None = None,
                 batch_size: int = 32, show_progress: bool = False, timeout: float = 120.0,
                 group_by_source: bool = False, **index_settings: Any):
        """``group_by_source``: a search answers one document per ``meta["file_path"]`` (Haystack's converters'
        source of a split), its best split with its evidence."""
        self.index, self.model, self.url, self.api_key = index, model, url, api_key
        self.group_by_source = group_by_source
        self.device, self.threads, self.batch_size, self.show_progress, self.timeout = \
            device, threads, batch_size, show_progress, timeout
        self.index_settings = dict(index_settings)
        self.client = IndexClient(index, url, _secret(api_key), model, device, timeout, batch_size, threads,
                                  show_progress, create=url is None, settings=index_settings)
        self._warned = False

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, index=self.index, model=self.model, url=self.url,
                               api_key=_secret_dict(self.api_key), device=self.device, threads=self.threads,
                               batch_size=self.batch_size, show_progress=self.show_progress, timeout=self.timeout,
                               group_by_source=self.group_by_source, **self.index_settings)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "HmdeDocumentStore":
        deserialize_secrets_inplace(data.get("init_parameters", {}), keys=["api_key"])
        return default_from_dict(cls, data)

    # -- the DocumentStore protocol ----------------------------------------------------------------------------------
    def count_documents(self) -> int:
        return self.client.count()

    def filter_documents(self, filters: dict[str, Any] | None = None) -> list[Document]:
        """The documents ``filters`` (Haystack's) matches, in the order written, as written."""
        return [_document(d) for d in _filter_errors(self.client.all_documents, filter=filters or None)]

    def write_documents(self, documents: list[Document], policy: DuplicatePolicy = DuplicatePolicy.NONE) -> int:
        """Embed and commit ``documents`` in one write: a known id is refused (FAIL, the default: nothing is
        written), passed over (SKIP) or replaced (OVERWRITE). How many were written."""
        if not isinstance(documents, list) or any(not isinstance(d, Document) for d in documents):
            raise ValueError("write_documents takes a list of Haystack Documents")
        policy = DuplicatePolicy.FAIL if policy == DuplicatePolicy.NONE else policy
        chosen: dict[str, Document] = {}
        for doc in documents:  # one id twice in a batch: the first (SKIP, FAIL) or the last (OVERWRITE)
            if doc.id in chosen and policy == DuplicatePolicy.FAIL:
                raise DuplicateDocumentError(f"ID '{doc.id}' occurs twice in the documents written")
            if doc.id not in chosen or policy == DuplicatePolicy.OVERWRITE:
                chosen[doc.id] = doc
        held = set(self.client.document_ids(list(chosen))) if chosen else set()
        if held and policy == DuplicatePolicy.FAIL:  # at once, before anything is embedded
            raise _duplicate(sorted(held)[0])
        writing = [d for x, d in chosen.items() if policy == DuplicatePolicy.OVERWRITE or x not in held]
        if any(d.embedding is not None or d.sparse_embedding is not None for d in writing) and not self._warned:
            self._warned = True
            warnings.warn("HmdeDocumentStore ranks with the hmde index's own model: the documents' embeddings are "
                          "kept with them (returned as written) and not used", stacklevel=2)
        if not writing:
            return 0
        # checked again under the index's writer lock: a writer racing with these ids (another thread, another
        # process) makes this one fail (FAIL) or pass them over (SKIP), never a silent replacement (issue 92)
        mode = {DuplicatePolicy.OVERWRITE: "upsert", DuplicatePolicy.SKIP: "skip"}.get(policy, "add")
        try:
            return self.client.write([_record(d) for d in writing], mode)
        except DuplicateIds as exc:
            raise _duplicate(exc.doc_id) from None

    def delete_documents(self, document_ids: list[str]) -> None:
        """Delete ``document_ids`` (those the store does not hold are passed over)."""
        self.client.delete(list(document_ids))

    # -- the extended operations (Haystack's DocumentStoreBaseExtendedTests) -------------------------------------------
    def delete_all_documents(self, recreate_index: bool = False) -> None:
        """Delete every document; ``recreate_index``: the index is then written again without them
        (``hmde index compact``), not only masked."""
        self.client.delete(self.client.document_ids())
        if recreate_index and not self.client.url:
            self.client.local().compact()

    def delete_by_filter(self, filters: dict[str, Any]) -> int:
        """Delete the documents ``filters`` matches; how many."""
        ids = _filter_errors(self.client.document_ids, filter=filters)
        return self.client.delete(ids) if ids else 0

    def update_by_filter(self, filters: dict[str, Any], meta: dict[str, Any]) -> int:
        """Merge ``meta`` into the metadata of the documents ``filters`` matches (nothing is embedded again); how
        many."""
        if isinstance(meta, dict) and KEPT in meta:  # it keeps the documents' embeddings: a new value broke reads
            raise ValueError(f"the meta key {KEPT!r} is hmde's (it keeps each document's embedding there): rename it")
        return _filter_errors(self.client.update_metadata, meta, filter=filters)

    def search(self, query: str, top_k: int = 10, filters: dict[str, Any] | None = None, scale_score: bool = False,
               page_content: str = "document", passage_sentences: int = 1, **options: Any) -> list[Document]:
        """hmde's ranking of the documents ``filters`` matches, best first (:class:`HmdeRetriever` calls it)."""
        if self.group_by_source:
            options.setdefault("group_by", "file_path")
        hits = _filter_errors(self.client.search, [query], top_k, filters or None, k_name="top_k", **options)[0]
        return [_hit_document(h, scale_score, page_content, passage_sentences) for h in hits]

    # -- Haystack's async twins: the same work in a worker thread, the event loop free meanwhile (issue 92) -------
    async def count_documents_async(self) -> int:
        return await off_the_loop(self.count_documents)

    async def filter_documents_async(self, filters: dict[str, Any] | None = None) -> list[Document]:
        return await off_the_loop(self.filter_documents, filters)

    async def write_documents_async(self, documents: list[Document],
                                    policy: DuplicatePolicy = DuplicatePolicy.NONE) -> int:
        return await off_the_loop(self.write_documents, documents, policy)

    async def delete_documents_async(self, document_ids: list[str]) -> None:
        return await off_the_loop(self.delete_documents, document_ids)

    async def delete_all_documents_async(self, recreate_index: bool = False) -> None:
        return await off_the_loop(self.delete_all_documents, recreate_index)

    async def delete_by_filter_async(self, filters: dict[str, Any]) -> int:
        return await off_the_loop(self.delete_by_filter, filters)

    async def update_by_filter_async(self, filters: dict[str, Any], meta: dict[str, Any]) -> int:
        return await off_the_loop(self.update_by_filter, filters, meta)

    async def search_async(self, query: str, top_k: int = 10, filters: dict[str, Any] | None = None,
                           scale_score: bool = False, page_content: str = "document", passage_sentences: int = 1,
                           **options: Any) -> list[Document]:
        return await off_the_loop(self.search, query, top_k, filters, scale_score, page_content, passage_sentences,
                                  **options)


def _record(doc: Document):
    from ..io.documents import DocumentRecord

    kept = {}
    if doc.embedding is not None:
        kept["embedding"] = list(doc.embedding)
    if doc.sparse_embedding is not None:
        kept["sparse_embedding"] = doc.sparse_embedding.to_dict()
    if doc.blob is not None:
        kept["blob"] = {"data": base64.b64encode(doc.blob.data).decode("ascii"), "mime_type": doc.blob.mime_type,
                        "meta": doc.blob.meta}
    if doc.content is None:
        kept["no_content"] = True
    if KEPT in doc.meta:
        raise ValueError(f"document {doc.id!r}: the meta key {KEPT!r} is hmde's (it keeps the document's embedding "
                         "there): rename it")
    return DocumentRecord(doc.id, doc.content or "", None, {**doc.meta, **({KEPT: kept} if kept else {})})


def _document(stored: dict, score: float | None = None, content: str | None = None,
              extra_meta: dict | None = None) -> Document:
    meta = dict(stored.get("metadata") or {})
    kept = meta.pop(KEPT, {})
    if not _kept_shape(kept):  # not what this store writes there (another door wrote it): plain metadata
        meta[KEPT], kept = kept, {}
    blob = kept.get("blob")
    return Document(id=stored["doc_id"],
                    content=None if kept.get("no_content") else (stored.get("text", "") if content is None else
                                                                 content),
                    meta={**meta, **(extra_meta or {})}, score=score, embedding=kept.get("embedding"),
                    sparse_embedding=SparseEmbedding.from_dict(kept["sparse_embedding"])
                    if kept.get("sparse_embedding") else None,
                    blob=ByteStream(data=base64.b64decode(blob["data"]), mime_type=blob.get("mime_type"),
                                    meta=blob.get("meta") or {}) if blob else None)


def _kept_shape(kept) -> bool:
    """Whether ``kept`` is what :func:`_record` writes under :data:`KEPT` (a document written elsewhere may hold any)."""
    if not isinstance(kept, dict):
        return False
    try:
        if kept.get("sparse_embedding") is not None:
            SparseEmbedding.from_dict(kept["sparse_embedding"])
        blob = kept.get("blob")
        if blob is not None:
            base64.b64decode(blob["data"], validate=True)
        embedding = kept.get("embedding")
        return embedding is None or (isinstance(embedding, list) and all(isinstance(x, (int, float)) for x in embedding))
    except (TypeError, KeyError, ValueError, AttributeError):
        return False


def _hit_document(hit: dict, scale_score: bool, page_content: str, passage_sentences: int) -> Document:
    text, additions = hit_content(hit, page_content, passage_sentences)
    extra = {"hmde": additions} if page_content == "passage" else {}
    return _document({"doc_id": hit["doc_id"], "text": hit.get("text", ""), "metadata": hit.get("metadata")},
                     relevance(hit) if scale_score else hit["score"], text, extra)


@component
class HmdeRetriever:
    """hmde's search as a Haystack retriever: over an :class:`HmdeDocumentStore` (``document_store=``), or an
    index by path (``index=PATH``) or served (``url=SERVER_URL, index=NAME, api_key=...``). ``run(query, filters=None,
    top_k=None)``: Haystack's standard inputs (``filters`` in Haystack's form, or hmde's expression); ``filter`` is
    hmde's own name for it. ``scale_score``: each document's score as hmde's relevance in [0, 1];
    ``page_content="passage"``: the sentence that matched with ``passage_sentences`` neighbours on each side."""

    def __init__(self, document_store: HmdeDocumentStore | None = None, index: str | None = None,
                 url: str | None = None, k: int | None = None, top_k: int = 10, filters: Any = None,
                 filter: str | None = None, api_key: Secret | str | None = None, model: str | None = None,
                 search_kwargs: dict | None = None, scale_score: bool = False, page_content: str = "document",
                 passage_sentences: int = 1, device: str = "auto", threads: int | None = None,
                 batch_size: int = 32, show_progress: bool = False):
        check_page_content(page_content, passage_sentences)
        if document_store is not None and (index or url):
            raise ValueError("give document_store, or index= / url=, not both")
        self.document_store, self.index, self.url, self.api_key, self.model = document_store, index, url, api_key, model
        self.top_k = k if k is not None else top_k
        self.filters = filters if filters is not None else filter
        self.search_kwargs, self.scale_score = dict(search_kwargs or {}), scale_score
        self.page_content, self.passage_sentences = page_content, passage_sentences
        self.device, self.threads, self.batch_size, self.show_progress = device, threads, batch_size, show_progress
        self._client = None if document_store is not None else IndexClient(
            index, url, _secret(api_key), model, device, batch_size=batch_size, threads=threads,
            show_progress=show_progress)

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, document_store=None if self.document_store is None else
                               self.document_store.to_dict(), index=self.index, url=self.url, top_k=self.top_k,
                               filters=self.filters, api_key=_secret_dict(self.api_key), model=self.model,
                               search_kwargs=self.search_kwargs, scale_score=self.scale_score,
                               page_content=self.page_content, passage_sentences=self.passage_sentences,
                               device=self.device, threads=self.threads, batch_size=self.batch_size,
                               show_progress=self.show_progress)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "HmdeRetriever":
        params = data.get("init_parameters", {})
        if params.get("document_store"):
            params["document_store"] = HmdeDocumentStore.from_dict(params["document_store"])
        deserialize_secrets_inplace(params, keys=["api_key"])
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document])
    def run(self, query: str, filters: Any = None, top_k: int | None = None, filter: str | None = None,
            scale_score: bool | None = None) -> dict[str, list[Document]]:
        """hmde's ranking of the documents the filter matches (``filters``, or ``filter``: per call, else the
        component's), the ``top_k`` best."""
        if filters is not None and filter is not None:  # filter was silently passed over
            raise ValueError("give filters (Haystack's) or filter (hmde's name for it), not both")
        chosen = filters if filters is not None else filter if filter is not None else self.filters
        k = self.top_k if top_k is None else top_k
        scale = self.scale_score if scale_score is None else scale_score
        if self.document_store is not None:
            return {"documents": self.document_store.search(query, k, chosen, scale, self.page_content,
                                                            self.passage_sentences, **self.search_kwargs)}
        hits = _filter_errors(self._client.search, [query], k, chosen, k_name="top_k", **self.search_kwargs)[0]
        out = []
        for h in hits:
            text, meta = retrieved(h, self.page_content, self.passage_sentences)
            out.append(Document(id=h["doc_id"], content=text, meta=meta, score=relevance(h) if scale else h["score"]))
        return {"documents": out}

    @component.output_types(documents=list[Document])
    async def run_async(self, query: str, filters: Any = None, top_k: int | None = None, filter: str | None = None,
                        scale_score: bool | None = None) -> dict[str, list[Document]]:
        """:meth:`run` in a worker thread (an ``AsyncPipeline``'s event loop goes on meanwhile)."""
        return await off_the_loop(self.run, query, filters, top_k, filter, scale_score)


class _EmbedderSettings:
    """What both embedders are made of and serialised as: the model or server, and how to embed."""

    def __init__(self, model: str | None = None, url: str | None = None, api_key: Secret | str | None = None,
                 device: str = "auto", threads: int | None = None, batch_size: int = 32, show_progress: bool = False):
        self.model, self.url, self.api_key = model, url, api_key
        self.device, self.threads, self.batch_size, self.show_progress = device, threads, batch_size, show_progress
        self._embedder = Embedder(model, url, _secret(api_key), device, batch_size=batch_size, threads=threads,
                                  show_progress=show_progress)

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, model=self.model, url=self.url, api_key=_secret_dict(self.api_key),
                               device=self.device, threads=self.threads, batch_size=self.batch_size,
                               show_progress=self.show_progress)

    @classmethod
    def from_dict(cls, data: dict[str, Any]):
        deserialize_secrets_inplace(data.get("init_parameters", {}), keys=["api_key"])
        return default_from_dict(cls, data)


@component
class HmdeTextEmbedder(_EmbedderSettings):
    """A query's vector through hmde's query path (e5's ``query:`` prompt), as hmde's searches embed queries."""

    @component.output_types(embedding=list[float])
    def run(self, text: str) -> dict[str, list[float]]:
        return {"embedding": self._embedder.embed([text], "query")[0]}

    @component.output_types(embedding=list[float])
    async def run_async(self, text: str) -> dict[str, list[float]]:
        return await off_the_loop(self.run, text)


@component
class HmdeDocumentEmbedder(_EmbedderSettings):
    """Each document's vector through the model's document path, as its ``embedding`` (new documents: Haystack's
    are not changed in place). An :class:`HmdeDocumentStore` ranks by its own model and needs none."""

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        vectors = self._embedder.embed([d.content or "" for d in documents], "document")
        return {"documents": [replace(d, embedding=v) for d, v in zip(documents, vectors)]}

    @component.output_types(documents=list[Document])
    async def run_async(self, documents: list[Document]) -> dict[str, list[Document]]:
        return await off_the_loop(self.run, documents)
