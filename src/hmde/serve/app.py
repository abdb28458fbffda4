"""The FastAPI application: routes, errors as JSON naming their field, the API key, the body limit and
the metrics. :func:`create_app` takes what :func:`hmde.serve.served.load_served` loaded."""

from __future__ import annotations

import asyncio
import base64
import hmac
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from importlib import resources

import numpy as np
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException

from ..align.similarity import normalize
from ..errors import HmdeError
from .batcher import Batcher, Overloaded
from .metrics import Metrics
from .options import ServeOptions
from .requests import (DeleteRequest, DocumentsRequest, EmbeddingsRequest, EmbedRequest, SearchRequest, documents_of,
                       ids_of, search_queries, texts_of)
from .served import INDEX_WRITE, QUERY, RequestError, Served
from .token_arrays import decode_tokens, is_token_input

log = logging.getLogger("hmde.serve")
OPEN_PATHS = ("/health", "/")  # the page's HTML holds no data; every route that answers with data asks for the key
ROUTES = ("/v1/embeddings", "/embed", "/search", "/indexes", "/health", "/metrics", "/")
WRITE_ROUTE, INFO_ROUTE = "/indexes/{name}/documents", "/indexes/{name}"  # metrics label these by template
COMPACT_ROUTE, FILES_ROUTE = "/indexes/{name}/compact", "/indexes/{name}/files"
DOCUMENT_ROUTES = ("/indexes/{name}/documents/query", "/indexes/{name}/documents/metadata")
QUERY_TYPES = ("query", "search_query")


def fault(exc: BaseException) -> JSONResponse:
    """The answer to a fault: a 500 naming its kind only (the traceback is in the server's log)."""
    return error(500, f"internal error ({type(exc).__name__}); the server's log has the details")


def error(status: int, message: str, field: str | None = None, headers: dict | None = None,
          doc_id: str | None = None) -> JSONResponse:
    """The OpenAI API's error shape, which its clients read: {"error": {"message", "type", "param", "code"}}; a
    write refused for an id the index holds names it too (``doc_id``: the framework stores' duplicate errors)."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    body = {"message": message, "type": kind, "param": field, "code": status}
    if doc_id is not None:
        body["doc_id"] = doc_id
    return JSONResponse({"error": body}, status, headers=headers)


def _field(loc) -> str:
    parts = [str(p) for p in loc if p != "body"]
    return ".".join(parts) or "body"


def _embedding(vector: np.ndarray, encoding: str):
    if encoding == "base64":
        return base64.b64encode(np.ascontiguousarray(vector, dtype="<f4").tobytes()).decode("ascii")
    return vector.astype(np.float32).tolist()


def create_app(served: Served, options: ServeOptions | None = None) -> FastAPI:
    options = options or ServeOptions()
    metrics = Metrics()
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hmde-model")
    # commits run apart from the model thread (searches go on meanwhile); the index's lock orders them
    writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hmde-writer")
    batcher = Batcher(served.model.encode, executor, options.max_batch, options.max_wait_ms, options.max_queue,
                      observe=metrics.observe_batch)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        batcher.start()
        try:
            yield
        finally:  # uvicorn has drained the requests in flight by now
            await batcher.stop()
            writer.shutdown(wait=True)
            executor.shutdown(wait=True)
            served.close()

    app = FastAPI(title="hmde", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.served, app.state.options, app.state.metrics, app.state.batcher = served, options, metrics, batcher

    @app.exception_handler(RequestError)
    async def _refused(request: Request, exc: RequestError):
        return error(exc.status, str(exc), exc.field, doc_id=getattr(exc, "doc_id", None))

    @app.exception_handler(HmdeError)
    async def _hmde_error(request: Request, exc: HmdeError):
        return error(400, str(exc))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        first = exc.errors()[0] if exc.errors() else {"loc": ("body",), "msg": "invalid request"}
        if first.get("type") == "json_invalid":
            return error(400, "the body is not valid JSON", "body")
        field = _field(first.get("loc", ()))
        return error(400, f"{field}: {first.get('msg', 'invalid')}", field)

    @app.exception_handler(HTTPException)
    async def _routing(request: Request, exc: HTTPException):  # an unknown route, a method a route does not take
        where = f"{request.method} {request.url.path}"
        if exc.status_code == 405:  # every route of this path (Starlette's Allow names the first one's alone)
            from starlette.routing import Match

            allowed = ", ".join(sorted({m for route in app.routes if route.matches(request.scope)[0] != Match.NONE
                                        for m in (getattr(route, "methods", None) or ())} - {"HEAD"}))
            return error(405, f"{where}: this route takes {allowed or 'other methods'}", None,
                         {"Allow": allowed} if allowed else None)
        if exc.status_code == 404:
            return error(404, f"{where}: no such route (routes: "
                              f"{', '.join(ROUTES + (INFO_ROUTE, WRITE_ROUTE, COMPACT_ROUTE, FILES_ROUTE) + DOCUMENT_ROUTES)})")
        return error(exc.status_code, str(exc.detail), None, exc.headers)

    @app.exception_handler(Overloaded)
    async def _overloaded(request: Request, exc: Overloaded):
        metrics.rejected.inc()
        return error(503, "the server is busy (its queue is full); retry later", None,
                     {"Retry-After": str(options.retry_after_s)})

    @app.exception_handler(Exception)
    async def _crashed(request: Request, exc: Exception):  # a fault outside Guard's own (its body read): still JSON
        log.exception("request %s %s failed", request.method, request.url.path)
        return fault(exc)

    app.add_middleware(Guard, options=options, metrics=metrics)

    async def embed(key: str, texts: list[str], langs: list) -> np.ndarray:
        metrics.queued.set(batcher.waiting + len(texts))
        try:
            return await batcher.submit(key, texts, langs)
        finally:
            metrics.queued.set(batcher.waiting)

    @app.post("/v1/embeddings")
    async def openai_embeddings(body: EmbeddingsRequest):
        model = served.model
        if body.model not in (model.name, "hmde"):
            raise RequestError(f"model {body.model!r} is not served here; this server serves {model.name!r}", "model",
                               404)
        if body.dimensions is not None:
            raise RequestError(f"dimensions cannot be chosen: {model.name}'s vectors have {model.dim} (leave "
                               "dimensions out)", "dimensions")
        given = body.input
        if is_token_input(given):  # OpenAI's clients (LangChain's defaults) send token ids: decoded as they encoded
            if len(given) > options.max_inputs and isinstance(given[0], list):
                raise RequestError(f"input holds {len(given)} token arrays; this server takes at most "
                                   f"{options.max_inputs} per request", "input", 413)
            given = await asyncio.get_running_loop().run_in_executor(None, decode_tokens, given, body.model)
        texts = texts_of(given, "input", options.max_inputs, options.max_text_chars)
        key = QUERY if body.input_type in QUERY_TYPES else model.document_method
        vectors = normalize(await embed(key, texts, [None] * len(texts)))
        tokens = model.count_tokens(texts)
        return {"object": "list", "model": model.name,
                "data": [{"object": "embedding", "index": i, "embedding": _embedding(v, body.encoding_format)}
                         for i, v in enumerate(vectors)],
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}

    @app.post("/embed")
    async def hmde_embed(body: EmbedRequest):
        model = served.model
        texts = texts_of(body.input, "input", options.max_inputs, options.max_text_chars)
        if body.kind == "query":
            if body.method is not None:
                raise RequestError("queries go through the sentence encoder: leave method out", "method")
            key = QUERY
        else:
            key = model.check_method(body.method or model.document_method, "method")
        vectors = await embed(key, texts, [body.lang] * len(texts))
        if body.normalize:
            vectors = normalize(vectors)
        return {"model": model.name, "kind": body.kind, "method": None if key == QUERY else key, "dim": model.dim,
                "normalized": body.normalize, "vectors": vectors.astype(np.float32).tolist()}

    @app.post("/search")
    async def search(body: SearchRequest):
        queries = search_queries(body, options.max_inputs, options.max_text_chars, options.max_top_k)
        target = served.index(body.index)

        def checked_filter():  # in the model thread, which owns the open snapshot; before the queries are embedded
            from ..index.search import check_filter

            try:
                return check_filter(target.current().index, body.filter)
            except HmdeError as exc:
                raise RequestError(str(exc), "filter") from None

        if body.filter is not None:
            await asyncio.get_running_loop().run_in_executor(executor, checked_filter)
        vectors = await embed(QUERY, queries, [None] * len(queries))

        def run():
            from ..index.search import check_index_request

            opened = target.current()
            try:
                multi = check_index_request(opened.index, body.hybrid, None)
            except HmdeError as exc:
                raise RequestError(str(exc), "hybrid") from None
            from ..index.filters import FilterError

            try:
                return opened.search(queries, body.top_k, body.lang, hybrid=body.hybrid, multi_vector=multi,
                                     query_vectors=vectors, query_lang=body.query_lang, filter=body.filter,
                                     group_by=body.group_by)
            except FilterError as exc:  # the index changed since the check (a field gone)
                raise RequestError(str(exc), "filter") from None

        hits = await asyncio.get_running_loop().run_in_executor(executor, run)
        return {"index": target.name, "model": served.model.name,
                "results": [{"query": q, "hits": [h.as_dict(body.include_text) for h in qh]}
                            for q, qh in zip(queries, hits)]}

    @app.get("/indexes")
    async def indexes():
        listed = await asyncio.get_running_loop().run_in_executor(  # the model thread: it owns the open snapshots
            executor, lambda: [i.describe() for i in served.indexes.values()])
        return {"model": served.model.name, "indexes": listed}

    @app.get("/indexes/{name}")
    async def index_info(name: str):
        target = served.index(name)
        return await asyncio.get_running_loop().run_in_executor(executor, target.info)

    def check_writable(name: str):
        if not options.writable:
            raise RequestError("this server's indexes are read-only: start it with --writable to accept writes",
                               None, 403)
        return served.index(name)

    @app.post("/indexes/{name}/documents")
    async def upsert_documents(name: str, body: DocumentsRequest):
        target = check_writable(name)
        records = documents_of(body, options.max_inputs, options.max_text_chars)
        written, replaced, skipped = await embed_and_commit(target, records, body.mode)
        answer = {"index": name, "mode": body.mode, "documents": len(records) - skipped, "replaced": replaced,
                  "live": written.live}
        return answer | ({"skipped": skipped} if body.mode == "skip" else {})

    async def embed_and_commit(target, records, mode: str):
        """The records embedded by the batcher and committed on the writer thread; (the new record, replaced)."""
        from ..index.builder import contextual, embedded_batch, write_embedded

        meta = target.meta
        if meta.store == "milvus":
            from ..index.milvus_client import record_problem

            for i, record in enumerate(records):
                problem = record_problem(record.text, record.extra)
                if problem:
                    where = f"documents[{i}].{problem[0]}"
                    raise RequestError(f"{where}: {problem[1]}", where)
        rows = await embed((INDEX_WRITE, meta.method, contextual(meta)), [r.text for r in records],
                           [r.lang for r in records])

        def commit():
            try:
                index = write_embedded(target.path, meta, [embedded_batch(records, rows)], mode)
            except HmdeError as exc:  # an id the index holds, with mode add; an index replaced meanwhile
                refused = RequestError(str(exc), "documents", 409)
                refused.doc_id = getattr(exc, "doc_id", None)
                raise refused from None
            try:
                return index.meta, getattr(index, "replaced", 0), getattr(index, "skipped", 0)
            finally:
                index.close()

        return await asyncio.get_running_loop().run_in_executor(writer, commit)

    from .document_routes import add_document_routes

    add_document_routes(app, served, options, executor, writer, embed_and_commit, check_writable)
    from .file_routes import add_file_routes

    add_file_routes(app, options, embed_and_commit, check_writable)

    @app.delete("/indexes/{name}/documents")
    async def delete_documents(name: str, body: DeleteRequest):
        from ..index.mutations import UnknownIds, delete_documents as delete

        target = check_writable(name)
        ids = ids_of(body, options.max_inputs)

        def commit():
            try:
                return delete(target.path, ids, body.ignore_missing)
            except UnknownIds as exc:
                shown = ", ".join(repr(x) for x in exc.missing[:10])
                raise RequestError(f"the index holds no document {shown}" + (
                    f" and {len(exc.missing) - 10} more" if len(exc.missing) > 10 else "")
                    + ": nothing was deleted (ignore_missing: true deletes the others)", "ids", 404) from None

        deleted = await asyncio.get_running_loop().run_in_executor(writer, commit)
        return {"index": name, "deleted": deleted, "missing": len(set(ids)) - deleted}

    @app.post("/indexes/{name}/compact")
    async def compact(name: str):
        from ..index.mutations import compact_index

        target = check_writable(name)
        dropped = await asyncio.get_running_loop().run_in_executor(writer, lambda: compact_index(target.path))
        live = await asyncio.get_running_loop().run_in_executor(executor, lambda: target.current().index.meta.live)
        return {"index": name, "dropped": dropped, "live": live}

    @app.get("/health")
    async def health(request: Request):
        answer = {"status": "ok", "model": served.model.name, "dim": served.model.dim,
                  "queued_texts": batcher.waiting}
        if not options.api_key or _authorized(request.headers.get("authorization", "").encode("latin-1"),
                                              options.api_key):
            answer["indexes"] = list(served.indexes)  # names are data: only for a caller with the key
        return answer

    @app.get("/metrics")
    async def prometheus():
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(metrics.text(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/", response_class=HTMLResponse)
    async def page():
        return HTMLResponse(resources.files("hmde.serve").joinpath("page.html").read_text(encoding="utf-8"))

    return app


class Guard:
    """The body limit, the API key and the metrics of every request (plain ASGI: Starlette's
    BaseHTTPMiddleware cost a few milliseconds per request)."""

    def __init__(self, app, options: ServeOptions, metrics: Metrics):
        self.app, self.options, self.metrics = app, options, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, path = time.perf_counter(), scope["path"]
        route = path if path in ROUTES else route_template(path)
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        status = {"code": 500, "started": False}

        async def sending(message):
            if message["type"] == "http.response.start":
                status["code"], status["started"] = message["status"], True
            await send(message)

        limit = self.options.max_body_bytes
        if length is None and scope.get("method") in ("POST", "PUT", "PATCH", "DELETE"):
            replayed = await _bounded_body(receive, limit)  # sent in chunks, with no length said; None: over
            too_large, receive = replayed is None, replayed or receive
        else:
            too_large = length is not None and (not length.isdigit() or int(length) > limit)
        if too_large:
            refused = error(413, f"the request body is larger than this server's limit ({limit:,} bytes)", "body")
        elif self.options.api_key and path not in OPEN_PATHS and \
                not _authorized(headers.get(b"authorization", b""), self.options.api_key):
            refused = error(401, "missing or wrong API key: send the header 'Authorization: Bearer KEY'",
                            "Authorization", {"WWW-Authenticate": "Bearer"})
        else:
            refused = None
        try:
            if refused is not None:
                await refused(scope, receive, sending)
            else:
                await self.app(scope, receive, sending)
        except Exception as exc:  # a fault: a 500 answered here keeps the client's connection open (Starlette's
            # outermost handler answers, then re-raises, and uvicorn closes it: a client that had already sent its
            # next request on it was reset); the traceback goes to the server's log, never to the client
            log.exception("request %s %s failed", scope.get("method"), path)
            if status["started"]:
                raise  # the answer is half sent: only closing the connection ends it
            await fault(exc)(scope, receive, sending)
        finally:
            self.metrics.requests.labels(route, str(status["code"])).inc()
            self.metrics.latency.labels(route).observe(time.perf_counter() - started)


async def _bounded_body(receive, limit: int):
    """A body sent without Content-Length, read here up to ``limit`` bytes (memory holds at most that):
    a ``receive`` that replays it to the app, or None once it is over the limit."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away: let the app see it
            chunks.append(message)
            break
        size += len(message.get("body", b""))
        if size > limit:
            return None
        chunks.append(message)
        if not message.get("more_body", False):
            break
    body = b"".join(m.get("body", b"") for m in chunks if m["type"] == "http.request")
    replay = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed():
        return replay.pop(0) if replay else await receive()

    return replayed


def route_template(path: str) -> str:
    """The metrics label of a path: its route's template (an index's name is no label value)."""
    parts = path.strip("/").split("/")
    if len(parts) == 2 and parts[0] == "indexes":
        return INFO_ROUTE
    if len(parts) == 3 and parts[0] == "indexes" and parts[2] == "documents":
        return WRITE_ROUTE
    if len(parts) == 3 and parts[0] == "indexes" and parts[2] in ("compact", "files"):
        return COMPACT_ROUTE if parts[2] == "compact" else FILES_ROUTE
    if len(parts) == 4 and parts[0] == "indexes" and parts[2] == "documents" and parts[3] in ("query", "metadata"):
        return DOCUMENT_ROUTES[parts[3] == "metadata"]
    return "other"


def _authorized(header: bytes, key: str) -> bool:
    scheme, _, token = header.decode("latin-1").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), key.encode())
