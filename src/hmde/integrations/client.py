"""What every framework integration calls: one hmde index, local (a folder, its vectors in hmde's own files or in
Milvus: :class:`hmde.Index`) or served (``hmde serve``'s routes), searched, written and read back through hmde's
one ranking and one write path; and an embedder of documents and queries (:class:`hmde.serve.served.ServedModel`,
the code the server runs, or ``POST /embed``). Hits have one shape (:meth:`hmde.index.records.SearchHit.as_dict`).

Models are loaded once per process and name (a pipeline's stores, retrievers and embedders share one), and run on
one worker thread of hmde's (:data:`hmde.encoders.model_thread.MODEL_THREAD`): measured on a busy machine it is the
fastest in-process way (docs/defaults.md, "CPU threads on a shared machine"), concurrent searches' queries are
embedded together there, and async callers await it without blocking their event loop. One client is shared by any
number of threads and tasks (issue 92): :class:`hmde.Index` is. ``threads`` sets torch's threads for the process
(as ``--threads``).
"""

from __future__ import annotations

import asyncio
import functools
import threading
from pathlib import Path
from typing import Any, Sequence

from ..align.similarity import normalize
from ..encoders.model_thread import run_on_model_thread
from ..errors import HmdeError


def needs(extra: str, package: str, exc: ImportError) -> ImportError:
    """The one line an integration raises where its framework is not installed."""
    return ImportError(f"hmde's {extra} integration needs {package}: pip install 'hmde[{extra}]' ({exc})")


def server_url(url: str | None) -> str | None:
    """A server's address, checked when the integration is made (``localhost:8000`` without its scheme was a
    28-frame httpx traceback at the first search)."""
    if url is None:
        return None
    if not isinstance(url, str) or not url.startswith(("http://", "https://")) or len(url.split("://", 1)[1]) == 0:
        raise HmdeError(f"url must be a server's address starting with http:// or https:// (e.g. "
                        f"http://127.0.0.1:8000), got {url!r}")
    return url.rstrip("/")


def post(url: str, route: str, body: dict, api_key: str | None, timeout: float, method: str = "POST") -> dict:
    """``POST url + route`` with JSON; the server's refusal, a connection that fails and an answer that is no JSON
    each one line naming the address (they were httpx tracebacks)."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        answer = httpx.request(method, url + route, json=body, headers=headers, timeout=timeout)
    except httpx.TimeoutException:
        raise HmdeError(f"{url}{route} did not answer within {timeout:g} s (timeout=)") from None
    except httpx.HTTPError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise HmdeError(f"cannot reach the hmde server at {url} ({reason}): is `hmde serve` running there?") from None
    try:
        answered = answer.json()
    except ValueError:
        answered = None
    if answer.status_code != 200:
        try:
            message = answered["error"]["message"]
        except (KeyError, TypeError):
            message = answer.text[:200]
        duplicate = (answered.get("error") or {}).get("doc_id") if isinstance(answered, dict) else None
        if answer.status_code == 409 and isinstance(duplicate, str):  # the same error as a local index's
            from ..index.records import DuplicateIds

            raise DuplicateIds(duplicate)
        raise HmdeError(f"{url}{route} answered {answer.status_code}: {message}")
    if not isinstance(answered, dict):
        raise HmdeError(f"{url}{route} answered something other than hmde's JSON ({answer.text[:80]!r}): is that an "
                        "hmde server?")
    return answered


# -- models: one per process and name, run on hmde's model thread -------------------------------------------------
_MODELS: dict = {}  # (model, device, backend) -> (name, kind, model, device)
_MODELS_LOCK = threading.Lock()


def shared_model(name: str | None, device: str = "auto", backend: str | None = "auto") -> tuple:
    """``(name, kind, model, device)`` of ``name`` (default hmde's), loaded once per process (``backend``:
    :mod:`hmde.encoders.backends`, default the fast one)."""
    from ..encoders.backends import resolve
    from ..encoders.devices import pick_device
    from ..encoders.model_loading import load_model
    from ..encoders.registry import DEFAULT_MODEL

    name, device = name or DEFAULT_MODEL, pick_device(device)
    key = (name, device, resolve(name, device, backend) if backend == "auto" else backend)
    with _MODELS_LOCK:
        if key not in _MODELS:
            kind, loaded = run_on_model_thread(load_model, name, device, backend=backend)
            _MODELS[key] = (name, kind, loaded, device)
        return _MODELS[key]


async def off_the_loop(function, *args, **kwargs):
    """``function(*args, **kwargs)`` in a worker thread, awaited: an async framework method's sync twin (index
    reads, writes, searches) never blocks the caller's event loop (issue 92)."""
    return await asyncio.get_running_loop().run_in_executor(None, functools.partial(function, *args, **kwargs))


def check_options(threads, batch_size, device) -> None:
    """The integrations' shared settings, checked when a class is made: ``threads`` (1 to 1024, or None: torch's),
    ``batch_size`` (documents embedded at once), ``device`` (auto, cpu, cuda...)."""
    from ..encoders.devices import check_threads, set_threads
    from ..index.search import check_batch_size

    if threads is not None:
        check_threads(threads)
        run_on_model_thread(set_threads, threads)
    check_batch_size(batch_size)
    if not isinstance(device, str):
        raise HmdeError(f"device must be a string (auto, cpu, cuda, cuda:1...), got {device!r}")


class IndexClient:
    """One hmde index: a local folder (``index``; created empty where ``create`` and it does not exist yet, with
    ``model``), or a served one (``url``, and ``index``: its name, optional when the server serves one). Opened on
    first use; every method takes and gives plain values (hits as ``SearchHit.as_dict``)."""

    def __init__(self, index: str | None = None, url: str | None = None, api_key: str | None = None,
                 model: str | None = None, device: str = "auto", timeout: float = 120.0, batch_size: int = 32,
                 threads: int | None = None, show_progress: bool = False, create: bool = False,
                 settings: dict | None = None):
        if not index and not url:
            raise HmdeError("name a local index (index=PATH) or a server (url=SERVER_URL, index=NAME)")
        check_options(threads, batch_size, device)
        self.index, self.url, self.api_key, self.model, self.device, self.timeout = \
            index, server_url(url), api_key, model, device, timeout
        self.batch_size, self.threads, self.show_progress, self.create = batch_size, threads, show_progress, create
        self.settings = dict(settings or {})
        self._opened = None
        self._lock = threading.RLock()

    # -- a local index -----------------------------------------------------------------------------------------
    def local(self):
        """The open :class:`hmde.Index` (a local index only)."""
        from ..encoders.backends import for_index, for_job
        from ..index.search import Index
        from ..index.store import DocumentIndex

        with self._lock:
            if self._opened is None:
                path = str(self.index)
                if self.create and not (Path(path) / "index.json").is_file():
                    name, kind, loaded, device = shared_model(
                        self.model, self.device, for_job("auto", self.settings.get("sentence_vectors")))
                    # made under the writer lock: another process making it at the same moment is opened
                    self._opened = Index.open_or_create(path, name, kind, loaded, device, batch_size=self.batch_size,
                                                        **self.settings)
                else:
                    opened = DocumentIndex.open(path)
                    name, kind, loaded, device = shared_model(self.model or _recorded(opened), self.device,
                                                              for_index(opened.meta))
                    self._opened = Index.with_model(opened, name, kind, loaded, device)
            return self._opened

    def _post(self, route: str, body: dict, method: str = "POST") -> dict:
        return post(self.url, route, body, self.api_key, self.timeout, method)

    def _route(self, suffix: str = "") -> str:
        if not self.index:
            info = self._post("/health", {}, "GET")
            names = info.get("indexes") or []
            if len(names) != 1:
                raise HmdeError(f"{self.url} serves {len(names) or 'no'} indexes: name one (index=NAME)")
            self.index = names[0]
        from urllib.parse import quote

        return f"/indexes/{quote(str(self.index), safe='')}{suffix}"  # "L?x=1" went into the URL as it was

    # -- searching ---------------------------------------------------------------------------------------------
    def search(self, queries: Sequence[str], k: int = 10, filter: Any = None, k_name: str = "k",
               **options) -> list[list[dict]]:
        """Each query's hits, best first, as ``/search`` answers them (``filter``: any form
        :func:`hmde.index.filter_forms.to_tree` takes; ``options``: ``lang``, ``query_lang``, ``hybrid``; a local
        index also ``top_sentences``, ``doc_weight``, ``candidates``); ``k_name``: what the caller calls the count,
        for the message where it is no whole number >= 1."""
        from ..index.filter_forms import to_tree
        from ..index.filters import unparse
        from ..index.search import check_top_k

        check_top_k(k, k_name)
        queries = list(queries)
        tree = to_tree(filter)  # a framework's filter refused in one line before any model or request
        if self.url:
            body = {"queries": queries, "top_k": k, "filter": None if tree is None else unparse(tree), **options}
            if self.index:
                body["index"] = self.index
            return [result["hits"] for result in self._post("/search", body)["results"]]
        return [[h.as_dict() for h in hits] for hits in self.local().search(queries, top_k=k, filter=tree, **options)]

    def encode_queries(self, queries: Sequence[str]):
        """The queries' vectors as every search embeds them (the index's lower encoder, e5's ``query:`` prompt)."""
        import numpy as np

        if self.url:
            return np.asarray(post(self.url, "/embed", {"input": list(queries), "kind": "query", "normalize": True},
                                   self.api_key, self.timeout)["vectors"], np.float32)
        return self.local().encode_queries(list(queries))

    # -- writing -------------------------------------------------------------------------------------------------
    def write(self, documents: list, mode: str = "upsert") -> int:
        """Commit ``documents`` (:class:`hmde.io.documents.DocumentRecord`, or mappings of ``doc_id``, ``text``,
        ``lang`` and metadata fields) in one write; ``mode`` add (a known id refused:
        :class:`hmde.index.records.DuplicateIds`), upsert (a known id replaced) or skip (a known id passed over),
        decided under the index's writer lock. How many were written."""
        if not documents:
            return 0
        from tqdm.auto import tqdm

        with tqdm(total=len(documents), desc="hmde: documents embedded", unit="doc",
                  disable=not self.show_progress) as bar:  # the stores' show_progress (issue 95)
            if self.url:  # one request, one commit: the bar moves when the server has answered
                body = [_as_json(d) for d in documents]
                written = int(self._post(self._route("/documents"), {"documents": body, "mode": mode})["documents"])
                bar.update(len(body))
                return written
            index = self.local()  # its model calls run on the model thread; the commit in this one
            return index.write(documents, mode, batch_size=self.batch_size, progress=bar.update)

    def delete(self, ids: Sequence[str]) -> int:
        """Delete those of ``ids`` the index holds (the others are passed over); how many."""
        ids = list(ids)
        if not ids:
            return 0
        if self.url:
            return int(self._post(self._route("/documents"), {"ids": ids, "ignore_missing": True},
                                  "DELETE")["deleted"])
        return self.local().delete(ids, ignore_missing=True)

    def update_metadata(self, metadata: dict, ids=None, filter: Any = None, replace: bool = False) -> int:
        from ..index.filter_forms import to_tree
        from ..index.filters import unparse

        tree = to_tree(filter)
        if self.url:
            return int(self._post(self._route("/documents/metadata"), {
                "metadata": metadata, "ids": None if ids is None else list(ids), "replace": replace,
                "filter": None if tree is None else unparse(tree)})["updated"])
        return self.local().update_metadata(metadata, ids=ids, filter=tree, replace=replace)

    # -- reading back ----------------------------------------------------------------------------------------------
    def documents(self, ids=None, filter: Any = None, limit: int | None = None, offset: int = 0) -> list[dict]:
        from ..index.filter_forms import to_tree
        from ..index.filters import unparse

        tree = to_tree(filter)
        if self.url:
            return self._post(self._route("/documents/query"), {
                "ids": None if ids is None else list(ids), "filter": None if tree is None else unparse(tree),
                "limit": limit, "offset": offset})["documents"]
        return self.local().documents(ids, tree, limit, offset)

    def all_documents(self, ids=None, filter: Any = None) -> list[dict]:
        """Every document :meth:`documents` would give, however many: a local index's from one version, a served
        one's a page at a time."""
        from ..index.lookup import MAX_READ

        if not self.url:
            from ..index.filter_forms import to_tree

            return self.local().all_documents(ids, to_tree(filter))
        out, page = [], MAX_READ
        while True:
            got = self.documents(ids, filter, limit=page, offset=len(out))
            out += got
            if len(got) < page:
                return out

    def document_ids(self, ids=None, filter: Any = None) -> list[str]:
        """The ids of every document ``ids`` holds and ``filter`` matches (every one without either)."""
        if not self.url:
            from ..index.filter_forms import to_tree

            return self.local().document_ids(ids, to_tree(filter))
        return [d["doc_id"] for d in self.all_documents(ids, filter)]

    def count(self, filter: Any = None) -> int:
        from ..index.filter_forms import to_tree
        from ..index.filters import unparse

        tree = to_tree(filter)
        if self.url:
            return int(self._post(self._route("/documents/query"), {
                "filter": None if tree is None else unparse(tree), "count": True})["count"])
        return self.local().count(tree)

    def document_vectors(self, ids: Sequence[str]):
        """(ids found, their stored document vectors), as :meth:`hmde.Index.document_vectors`."""
        import numpy as np

        if self.url:
            answer = self._post(self._route("/documents/query"), {"ids": list(ids), "vectors": True})
            return [d["doc_id"] for d in answer["documents"]], np.asarray(
                [d["vector"] for d in answer["documents"]], np.float32).reshape(len(answer["documents"]), -1)
        return self.local().document_vectors(ids)

    def close(self) -> None:
        with self._lock:
            if self._opened is not None:
                self._opened.close()
                self._opened = None


def _as_json(document) -> dict:
    """A document as the server's write route takes it (a record's metadata keys beside its fields)."""
    from ..io.documents import DocumentRecord

    if not isinstance(document, DocumentRecord):
        return dict(document)
    clash = sorted(set(document.extra) & {"doc_id", "text", "lang"})
    if clash:
        raise HmdeError(f"document {document.doc_id!r}: a served index keeps no metadata key named {clash[0]!r} "
                        "(the write route reads doc_id, text and lang as the document's own): rename it")
    return {"doc_id": document.doc_id, "text": document.text, **({"lang": document.lang} if document.lang else {}),
            **document.extra}


def _recorded(opened) -> str:
    from ..encoders.registry import recorded_model

    return recorded_model(opened.meta.model)


class Embedder:
    """Unit vectors of documents (the model's document path, as ``/v1/embeddings``) or of queries (the query path,
    e5's ``query:`` prompt, as every search embeds them), from a model loaded here or a server (``url``)."""

    def __init__(self, model: str | None = None, url: str | None = None, api_key: str | None = None,
                 device: str = "auto", timeout: float = 120.0, batch_size: int = 32, threads: int | None = None,
                 show_progress: bool = False):
        check_options(threads, batch_size, device)
        self.model, self.url, self.api_key, self.device, self.timeout = \
            model, server_url(url), api_key, device, timeout
        self.batch_size, self.show_progress = batch_size, show_progress
        self._served = None

    def _model(self):
        from ..serve.served import ServedModel

        if self._served is None:
            name, kind, loaded, device = shared_model(self.model, self.device)
            self._served = ServedModel(name, kind, loaded, device)
        return self._served

    def embed(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        """``kind``: "document" or "query"; ``batch_size`` texts at a time (a progress bar with ``show_progress``)."""
        texts = list(texts)
        if not texts:
            return []
        from tqdm.auto import tqdm

        out: list[list[float]] = []
        with tqdm(total=len(texts), desc=f"hmde: {kind}s", unit=kind, disable=not self.show_progress) as bar:
            for start in range(0, len(texts), self.batch_size):
                part = texts[start:start + self.batch_size]
                out += self._embed(part, kind)
                bar.update(len(part))
        return out

    def _embed(self, texts: list[str], kind: str) -> list[list[float]]:
        import numpy as np

        if self.url:
            return post(self.url, "/embed", {"input": texts, "kind": kind, "normalize": True}, self.api_key,
                        self.timeout)["vectors"]
        from ..serve.served import QUERY

        served = self._model()
        vectors = np.asarray(run_on_model_thread(served.encode, QUERY if kind == "query" else served.document_method,
                                                 texts, [None] * len(texts)), np.float32)
        return normalize(vectors).tolist()


def hit_metadata(hit: dict) -> dict:
    """What a retriever's document carries besides its text: the document's own metadata, then hmde's fields
    (``doc_id``, ``lang``, ``score``, ``rank``, ``sentences``: the evidence, best first), which win on a clash."""
    return {**(hit.get("metadata") or {}), "doc_id": hit["doc_id"], "lang": hit["lang"], "score": hit["score"],
            "rank": hit["rank"], "sentences": hit["sentences"]}
