"""One ``ast.parse`` at a time in a process that imports hmde, on the Pythons whose parser is not safe across
threads.

CPython 3.11 and 3.12 keep the AST constructor's recursion depth in state shared by every thread, and check it
after each parse: two threads parsing at once can fail with ``SystemError: AST constructor recursion depth mismatch``
(python/cpython#106905). numpy parses every ``.npy`` header with ``ast.literal_eval``, so a server whose writer
opens the next snapshot (``sentences.npy``, ``languages.npz``) while a search loads the language identifier's model
(py3langid's ``.npz``) answered a search 500 with that error (tests/test_serve_writes.py, in CI's full suite: 1 of
about 1,300 requests). :func:`serialize_ast_parse` wraps ``ast.parse`` (what ``literal_eval`` calls) in a lock
once; parses are short, so callers wait microseconds. Python 3.13 and later are left as they are.
"""

from __future__ import annotations

import ast
import functools
import sys
import threading

_LOCK = threading.RLock()


def serialize_ast_parse() -> None:
    """Make ``ast.parse`` take :data:`_LOCK` (once; only on Python < 3.13)."""
    if sys.version_info >= (3, 13) or getattr(ast.parse, "_hmde_serialized", False):
        return
    parse = ast.parse

    @functools.wraps(parse)
    def serialized(*args, **kwargs):
        with _LOCK:
            return parse(*args, **kwargs)

    serialized._hmde_serialized = True
    ast.parse = serialized
