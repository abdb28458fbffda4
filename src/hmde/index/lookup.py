"""An index's documents read back without a query: by id, or every one a filter matches, in the order they were
written, each with its text, language and metadata as written; their count; their stored vectors. What a framework's
store asks besides a search (LangChain's ``get_by_ids``, Haystack's ``filter_documents`` and ``count_documents``,
LlamaIndex's ``get_nodes``, maximal marginal relevance), from any store (:mod:`hmde.index.store_protocol`), and what
``POST /indexes/{name}/documents/query`` answers.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np

from ..errors import HmdeError

MAX_READ = 100_000  # documents one read returns (a larger collection is read by pages: limit, offset)


def check_page(limit, offset) -> None:
    for name, value, low in (("limit", limit, 1), ("offset", offset, 0)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
            raise HmdeError(f"{name} must be a whole number >= {low}, got {value!r}")
    if limit is not None and limit > MAX_READ:
        raise HmdeError(f"limit is {limit:,}; one read returns at most {MAX_READ:,} documents (page with offset)")


def matching_rows(store, ids: Sequence[str] | None = None, tree=None) -> list[int]:
    """The live rows of ``ids`` (those the index holds) that ``tree`` matches, ascending; every live row where both
    are None."""
    rows = store.rows_where(tree)
    if ids is not None:
        wanted = set(store.rows_of_ids(list(ids)).values())
        rows = [r for r in rows if r in wanted]
    return rows


def documents(store, ids: Sequence[str] | None = None, tree=None, limit: int | None = None,
              offset: int = 0) -> list[dict]:
    """``{"doc_id", "text", "lang", "metadata"}`` of each matching document, in the order written."""
    check_page(limit, offset)
    rows = matching_rows(store, ids, tree)[offset:]
    if limit is None and len(rows) > MAX_READ:  # refused, never cut short (issue 94: clear() left 12 of 17)
        raise HmdeError(f"{len(rows):,} documents match; one read returns at most {MAX_READ:,} (page with limit and "
                        "offset)")
    return _read(store, rows[:limit] if limit is not None else rows)


def _read(store, rows: list[int]) -> list[dict]:
    records = store.records(rows) if rows else {}
    return [{"doc_id": records[r][0], "text": records[r][2], "lang": records[r][1], "metadata": records[r][5]}
            for r in rows]


def pages(store, ids: Sequence[str] | None = None, tree=None) -> Iterator[list[dict]]:
    """Every matching document, :data:`MAX_READ` at a time, in the order written (one snapshot: ``store``): what a
    framework's "all of them" asks (Haystack's ``filter_documents``, a delete of everything a filter matches)."""
    rows = matching_rows(store, ids, tree)
    for start in range(0, len(rows), MAX_READ):
        yield _read(store, rows[start:start + MAX_READ])


def count(store, tree=None, ids: Sequence[str] | None = None) -> int:
    """How many live documents ``tree`` matches among ``ids`` (every live one without either)."""
    if tree is None and ids is None:
        return int(store.meta.live)
    return len(matching_rows(store, ids, tree))


def document_vectors(store, ids: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The stored document vectors (unit length) of those of ``ids`` the index holds, in the order asked."""
    from ..align.similarity import normalize

    rows = store.rows_of_ids(list(ids))
    found = [x for x in ids if x in rows]
    if not found:
        return [], np.zeros((0, store.meta.dim), np.float32)
    wanted = np.asarray([rows[x] for x in found], np.int64)
    exact = store.exact_document_vectors(wanted)
    vectors = exact if exact is not None else store.document_vectors(wanted)
    return found, normalize(np.asarray(vectors, np.float32))
