"""Searching an index with queries: each query through the index's lower encoder (the CLIR
protocol), then :meth:`DocumentIndex.search` (dense, hybrid with BM25, or multi-vector)."""

from __future__ import annotations


from ..coverage import languages_of, warn_uncovered
from ..errors import HmdeError
from ..model_loading import load_model
from ..multivector import DEFAULT_DOC_WEIGHT, DEFAULT_TOP_SENTENCES


class Index:
    """An index opened once with the model it was built with, searched any number of times: what
    `hmde search` does, from Python (and the server), without loading the model per call.

    ``Index.open("my-index").search(["wer hat das Finale gewonnen?"])`` -> one list of
    :class:`~hmde.index.store.SearchHit` per query, best first, as `hmde search` ranks them.
    """

    def __init__(self, index, name: str, kind: str, model, device: str):
        self.index, self.model_name, self.kind, self.model, self.device = index, name, kind, model, device

    @classmethod
    def open(cls, path: str, model: str | None = None, device: str = "auto", backend: str | None = None) -> "Index":
        from ..devices import pick_device
        from ..evaluation.provenance import model_hash
        from ..index.store import DocumentIndex, check_compatible
        from ..registry import recorded_model, recorded_model_available, resolve_model_path
        from ..routing import AUTO

        index = DocumentIndex.open(path)
        try:
            if model == AUTO:
                raise HmdeError(f"an index is searched with the model it was built with ({index.meta.model}): leave "
                                f"--model out ({AUTO} picks a model for a new job, never for an index)")
            name = model or recorded_model(index.meta.model)
            if model is None and not recorded_model_available(name):
                raise HmdeError(f"index {path} was built with {index.meta.model}, which is neither a folder here, "
                                "nor a model bundled with hmde, nor in the local Hugging Face cache: pass --model with "
                                "that model's folder")
            device = pick_device(device)
            kind, loaded = load_model(name, device, backend=backend or index.meta.backend)
            lower = loaded.lower if kind == "hmde" else loaded
            check_compatible(index.meta, model_hash(resolve_model_path(name)), lower.dim, index.path)
        except BaseException:
            index.close()
            raise
        return cls(index, name, kind, loaded, device)

    @property
    def lower(self):
        return self.model.lower if self.kind == "hmde" else self.model

    def encode_queries(self, queries: list[str]):
        """Queries through the index's sentence encoder (the CLIR protocol), as every search embeds them."""
        return self.lower.encode(list(queries), prompt_name="query")

    def search(self, queries: list[str] | str, top_k: int = 10, lang: str | None = None,
               ef_search: int | None = None, nprobe: int | None = None, hybrid: bool = False,
               hybrid_weights: tuple[float, float] = (1.0, 1.0), rrf_k: int = 60, multi_vector: bool | None = None,
               top_sentences: int = DEFAULT_TOP_SENTENCES, doc_weight: float = DEFAULT_DOC_WEIGHT,
               query_vectors=None, warn: bool = True):
        from ..methods import DocumentVectorizer
        from ..multivector import check_scoring

        queries = [queries] if isinstance(queries, str) else list(queries)
        if not queries or any(not q.strip() for q in queries):
            raise HmdeError("the query is empty")
        if top_k < 1:
            raise HmdeError("--top-k must be >= 1")
        check_scoring(top_sentences, doc_weight)
        if hybrid:
            self.index.require_bm25()
            multi_vector = False if multi_vector is None else multi_vector
        if multi_vector and not self.index.meta.multi_vector:
            raise HmdeError(f"index {self.index.path} stores one vector per document: build it with --multi-vector")
        if warn:
            warn_uncovered(self.model_name, self.model, languages_of([None] * len(queries), queries), "queries")
        vectors = self.encode_queries(queries) if query_vectors is None else query_vectors

        def sentences_of(texts, langs):  # hits whose sentences were not stored (built with --engine ray) only
            return DocumentVectorizer(self.model, "mean").sentences(texts, langs)

        return self.index.search(vectors, top_k, lang, sentences_of=sentences_of, ef_search=ef_search, nprobe=nprobe,
                                 hybrid_texts=list(queries) if hybrid else None, hybrid_weights=hybrid_weights,
                                 rrf_k=rrf_k, multi_vector=multi_vector, top_sentences=top_sentences,
                                 doc_weight=doc_weight)

    def close(self) -> None:
        self.index.close()

    def __enter__(self) -> "Index":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def search_index(index_dir: str, queries: list[str], top_k: int, lang: str | None, model_name: str | None,
                 device: str = "auto", ef_search: int | None = None, nprobe: int | None = None,
                 hybrid: bool = False, hybrid_weights: tuple[float, float] = (1.0, 1.0), rrf_k: int = 60,
                 backend: str | None = None, multi_vector: bool | None = None,
                 top_sentences: int = DEFAULT_TOP_SENTENCES, doc_weight: float = DEFAULT_DOC_WEIGHT):
    """Open ``index_dir``, search it with ``queries`` and close it (:class:`Index` keeps it open)."""
    from ..multivector import check_scoring

    if not queries or any(not q.strip() for q in queries):
        raise HmdeError("the query is empty")
    if top_k < 1:
        raise HmdeError("--top-k must be >= 1")
    check_scoring(top_sentences, doc_weight)
    from ..index.store import DocumentIndex

    if hybrid:  # before the model loads
        with DocumentIndex.open(index_dir) as probe:
            probe.require_bm25()
    with Index.open(index_dir, model_name, device, backend) as index:
        return index.search(queries, top_k, lang, ef_search, nprobe, hybrid, hybrid_weights, rrf_k, multi_vector,
                            top_sentences, doc_weight)
