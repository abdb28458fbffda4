"""``/v1/embeddings`` inputs given as token ids, as OpenAI's clients send them (issue 62).

LangChain's ``OpenAIEmbeddings`` (with its default ``check_embedding_ctx_length=True``) and others tokenize with
tiktoken before they send, and post arrays of token ids. They encoded with the encoding tiktoken names for the
request's ``model`` (``tiktoken.encoding_for_model``), or ``cl100k_base`` for a model tiktoken does not know, as
hmde's model names are; the server decodes with the same encoding, so the text it embeds is the text the client
had. tiktoken downloads an encoding's file on its first use and caches it; where it cannot (offline, first use),
the request is refused with a 400 that names the client-side fix.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from ..errors import exception_line
from .served import RequestError

FALLBACK = "cl100k_base"  # what tiktoken's clients use for a model it does not know (LangChain does)
LOAD_SECONDS = 10.0  # tiktoken's first download has no time-out of its own: a request waits at most this
RETRY_SECONDS = 60.0  # an encoding that could not be loaded is not tried again for this long
CLIENT_FIX = ("send text instead of token ids (LangChain: OpenAIEmbeddings(..., check_embedding_ctx_length=False)), "
              "or put tiktoken's encoding file in its cache (TIKTOKEN_CACHE_DIR) on this server")

_loaded: dict[str, Any] = {}
_failed: dict[str, tuple[float, str]] = {}
_lock = threading.Lock()


def is_token_input(value: Any) -> bool:
    """A list of token ids, or a list of such lists (OpenAI's two token forms)."""
    if not isinstance(value, list) or not value:
        return False
    if all(isinstance(t, int) and not isinstance(t, bool) for t in value):
        return True
    return all(isinstance(row, list) and row and all(isinstance(t, int) and not isinstance(t, bool) for t in row)
               for row in value)


def encoding_name(model: str) -> str:
    """The encoding a tiktoken client used for ``model``: tiktoken's own for OpenAI's names, else cl100k_base."""
    import tiktoken

    try:
        return tiktoken.encoding_name_for_model(model)
    except KeyError:
        return FALLBACK


def encoding_for(model: str):
    """tiktoken's encoding for the request's model, loaded once (in a thread: a first download that hangs offline
    ends the request after :data:`LOAD_SECONDS`); a :class:`RequestError` where it cannot be had."""
    try:
        import tiktoken  # noqa: F401
    except ImportError:
        raise RequestError("input holds token ids, and this server cannot decode them: tiktoken is not installed "
                           f"(pip install 'hmde[serve]'); or {CLIENT_FIX}", "input") from None
    name = encoding_name(model)
    with _lock:
        if name in _loaded:
            return _loaded[name]
        failed = _failed.get(name)
        if failed and time.monotonic() - failed[0] < RETRY_SECONDS:
            raise RequestError(_refusal(name, failed[1]), "input")
    found: dict = {}

    def load():
        import tiktoken

        try:
            found["encoding"] = tiktoken.get_encoding(name)
        except Exception as exc:  # noqa: BLE001 - a download error comes as any of requests' or the OS's classes
            found["error"] = exception_line(exc)

    worker = threading.Thread(target=load, daemon=True, name=f"hmde-tiktoken-{name}")
    worker.start()
    worker.join(LOAD_SECONDS)
    with _lock:
        if "encoding" in found:
            _loaded[name] = found["encoding"]
            return found["encoding"]
        reason = found.get("error") or f"loading it took over {LOAD_SECONDS:.0f} s (no network?)"
        _failed[name] = (time.monotonic(), reason)
    raise RequestError(_refusal(name, reason), "input")


def _refusal(name: str, reason: str) -> str:
    return (f"input holds token ids, which this server decodes with tiktoken's {name} encoding (as the client "
            f"encoded them), and that encoding cannot be loaded here ({reason}): {CLIENT_FIX}")


def decode_tokens(value: list, model: str) -> list[str]:
    """The texts of one token array or a list of them, decoded with the encoding the client used."""
    encoding = encoding_for(model)
    rows = [value] if all(isinstance(t, int) for t in value) else value
    vocabulary = encoding.n_vocab
    texts = []
    for i, row in enumerate(rows):
        bad = next((t for t in row if not 0 <= t < vocabulary), None)
        if bad is not None:
            where = "input" if rows is not value else f"input[{i}]"
            raise RequestError(f"{where} holds the token id {bad}, outside {encoding.name}'s {vocabulary:,} tokens",
                               where)
        try:
            texts.append(encoding.decode(row))
        except KeyError:  # an id inside n_vocab that names no token (cl100k_base: 100256, 100261-100275)
            bad = next(t for t in row if not _is_token(encoding, t))
            where = "input" if rows is not value else f"input[{i}]"
            raise RequestError(f"{where} holds the token id {bad}, which names no token of {encoding.name} (an "
                               "unassigned id inside its range)", where) from None
    return texts


def _is_token(encoding, token: int) -> bool:
    try:
        encoding.decode_single_token_bytes(token)
    except KeyError:
        return False
    return True
