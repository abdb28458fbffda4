"""The request bodies of the server's routes, checked field by field (a refusal names its field)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .served import RequestError


class EmbeddingsRequest(BaseModel):
    """``POST /v1/embeddings`` as the OpenAI API defines it, plus ``input_type`` (other servers' name for
    the query path). Fields this server does not read (``user``) are accepted and ignored."""

    model_config = ConfigDict(extra="allow")
    input: Any
    model: str
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = None
    input_type: Literal["query", "document", "passage", "search_query", "search_document"] | None = None


class EmbedRequest(BaseModel):
    """``POST /embed``: hmde's own options."""

    model_config = ConfigDict(extra="forbid")
    input: Any
    kind: Literal["document", "query"] = "document"
    method: str | None = None
    normalize: bool = False
    lang: str | None = None


class SearchRequest(BaseModel):
    """``POST /search``: one query or several, in any language."""

    model_config = ConfigDict(extra="forbid")
    index: str | None = None
    query: str | None = None
    queries: list[str] | None = None
    top_k: int = Field(10, ge=1)
    lang: str | None = None
    query_lang: str | None = None  # the queries' language, for an index that calibrates by it (default: detected)
    hybrid: bool | Literal["rrf"] = False  # true: BM25 within the query's language; "rrf": reciprocal rank fusion
    include_text: bool = True
    filter: str | None = None  # only the documents this expression matches (hmde.index.filters), as `hmde search`
    group_by: str | None = Field(None, min_length=1, max_length=200)  # one hit per value of this metadata field


class DocumentsRequest(BaseModel):
    """``POST /indexes/{name}/documents``: documents to embed and commit (``upsert``: a known id is replaced;
    ``add``: a known id is refused)."""

    model_config = ConfigDict(extra="forbid")
    documents: Any
    mode: Literal["upsert", "add", "skip"] = "upsert"  # skip: a known id passed over (under the writer's lock)


class DeleteRequest(BaseModel):
    """``DELETE /indexes/{name}/documents``: the ids to delete."""

    model_config = ConfigDict(extra="forbid")
    ids: Any
    ignore_missing: bool = False


def documents_of(request: DocumentsRequest, max_inputs: int, max_chars: int) -> list:
    """The request's documents as checked records (:func:`hmde.io.documents.records_from`), within the server's
    limits; a refusal names ``documents[i].field``."""
    from ..errors import InputError
    from ..io.documents import records_from

    if not isinstance(request.documents, list) or not request.documents:
        raise RequestError("documents must be a non-empty list of {doc_id, text, lang}", "documents")
    if len(request.documents) > max_inputs:
        raise RequestError(f"documents holds {len(request.documents)} documents; this server takes at most "
                           f"{max_inputs} per request", "documents", 413)
    try:
        records = records_from(request.documents)
    except InputError as exc:
        where = f"{exc.path}.{exc.field}" if exc.field else str(exc.path)
        raise RequestError(str(exc).split(": ", 1)[-1], where) from None
    for i, r in enumerate(records):
        size = len(r.text) if isinstance(r.text, str) else sum(len(s) for s in r.text)
        if size > max_chars:
            raise RequestError(f"documents[{i}].text is {size:,} characters long; this server takes at most "
                               f"{max_chars:,}", f"documents[{i}].text", 413)
    return records


def ids_of(request: DeleteRequest, max_inputs: int) -> list[str]:
    if not isinstance(request.ids, list) or not request.ids:
        raise RequestError("ids must be a non-empty list of document ids", "ids")
    if len(request.ids) > max_inputs:
        raise RequestError(f"ids holds {len(request.ids)} ids; this server takes at most {max_inputs} per request",
                           "ids", 413)
    out = []
    for i, x in enumerate(request.ids):
        if isinstance(x, bool) or not isinstance(x, (str, int)) or (isinstance(x, str) and not x.strip()):
            raise RequestError("an id must be a non-empty string or a whole number", f"ids[{i}]")
        out.append(str(x))
    return out


def texts_of(value: Any, field: str, max_inputs: int, max_chars: int, allow_empty: bool = False) -> list[str]:
    """A string or a list of strings, within the server's limits, each valid Unicode."""
    from ..io.documents import surrogate_at

    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise RequestError(f"{field} must be a string, a list of strings, or (/v1/embeddings) token ids", field)
    if not texts:
        raise RequestError(f"{field} is empty", field)
    if len(texts) > max_inputs:
        raise RequestError(f"{field} holds {len(texts)} texts; this server takes at most {max_inputs} per request",
                           field, 413)
    for i, text in enumerate(texts):
        where = field if isinstance(value, str) else f"{field}[{i}]"
        if len(text) > max_chars:
            raise RequestError(f"{where} is {len(text):,} characters long; this server takes at most {max_chars:,}",
                               where, 413)
        if not allow_empty and not text.strip():
            raise RequestError(f"{where} is empty", where)
        bad = surrogate_at(text)
        if bad is not None:
            raise RequestError(f"{where} holds a lone surrogate (U+{ord(text[bad]):04X}) at character {bad + 1}, which "
                               "is not text: send valid Unicode", where)
    return texts


def search_queries(request: SearchRequest, max_inputs: int, max_chars: int, max_top_k: int) -> list[str]:
    """The request's queries, checked (a refusal names ``query`` or ``queries``)."""
    if (request.query is None) == (request.queries is None):
        raise RequestError("give either query (a string) or queries (a list of strings)", "query")
    field = "query" if request.query is not None else "queries"
    if request.top_k > max_top_k:
        raise RequestError(f"top_k is {request.top_k}; this server returns at most {max_top_k} hits", "top_k")
    from ..index.search import query_lang_problem

    problem = query_lang_problem(request.query_lang)
    if problem:
        raise RequestError(problem, "query_lang")
    value = request.query if request.query is not None else request.queries
    return texts_of(value, field, max_inputs, max_chars)
