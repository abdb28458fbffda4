"""What every framework integration calls: a search and an embedding, of a local index or model
(:class:`hmde.Index`, :class:`hmde.serve.served.ServedModel`: the code the server runs) or of a server
(``POST /search``, ``POST /embed``), with one answer shape (:meth:`hmde.index.records.SearchHit.as_dict`)."""

from __future__ import annotations

import threading
from typing import Sequence

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


def post(url: str, route: str, body: dict, api_key: str | None, timeout: float) -> dict:
    """``POST url + route`` with JSON; the server's refusal, a connection that fails and an answer that is no JSON
    each one line naming the address (they were httpx tracebacks)."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        answer = httpx.post(url + route, json=body, headers=headers, timeout=timeout)
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
        raise HmdeError(f"{url}{route} answered {answer.status_code}: {message}")
    if not isinstance(answered, dict):
        raise HmdeError(f"{url}{route} answered something other than hmde's JSON ({answer.text[:80]!r}): is that an "
                        "hmde server?")
    return answered


class Searcher:
    """A local index (``index``: its folder) or a served one (``url``, and ``index``: its name, optional when the
    server serves one); opened on first use."""

    def __init__(self, index: str | None = None, url: str | None = None, api_key: str | None = None,
                 model: str | None = None, device: str = "auto", timeout: float = 120.0):
        if not index and not url:
            raise HmdeError("name a local index (index=PATH) or a server (url=SERVER_URL, index=NAME)")
        self.index, self.url, self.api_key, self.model, self.device, self.timeout = \
            index, server_url(url), api_key, model, device, timeout
        self._opened = None
        self._lock = threading.Lock()

    def _local(self):
        from ..index.search import Index

        with self._lock:
            if self._opened is None:
                self._opened = Index.open(str(self.index), self.model, self.device)
            return self._opened

    def _post(self, route: str, body: dict) -> dict:
        return post(self.url, route, body, self.api_key, self.timeout)

    def search(self, queries: Sequence[str], k: int = 10, filter: str | None = None, k_name: str = "k",
               **options) -> list[list[dict]]:
        """Each query's hits, best first, as ``/search`` answers them (``options``: ``lang``, ``query_lang``,
        ``hybrid``; a local index also ``top_sentences``, ``doc_weight``, ``candidates``); ``k_name``: what the
        caller calls the count, for the message where it is no whole number >= 1."""
        from ..index.search import check_top_k

        check_top_k(k, k_name)
        queries = list(queries)
        if self.url:
            body = {"queries": queries, "top_k": k, "filter": filter, **options}
            if self.index:
                body["index"] = self.index
            return [result["hits"] for result in self._post("/search", body)["results"]]
        return [[h.as_dict() for h in hits] for hits in self._local().search(queries, top_k=k, filter=filter,
                                                                              **options)]

    def close(self) -> None:
        if self._opened is not None:
            self._opened.close()
            self._opened = None


_MODELS: dict = {}  # (model, device) -> ServedModel, loaded once per process
_MODELS_LOCK = threading.Lock()


class Embedder:
    """Unit vectors of documents (the model's document path, as ``/v1/embeddings``) or of queries (the query path,
    e5's ``query:`` prompt, as every search embeds them), from a model loaded here or a server (``url``)."""

    def __init__(self, model: str | None = None, url: str | None = None, api_key: str | None = None,
                 device: str = "auto", timeout: float = 120.0):
        self.model, self.url, self.api_key, self.device, self.timeout = \
            model, server_url(url), api_key, device, timeout
        self._served = None

    def _model(self):
        from ..encoders.devices import pick_device
        from ..encoders.model_loading import load_model
        from ..encoders.registry import DEFAULT_MODEL
        from ..serve.served import ServedModel

        with _MODELS_LOCK:  # one model per name and device in a process: a pipeline's embedders share it
            if self._served is None:
                name, device = self.model or DEFAULT_MODEL, pick_device(self.device)
                if (name, device) not in _MODELS:
                    kind, loaded = load_model(name, device)
                    _MODELS[(name, device)] = ServedModel(name, kind, loaded, device)
                self._served = _MODELS[(name, device)]
            return self._served

    def embed(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        """``kind``: "document" or "query"."""
        import numpy as np

        texts = list(texts)
        if not texts:
            return []
        if self.url:
            return post(self.url, "/embed", {"input": texts, "kind": kind, "normalize": True}, self.api_key,
                        self.timeout)["vectors"]
        from ..serve.served import QUERY

        served = self._model()
        vectors = np.asarray(served.encode(QUERY if kind == "query" else served.document_method, texts,
                                           [None] * len(texts)), np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return (vectors / np.where(norms > 0, norms, 1.0)).tolist()


def hit_metadata(hit: dict) -> dict:
    """What a framework's document carries besides its text: the document's own metadata, then hmde's fields
    (``doc_id``, ``lang``, ``score``, ``rank``, ``sentences``: the evidence, best first), which win on a clash."""
    return {**(hit.get("metadata") or {}), "doc_id": hit["doc_id"], "lang": hit["lang"], "score": hit["score"],
            "rank": hit["rank"], "sentences": hit["sentences"]}
