"""Searching an index with queries: each query through the index's lower encoder (the CLIR
protocol), then :meth:`DocumentIndex.search` (dense, hybrid with BM25, or multi-vector)."""

from __future__ import annotations

import argparse

from ..coverage import languages_of, warn_uncovered
from ..errors import HmdeError
from ..model_loading import load_model
from ..multivector import DEFAULT_DOC_WEIGHT, DEFAULT_TOP_SENTENCES


def search_index(index_dir: str, queries: list[str], top_k: int, lang: str | None, model_name: str | None,
                 device: str = "auto", ef_search: int | None = None, nprobe: int | None = None,
                 hybrid: bool = False, hybrid_weights: tuple[float, float] = (1.0, 1.0), rrf_k: int = 60,
                 backend: str | None = None, multi_vector: bool | None = None,
                 top_sentences: int = DEFAULT_TOP_SENTENCES, doc_weight: float = DEFAULT_DOC_WEIGHT):
    from ..devices import pick_device
    from ..evaluation.provenance import model_hash
    from ..index.store import DocumentIndex, check_compatible
    from ..methods import DocumentVectorizer
    from ..multivector import check_scoring
    from ..registry import recorded_model, resolve_model_path

    if not queries or any(not q.strip() for q in queries):
        raise HmdeError("the query is empty")
    if top_k < 1:
        raise HmdeError("--top-k must be >= 1")
    check_scoring(top_sentences, doc_weight)
    index = DocumentIndex.open(index_dir)
    if hybrid:
        index.require_bm25()  # before the model loads
        multi_vector = False if multi_vector is None else multi_vector
    if multi_vector and not index.meta.multi_vector:
        raise HmdeError(f"index {index_dir} stores one vector per document: build it with --multi-vector")
    from ..registry import recorded_model_available
    from ..routing import AUTO

    if model_name == AUTO:
        raise HmdeError(f"an index is searched with the model it was built with ({index.meta.model}): leave --model "
                        f"out ({AUTO} picks a model for a new job, never for an index)")
    name = model_name or recorded_model(index.meta.model)
    if model_name is None and not recorded_model_available(name):
        raise HmdeError(f"index {index_dir} was built with {index.meta.model}, which is neither a folder here, nor "
                        "a model bundled with hmde, nor in the local Hugging Face cache: pass --model with that "
                        "model's folder")
    kind, model = load_model(name, pick_device(device), args=argparse.Namespace(backend=backend or index.meta.backend))
    lower = model.lower if kind == "hmde" else model
    check_compatible(index.meta, model_hash(resolve_model_path(name)), lower.dim, index.path)
    warn_uncovered(name, model, languages_of([None] * len(queries), queries), "queries")  # --lang filters hits
    vectors = lower.encode(queries, prompt_name="query")

    def sentences_of(texts, langs):  # hits whose sentences were not stored (built with --engine ray) only
        return DocumentVectorizer(model, "mean").sentences(texts, langs)

    return index.search(vectors, top_k, lang, sentences_of=sentences_of, ef_search=ef_search, nprobe=nprobe,
                        hybrid_texts=list(queries) if hybrid else None, hybrid_weights=hybrid_weights, rrf_k=rrf_k,
                        multi_vector=multi_vector, top_sentences=top_sentences, doc_weight=doc_weight)
