"""``hmde serve``: the model and the named indexes loaded once, behind an HTTP API (hmde.serve)."""

from __future__ import annotations

import argparse
import os
import signal

from ..errors import HmdeError
from .arg_types import positive_int
from .common import add_backend_argument, add_device_argument

API_KEY_VARIABLE = "HMDE_API_KEY"


def register(sub) -> None:
    p = sub.add_parser(
        "serve", help="serve a model and indexes over HTTP (OpenAI embeddings API, /search, a search page)",
        description="Load the model and the indexes once and answer HTTP requests: POST /v1/embeddings (the OpenAI "
        "API), POST /embed, POST /search, GET /indexes, GET /health, GET /metrics (Prometheus) and GET / (a search "
        "page). Concurrent requests are embedded in shared batches. Needs `pip install 'hmde[serve]'`.")
    p.add_argument("indexes", nargs="*", metavar="INDEX", help="index folders to search, each addressed by its folder's "
                   "name; an index grown by `hmde index build --add` is picked up without a restart")
    p.add_argument("--model", help="the model (default: the one the first INDEX was built with, else hmde-e5); every "
                   "INDEX must have been built with it")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--api-key", help=f"require 'Authorization: Bearer KEY' on every route but /health and the page "
                   f"(default: the environment variable {API_KEY_VARIABLE}, else no key)")
    p.add_argument("--method", default=None, help="document vectors of /v1/embeddings and /embed (default: the model's "
                   "recommended method, mean for hmde-e5)")
    p.add_argument("--max-batch", type=positive_int, default=64, help="texts per model batch, gathered across "
                   "requests (default 64)")
    p.add_argument("--max-wait-ms", type=float, default=0.0, help="how long an idle model waits for more requests "
                   "before it starts (default 0: the requests that arrive while it works form the next batch)")
    p.add_argument("--max-queue", type=positive_int, default=4096, help="texts waiting for the model before requests "
                   "get 503 with Retry-After (default 4096)")
    p.add_argument("--max-inputs", type=positive_int, default=2048, help="texts or queries per request (default 2048)")
    p.add_argument("--max-body-mb", type=float, default=4.0, help="request body limit in MB (default 4)")
    p.add_argument("--writable", action="store_true", help="accept writes: POST /indexes/NAME/documents (upsert) "
                   "and DELETE /indexes/NAME/documents (by id); without it they answer 403. Give --api-key too "
                   "wherever others reach the server")
    add_device_argument(p)
    add_backend_argument(p, default=None)
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from ..serve.app import create_app
    except ImportError as exc:
        raise HmdeError(f"hmde serve needs the server extra ({exc.name} is missing): pip install 'hmde[serve]'") from None
    from ..serve.options import ServeOptions
    from ..serve.served import load_served

    if not 0 < args.port < 65536:
        raise HmdeError(f"--port must be between 1 and 65535, got {args.port}")
    if args.max_wait_ms < 0 or args.max_body_mb <= 0:
        raise HmdeError("--max-wait-ms must be >= 0 and --max-body-mb > 0")
    options = ServeOptions(api_key=args.api_key or os.environ.get(API_KEY_VARIABLE) or None,
                           max_body_bytes=int(args.max_body_mb * 1024 * 1024), max_inputs=args.max_inputs,
                           max_batch=args.max_batch, max_wait_ms=args.max_wait_ms, max_queue=args.max_queue,
                           writable=args.writable)
    served = load_served(args.model, args.indexes, args.device, args.backend, args.method)
    app = create_app(served, options)
    if args.host not in ("127.0.0.1", "localhost", "::1") and not options.api_key:
        print(f"hmde: warning: serving on {args.host} without an API key: anyone who reaches it may use it"
              + (", and write to its indexes" if args.writable else "") + f" (--api-key or {API_KEY_VARIABLE})",
              flush=True)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level,
                            timeout_graceful_shutdown=30, access_log=args.log_level == "debug")
    # uvicorn drains the requests in flight on SIGTERM/SIGINT, then re-raises the signal: a drained
    # shutdown is a normal end (exit 0), not a termination
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: None)
    print(f"hmde: serving {served.model.name} and {len(served.indexes)} index(es) on http://{args.host}:{args.port}",
          flush=True)
    uvicorn.Server(config).run()
    return 0
