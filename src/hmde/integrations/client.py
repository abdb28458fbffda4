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


class Searcher:
    """A local index (``index``: its folder) or a served one (``url``, and ``index``: its name, optional when the
    server serves one); opened on first use."""

    def __init__(self, index: str | None = None, url: str | None = None, api_key: str | None = None,
                 model: str | None = None, device: str = "auto", timeout: float = 120.0):
        if not index and not url:
            raise HmdeError("name a local index (index=PATH) or a server (url=SERVER_URL, index=NAME)")
        self.index, self.url, self.api_key, self.model, self.device, self.timeout = \
            index, url.rstrip("/") if url else None, api_key, model, device, timeout
        self._opened = None
        self._lock = threading.Lock()

    def _local(self):
        from ..index.search import Index

        with self._lock:
            if self._opened is None:
                self._opened = Index.open(str(self.index), self.model, self.device)
            return self._opened

    def _post(self, route: str, body: dict) -> dict:
        import httpx

        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        answer = httpx.post(self.url + route, json=body, headers=headers, timeout=self.timeout)
        if answer.status_code != 200:
            try:
                message = answer.json()["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = answer.text[:200]
            raise HmdeError(f"{self.url}{route} answered {answer.status_code}: {message}")
        return answer.json()

    def search(self, queries: Sequence[str], k: int = 10, filter: str | None = None, **options) -> list[list[dict]]:
        """Each query's hits, best first, as ``/search`` answers them (``options``: ``lang``, ``query_lang``,
        ``hybrid``; a local index also ``top_sentences``, ``doc_weight``, ``candidates``)."""
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
            model, url.rstrip("/") if url else None, api_key, device, timeout
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
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            import httpx

            answer = httpx.post(self.url + "/embed", json={"input": texts, "kind": kind, "normalize": True},
                                headers=headers, timeout=self.timeout)
            if answer.status_code != 200:
                raise HmdeError(f"{self.url}/embed answered {answer.status_code}: {answer.text[:200]}")
            return answer.json()["vectors"]
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
