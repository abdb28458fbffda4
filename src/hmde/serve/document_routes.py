"""The routes that read an index's documents back and change their metadata, for the framework stores that keep
their documents in a served index (:mod:`hmde.integrations`): ``POST /indexes/{name}/documents/query`` (by ids
and/or a filter, in the order written; or their count; or their stored vectors) and ``POST
/indexes/{name}/documents/metadata`` (a metadata update, with ``--writable``). The library functions are
:mod:`hmde.index.lookup` and :mod:`hmde.index.metadata_update`, as for a local index."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel, ConfigDict

from ..errors import HmdeError
from .served import RequestError

QUERY_ROUTE, METADATA_ROUTE = "/indexes/{name}/documents/query", "/indexes/{name}/documents/metadata"


class DocumentQueryRequest(BaseModel):
    """The documents ``ids`` holds and ``filter`` matches (every one without either), a page of them."""

    model_config = ConfigDict(extra="forbid")
    ids: list[str] | None = None
    filter: str | None = None
    limit: int | None = None
    offset: int = 0
    count: bool = False  # only how many match
    vectors: bool = False  # each document's stored vector too (ids only)


class MetadataRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    metadata: dict[str, Any]
    ids: list[str] | None = None
    filter: str | None = None
    replace: bool = False


def add_document_routes(app, served, options, executor, writer, embed_and_commit, check_writable) -> None:
    """The routes on ``app``; ``executor`` is the model thread (it owns the open snapshots), ``writer`` the writer
    thread, ``embed_and_commit(target, records, mode)`` the upsert route's embedding and commit."""

    def filtered(index, body):
        from ..index.search import check_filter

        try:
            return check_filter(index, body.filter)
        except HmdeError as exc:
            raise RequestError(str(exc), "filter") from None

    @app.post(QUERY_ROUTE)
    async def query_documents(name: str, body: DocumentQueryRequest):
        from ..index.lookup import count, document_vectors, documents

        target = served.index(name)
        if body.ids is not None and len(body.ids) > options.max_inputs:
            raise RequestError(f"ids holds {len(body.ids)} ids; this server takes at most {options.max_inputs} per "
                               "request", "ids", 413)
        if body.vectors and (body.ids is None or body.filter is not None or body.count):
            raise RequestError("vectors are read by ids alone", "vectors")

        def read():
            from ..index.search import _ids

            try:
                _ids(body.ids)  # strings of valid Unicode (a lone surrogate was a 500)
            except HmdeError as exc:
                raise RequestError(str(exc), "ids") from None
            index = target.current().index
            tree = filtered(index, body)
            if body.count:
                return {"index": name, "count": count(index, tree, body.ids)}  # among the ids, where given
            if body.vectors:
                found, vectors = document_vectors(index, body.ids)
                return {"index": name, "documents": [{"doc_id": x, "vector": v.tolist()} for x, v in
                                                     zip(found, vectors)]}
            try:
                return {"index": name, "documents": documents(index, body.ids, tree, body.limit, body.offset)}
            except HmdeError as exc:
                raise RequestError(str(exc), "limit") from None

        return await asyncio.get_running_loop().run_in_executor(executor, read)

    @app.post(METADATA_ROUTE)
    async def update_metadata(name: str, body: MetadataRequest):
        from ..index.metadata_update import check_metadata_change, update_metadata as update

        target = check_writable(name)
        try:
            check_metadata_change(body.metadata)
        except HmdeError as exc:
            raise RequestError(str(exc), "metadata") from None
        tree = await asyncio.get_running_loop().run_in_executor(executor, lambda: filtered(target.current().index,
                                                                                           body))
        updated, to_embed = await asyncio.get_running_loop().run_in_executor(
            writer, lambda: update(target.path, body.metadata, body.ids, tree, body.replace))
        if to_embed is not None:  # an IVF-PQ index's codes: the documents are embedded again
            from ..io.documents import records_from

            await embed_and_commit(target, records_from(to_embed), "upsert")
            updated = len(to_embed)
        return {"index": name, "updated": updated}
