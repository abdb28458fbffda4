"""A metadata update of an index's documents (Haystack's ``update_by_filter``, ``POST
/indexes/{name}/documents/metadata``, :meth:`hmde.Index.update_metadata`): the matching documents committed again
through the one write path with their new metadata, their text, language, sentences and vectors as stored, so that
nothing is embedded again where the stored vectors are exact (every store but an IVF-PQ index's codes)."""

from __future__ import annotations

from pathlib import Path

from ..errors import HmdeError


def check_metadata_change(metadata) -> None:
    from ..io.documents import check_metadata

    if not isinstance(metadata, dict):
        raise HmdeError(f"metadata must be a dict of JSON values, got {type(metadata).__name__}")
    check_metadata(metadata, "metadata")


def update_metadata(path: str | Path, metadata: dict, ids=None, tree=None, replace: bool = False):
    """Give the documents of the index at ``path`` that ``ids`` holds and ``tree`` matches (every one without either)
    ``metadata``, merged into each one's (``replace``: instead of it). Returns ``(count, None)`` once committed, or
    ``(0, documents)`` where their stored vectors are codes: the caller embeds and upserts those documents
    (``{"doc_id", "text", "lang", ...metadata}``)."""
    from ..ground.atomic import through_links
    from ..ground.locks import exclusive_writer
    from .builder import stored_batch, write_embedded
    from .lookup import matching_rows
    from .store import DocumentIndex

    check_metadata_change(metadata)
    path = through_links(path)  # the real folder's lock, as every writer takes it
    with exclusive_writer(path):  # the rows read are the rows rewritten: no writer in between
        with DocumentIndex.open(path) as index:
            rows = matching_rows(index, ids, tree)
            if not rows:
                return 0, None
            old = index.records(rows)
            new = [dict(metadata) if replace else {**old[r][5], **metadata} for r in rows]
            batch = stored_batch(index, rows, new)
            meta = index.meta
        if batch is None:
            return 0, [{**m, "doc_id": old[r][0], "text": old[r][2], "lang": old[r][1]} for r, m in zip(rows, new)]
        write_embedded(path, meta, [batch], "upsert").close()
    return len(rows), None
