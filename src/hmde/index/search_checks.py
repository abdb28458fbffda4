"""What a search or a write of an :class:`hmde.Index` asks, checked before any model or query work, each in one line
naming what is wrong as the caller names it (Python's parameters and the command line's flags): the queries and the
count of hits, a query language, a filter (in any form :func:`hmde.index.filter_forms.to_tree` takes) against the
index's documents, what the index can do (BM25, stored sentences, its FAISS index's tuning), a write's batch size, a new
index's documents and folder."""

from __future__ import annotations

from ..errors import HmdeError


def check_request(queries: list[str], top_k: int, top_sentences: int, doc_weight: float,
                  query_lang: str | None = None) -> None:
    """What a search asks, checked before the model loads (and again for every :meth:`Index.search`)."""
    from .multivector import check_scoring

    if not queries or any(not isinstance(q, str) or not q.strip() for q in queries):
        raise HmdeError("the query is empty" if all(isinstance(q, str) for q in queries) else
                        f"queries must be strings, got {next(type(q).__name__ for q in queries if not isinstance(q, str))}")
    check_top_k(top_k)
    for name, value in (("top_sentences", top_sentences), ("doc_weight", doc_weight)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                (name == "top_sentences" and not isinstance(value, int)):
            raise HmdeError(f"{name} must be a {'whole number' if name == 'top_sentences' else 'number'}, got "
                            f"{value!r}")
    check_scoring(top_sentences, doc_weight)
    problem = query_lang_problem(query_lang)
    if problem:
        raise HmdeError(f"query_lang (--query-lang) {problem}")


def check_top_k(top_k, name: str = "top_k (--top-k)") -> None:
    """How many hits a search returns: a whole number >= 1 (Python's 2.5 and "5" failed inside hmde; a framework's
    top_k=0 returned ten hits), named as the caller names it (``name``: Python's and the command line's by
    default; a framework's own)."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise HmdeError(f"{name} must be a whole number >= 1, got {top_k!r}")


def query_lang_problem(query_lang) -> str | None:
    """What is wrong with the queries' language a search is given (None: nothing; "none" turns the calibration
    off); the command line and the server say it each in its own way."""
    from ..io.documents import is_language_tag

    if query_lang is None or query_lang == "none" or (isinstance(query_lang, str) and is_language_tag(query_lang)):
        return None
    return f"must be a language code (en, deu, zh-Hant...) or none, got {query_lang!r}"


def check_index_request(index, hybrid: bool, multi_vector: bool | None, ef_search: int | None = None,
                        nprobe: int | None = None) -> bool | None:
    """What a search asks of this index (BM25 for ``hybrid``, stored sentences for ``multi_vector``, an index that
    ``ef_search`` or ``nprobe`` tunes), checked before the model loads; returns the ranking to use (hybrid ranks the
    document vectors)."""
    from .ranking import check_tuning

    check_tuning(index, ef_search, nprobe)
    if hybrid:
        index.require_bm25()
        if hybrid == "rrf":  # reciprocal rank fusion ranks the document vectors
            multi_vector = False if multi_vector is None else multi_vector
    if multi_vector and not index.meta.multi_vector:
        raise HmdeError(f"index {index.path} stores one vector per document: build it with --multi-vector")
    return multi_vector


def check_filter(index, expression):
    """A search's ``filter`` (hmde's expression, a LangChain or Haystack filter dict, LlamaIndex's
    ``MetadataFilters``: :func:`hmde.index.filter_forms.to_tree`) as a tree, its fields checked against the index's
    documents (one line, before any model or query work); None without one."""
    from .filter_forms import to_tree
    from .filter_checks import check_fields, metadata_fields

    tree = to_tree(expression)
    if tree is not None:
        check_fields(tree, metadata_fields(index))
    return tree


def check_batch_size(batch_size) -> None:
    """Python's ``batch_size`` of a write: a positive integer (0 ended in a traceback deep in the write)."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise HmdeError(f"batch_size must be a positive integer, got {batch_size!r}")


def _checked_records(path: str, documents, chosen, overwrite: bool, files=()) -> list:
    """A new index's documents (and those of ``files``: folders and files, :mod:`hmde.files.inputs`) and its folder
    checked before any model or embedding work."""
    from ..ground.output_dirs import check_replaceable, check_writable_parent, is_hmde_index
    from ..io.documents import ALL_FIELDS, records_from
    from .store import PQ_BITS

    if files:
        from ..files.inputs import ReadOptions, read_inputs

        documents = [*documents, *read_inputs(files, ReadOptions(keep_fields=ALL_FIELDS))]
    records = records_from(documents)
    if chosen.store:
        from .milvus_client import check_records_fit

        check_records_fit(records, "documents")
    check_writable_parent(path)
    check_replaceable(path, "hmde index", is_hmde_index, overwrite)
    if chosen.index_type in ("ivf", "ivfpq"):
        need = max(chosen.ivf_lists, 2**PQ_BITS if chosen.index_type == "ivfpq" else 0)
        if len(records) < need:
            raise HmdeError(f"an {chosen.index_type.upper()} index with {chosen.ivf_lists} lists needs at least "
                            f"{need} documents to train on, got {len(records)}: lower ivf_lists or use flat")
    return records


def _ids(ids) -> list[str] | None:
    if ids is None:
        return None
    ids = [ids] if isinstance(ids, str) else list(ids)
    bad = next((x for x in ids if not isinstance(x, str)), None)
    if bad is not None:
        raise HmdeError(f"ids must be strings (document ids), got {bad!r}")
    from ..io.documents import surrogate_at

    for i, x in enumerate(ids):  # no document's id holds one (ids are checked as written): a 500 on the server
        at = surrogate_at(x)
        if at is not None:
            raise HmdeError(f"ids[{i}] holds a lone surrogate (U+{ord(x[at]):04X}), which is not text")
    return ids


