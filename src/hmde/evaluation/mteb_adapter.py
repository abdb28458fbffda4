"""Run an hmde model under MTEB through its encoder protocol, without importing MTEB.

MTEB calls ``encode`` with a ``prompt_type`` of ``query`` or ``document``/``passage`` for
retrieval tasks and none for the rest. Following the paper's CLIR protocol, queries go
through the lower (sentence) encoder alone and everything else through the document
method (the hierarchical model by default). Older MTEB versions call
``encode_queries``/``encode_corpus`` (corpus items are dicts with ``title`` and ``text``);
MTEB 2 passes batches (dicts with a ``text`` list) instead of strings: all are accepted.

    >>> import mteb  # doctest: +SKIP
    >>> model = MtebEncoder(HierarchicalEncoder.from_pretrained("hmde-mini"))  # doctest: +SKIP
    >>> mteb.evaluate(model, mteb.get_tasks(tasks=["XPQARetrieval"]))  # doctest: +SKIP

The model may also be hmde's ``SentenceTransformer`` form (:mod:`hmde.st_router`): queries then
take its ``query`` route (``encode_query``) and everything else its ``document`` route.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from ..methods.vectorizer import DocumentVectorizer, MethodOptions
from ..align.similarity import normalize


def _texts(inputs: Any) -> list[str]:
    if isinstance(inputs, str):
        return [inputs]
    out: list[str] = []
    for item in inputs:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict) and isinstance(item.get("text"), list):  # an MTEB 2 batch
            titles = item.get("title") or [""] * len(item["text"])
            out.extend(f"{t} {x}".strip() for t, x in zip(titles, item["text"]))
        elif isinstance(item, dict):
            out.append(f"{item.get('title', '')} {item.get('text', '')}".strip())
        else:
            raise TypeError(f"cannot encode an input of type {type(item).__name__}")
    return out


def _is_query(prompt_type: Any) -> bool:
    value = getattr(prompt_type, "value", prompt_type)
    return str(value).lower() == "query"


def _is_sentence_transformer(model) -> bool:
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:  # pragma: no cover - a dependency of hmde
        return False
    return isinstance(model, SentenceTransformer)


class MtebEncoder:
    def __init__(self, model, method: str = "hmde", batch_size: int = 32, normalize: bool = True,
                 options: MethodOptions | None = None):
        self.st_model = model if _is_sentence_transformer(model) else None
        self.vectorizer = None if self.st_model is not None else \
            DocumentVectorizer(model, method, options or MethodOptions(batch_size=batch_size))
        self.normalize = normalize
        self.batch_size = batch_size

    def _norm(self, v: np.ndarray) -> np.ndarray:
        return normalize(v) if self.normalize else v

    def encode_queries(self, queries: Iterable, **kwargs) -> np.ndarray:
        if self.st_model is not None:
            return self._norm(self.st_model.encode_query(_texts(queries), batch_size=self.batch_size))
        return self._norm(self.vectorizer.model.encode_queries(_texts(queries), batch_size=self.batch_size))

    def encode_corpus(self, corpus: Iterable, **kwargs) -> np.ndarray:
        if self.st_model is not None:
            return self._norm(self.st_model.encode_document(_texts(corpus), batch_size=self.batch_size))
        return self._norm(self.vectorizer.encode(_texts(corpus)))

    def encode(self, inputs: Iterable, *, prompt_type: Any = None, **kwargs) -> np.ndarray:
        return self.encode_queries(inputs) if _is_query(prompt_type) else self.encode_corpus(inputs)
