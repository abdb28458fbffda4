"""One search of an index folder from the command line (`hmde search`, `hmde demo`): every check that needs no model
first, then the index opened with its model (:class:`hmde.index.search.Index`), searched and closed."""

from __future__ import annotations

from .multivector import DEFAULT_DOC_WEIGHT, DEFAULT_TOP_SENTENCES
from .search import Index
from .search_checks import check_filter, check_index_request, check_request


def search_index(index_dir: str, queries: list[str], top_k: int, lang: str | None, model_name: str | None,
                 device: str = "auto", ef_search: int | None = None, nprobe: int | None = None,
                 hybrid: bool = False, hybrid_weights: tuple[float, float] = (1.0, 1.0), rrf_k: int = 60,
                 backend: str | None = None, multi_vector: bool | None = None,
                 top_sentences: int = DEFAULT_TOP_SENTENCES, doc_weight: float = DEFAULT_DOC_WEIGHT,
                 candidates: int | None = None, query_lang: str | None = None, filter: str | None = None,
                 group_by: str | None = None):
    """Open ``index_dir``, search it with ``queries`` and close it (:class:`Index` keeps it open); every
    check that needs no model comes before the model loads."""
    from .store import DocumentIndex

    check_request(queries, top_k, top_sentences, doc_weight, query_lang)
    index = DocumentIndex.open(index_dir)
    try:
        check_index_request(index, hybrid, multi_vector, ef_search, nprobe)
        check_filter(index, filter)
    except BaseException:
        index.close()
        raise
    with Index.attach(index, model_name, device, backend) as opened:
        return opened.search(queries, top_k, lang, ef_search, nprobe, hybrid, hybrid_weights, rrf_k, multi_vector,
                             top_sentences, doc_weight, candidates=candidates, query_lang=query_lang, filter=filter,
                             group_by=group_by)
