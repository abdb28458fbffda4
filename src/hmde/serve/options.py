"""What a server allows and how it batches: the settings of ``hmde serve``, as values."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServeOptions:
    api_key: str | None = None  # every route but /health (and the page's HTML) asks for "Authorization: Bearer KEY"
    max_body_bytes: int = 4 * 1024 * 1024  # a larger request body: 413
    max_inputs: int = 2048  # texts (or queries) in one request: more is a 413 naming the field
    max_text_chars: int = 100_000  # one text longer than this: a 413 naming it
    max_upload_files: int = 64  # files in one POST /indexes/{name}/files (each within the body limit)
    max_top_k: int = 1000
    max_batch: int = 64  # texts the model embeds in one batch, gathered across requests
    max_wait_ms: float = 0.0  # how long an idle model waits for more texts (0: requests that come while it works batch anyway)
    max_queue: int = 4096  # texts waiting for the model: more is a 503 with Retry-After
    retry_after_s: int = 1
    # the write routes (POST and DELETE /indexes/{name}/documents) answer 403 unless the server was started with
    # --writable; with an API key they need it, as every other route
    writable: bool = False
