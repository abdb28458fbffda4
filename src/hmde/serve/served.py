"""What a server holds: one model, the indexes built with it (each addressed by its folder's name),
and the way every text reaches the model (:meth:`ServedModel.encode`, called by the batcher's
worker thread, the only thread that runs the model or searches an index)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..index.snapshots import version_of
from ..methods import default_method, method_class
from ..errors import HmdeError, InputError

QUERY = "query"  # the key of the query path: the lower encoder alone, as every search embeds queries
INDEX_WRITE = "index"  # keys (INDEX_WRITE, method, contextual): documents for an index, with their sentences


class RequestError(HmdeError):
    """A request the server refuses: the HTTP status and the request field it names."""

    def __init__(self, message: str, field: str | None = None, status: int = 400):
        super().__init__(message)
        self.field, self.status = field, status


class ServedModel:
    """A loaded model and its document vectorizers, one per method, made on first use."""

    def __init__(self, name: str, kind: str, model, device: str, document_method: str | None = None,
                 preset: str | None = None):
        self.name, self.kind, self.model, self.device = name, kind, model, device
        self.document_method = document_method or default_method(kind == "hmde", name, preset)
        self.check_method(self.document_method, "method")
        self._vectorizers: dict = {}

    @property
    def lower(self):
        return self.model.lower if self.kind == "hmde" else self.model

    @property
    def dim(self) -> int:
        return int(self.lower.dim)

    def check_method(self, method: str, field: str) -> str:
        """A document method this server can run per request (LAWDR needs statistics fitted on a
        collection: `hmde encode` fits them)."""
        try:
            cls = method_class(method)
        except HmdeError as exc:
            raise RequestError(str(exc), field) from None
        if cls.fitted:
            raise RequestError(f"method {method} needs statistics fitted on a whole collection; use `hmde encode "
                               f"--method {method}` (the server runs hmde, mean, first and seg)", field)
        if cls.needs_hmde_model and self.kind != "hmde":
            raise RequestError(f"method {method} needs an hmde model; {self.name} is a sentence encoder", field)
        return method

    def encode(self, key: str, texts: list, langs: list) -> np.ndarray:
        """Raw vectors (not normalised) of ``texts`` through ``key``: :data:`QUERY` or a document method."""
        from ..methods.vectorizer import DocumentVectorizer, MethodOptions, encode_query_texts

        if key == QUERY:
            return encode_query_texts(self.model, texts)
        if isinstance(key, tuple) and key[0] == INDEX_WRITE:  # documents for an index: vectors, sentences too
            _, method, contextual = key
            if key not in self._vectorizers:
                self._vectorizers[key] = DocumentVectorizer(self.model, self.check_method(method, "documents"),
                                                            MethodOptions())
            vectors, units, sentences = self._vectorizers[key].encode_with_sentences(texts, langs, contextual)
            return list(zip(vectors, units, sentences))
        if key not in self._vectorizers:
            self._vectorizers[key] = DocumentVectorizer(self.model, key, MethodOptions())
        return self._vectorizers[key].encode(texts, langs)

    def count_tokens(self, texts: list[str]) -> int:
        """Tokens of the texts as the lower encoder's tokenizer counts them (the OpenAI API's usage)."""
        try:
            tokenizer = self.lower.tokenizer
            return sum(len(ids) for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"])
        except Exception:  # an encoder without a Hugging Face tokenizer (USE-m): words instead
            return sum(len(t.split()) for t in texts)


class ServedIndex:
    """An index opened with the served model, reopened when a writer (``hmde index build --add``) has
    swapped in a new version: the next search sees it, a search in progress keeps its snapshot."""

    def __init__(self, name: str, path: Path, served: ServedModel):
        self.name, self.path, self.served = name, path, served
        self._lock = threading.Lock()
        self.version = version_of(path)
        self.opened = self._open()

    def _open(self):
        """The folder's current version, under its read lock, checked against the served model."""
        from ..index.search import Index
        from ..index.store import DocumentIndex

        served = self.served
        return Index.with_model(DocumentIndex.open(self.path), served.name, served.kind, served.model, served.device)

    @property
    def meta(self):
        return self.opened.index.meta

    def current(self):
        """The open :class:`~hmde.index.search.Index`, reopened first if the folder holds a newer version."""
        with self._lock:
            try:
                version = version_of(self.path)
            except FileNotFoundError:  # between a writer's renames: keep the snapshot we have
                return self.opened
            if version != self.version:
                old, self.opened, self.version = self.opened, self._open(), version
                old.close()
            return self.opened

    def describe(self) -> dict:
        """What ``/indexes`` lists of this index (call in the model thread: it reads the open snapshot)."""
        from ..index.builder import describe

        info = describe(self.current().index)
        return {"name": self.name, "documents": info["documents"], "model": info["model"], "method": info["method"],
                "multi_vector": info["multi_vector"], "bm25": info["bm25"], "index_type": info["index_type"],
                "languages": info["languages"]}

    def info(self) -> dict:
        """``GET /indexes/{name}``: :func:`hmde.index.builder.describe`, without the server's paths."""
        from ..index.builder import describe

        info = describe(self.current().index)
        info.pop("path", None)
        return {"name": self.name, **info}

    def close(self) -> None:
        self.opened.close()


def served_indexes(paths: list[str], served: ServedModel) -> dict[str, ServedIndex]:
    """Each index under its folder's name; two folders of one name are refused (a request names one)."""
    indexes: dict[str, ServedIndex] = {}
    try:
        for raw in paths:
            path = Path(raw)
            name = path.resolve().name
            if name in indexes:
                raise InputError(f"two served indexes are named {name!r} ({indexes[name].path} and {path}): a request "
                                 "addresses an index by its folder's name; rename one", str(path))
            indexes[name] = ServedIndex(name, path, served)
    except BaseException:
        for index in indexes.values():
            index.close()
        raise
    return indexes


@dataclass
class Served:
    """The model and the indexes of one server."""

    model: ServedModel
    indexes: dict[str, ServedIndex]

    def index(self, name: str | None) -> ServedIndex:
        if name is None:
            if len(self.indexes) == 1:
                return next(iter(self.indexes.values()))
            raise RequestError("name the index to search (served: " + (", ".join(self.indexes) or "none") + ")",
                               "index")
        if name not in self.indexes:
            raise RequestError(f"no served index is named {name!r} (served: {', '.join(self.indexes) or 'none'})",
                               "index", 404)
        return self.indexes[name]

    def close(self) -> None:
        for index in self.indexes.values():
            index.close()


def load_served(model: str | None, index_paths: list[str], device: str = "auto", backend: str | None = None,
                document_method: str | None = None, preset: str | None = None) -> Served:
    """The model (``model``, else the one the first index was built with) and every index, each checked
    to have been built with that model."""
    from ..encoders.devices import pick_device
    from ..index.store import read_index_meta
    from ..encoders.model_loading import load_model
    from ..encoders.registry import DEFAULT_MODEL, recorded_model
    from ..encoders.routing import refuse_for_one_space

    for raw in index_paths:
        if not (Path(raw) / "index.json").is_file():
            raise InputError("not an hmde index (no index.json); build one with `hmde index build`", raw)
    if model is None and index_paths:
        model = recorded_model(read_index_meta(Path(index_paths[0]) / "index.json").model)
    model = model or DEFAULT_MODEL
    refuse_for_one_space(model, "a server", "name one model (hmde-e5 covers about 100 languages)")
    device = pick_device(device)
    if backend is None:  # the indexes' own (int8 for int8 indexes), else the fast default
        from ..encoders.backends import DEFAULT, for_index

        backend = for_index(read_index_meta(Path(index_paths[0]) / "index.json")) if index_paths else DEFAULT
    kind, loaded = load_model(model, device, backend=backend)
    served = ServedModel(model, kind, loaded, device, document_method, preset)
    return Served(served, served_indexes(index_paths, served))
