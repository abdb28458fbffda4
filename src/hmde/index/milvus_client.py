"""Reaching a Milvus store: the ``--store milvus:PATH_OR_URI`` address, a client of it (a Milvus Lite folder is served
to one process at a time, so hmde stops its in-process server when its last client of the folder closes), the
collections' names, and the one limit of what Milvus keeps (its VARCHAR holds 65,535 bytes: a longer text is refused
in one line before anything is written; it was stored cut, silently)."""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from pathlib import Path

from ..errors import HmdeError, InputError, exception_line
from ..ground.locks import writer_wait

SCHEME = "milvus:"
MAX_VARCHAR = 65_535


def parse_store(value: str) -> str:
    """``milvus:PATH_OR_URI`` -> the URI a client connects to (a local path made absolute: the record must not
    depend on the directory hmde was run from)."""
    if not value.startswith(SCHEME) or not value[len(SCHEME):].strip():
        raise HmdeError(f"--store takes milvus:PATH (a Milvus Lite file) or milvus:URI (a Milvus server), got "
                        f"'{value}'")
    target = value[len(SCHEME):].strip()
    if re.match(r"^[a-z][a-z0-9+.-]*://", target):
        return target
    return check_lite_path(str(Path(target).absolute()))


def check_lite_path(uri: str) -> str:
    """A Milvus Lite path must not be a file: milvus-lite keeps a folder there, and on a user's file (a SQLite
    database, say) it failed with its own traceback."""
    if not re.match(r"^[a-z][a-z0-9+.-]*://", uri) and Path(uri).is_file():
        raise HmdeError(f"--store milvus:{uri}: that is a file, and a Milvus Lite database is a folder that "
                        "milvus-lite makes: name a new path (hmde never opens a file it did not write)")
    return uri


# how long a process waits for another's hold of a Milvus Lite folder to end: short, since an open index holds its
# folder for its life (a server, an application), and one that waits for this process's writer lock never lets go
LITE_WAIT_S = 10.0
_LITE_USERS: dict[str, int] = {}  # Milvus Lite folder -> open clients of this process
_LITE_LOCK = threading.Lock()


def _lite_folder(uri: str) -> str | None:
    return None if re.match(r"^[a-z][a-z0-9+.-]*://", uri) else str(Path(uri).absolute())


def client_for(uri: str):
    """A pymilvus client of ``uri``; one line saying what to install where pymilvus is missing. Milvus Lite serves a
    folder to one process at a time: hmde holds it while a client of this process is open (:func:`release`)."""
    # gRPC's own log lines (GOAWAY ... too_many_pings over a long run of searches) are no news for the user: hmde's
    # errors say what failed; a GRPC_VERBOSITY the user set is kept
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    try:
        from pymilvus import MilvusClient
    except ImportError:
        raise HmdeError("an index stored in Milvus needs pymilvus (and, for a local file, milvus-lite): pip install "
                        "'hmde[milvus]'") from None
    check_lite_path(uri)
    folder = _lite_folder(uri)
    started, wait = time.monotonic(), min(writer_wait(), LITE_WAIT_S)
    while True:
        with _LiteLog() as said:
            try:
                client = MilvusClient(uri)
                break
            except Exception as exc:  # noqa: BLE001 - connection and engine errors come in many classes
                told = " ".join(said.lines) + str(getattr(exc, "__context__", "") or "") + str(exc)
                held = "lock" in told and folder is not None
                waited = time.monotonic() - started
                if held and waited < wait:  # another process's short use (a write, a search): wait for it, bounded
                    time.sleep(min(0.2, wait - waited))
                    continue
                why = f"held by another process for {waited:.0f} s" if held else exception_line(exc)
                raise HmdeError(f"cannot open the Milvus store {uri} ({why}; Milvus Lite serves a folder to one "
                                "process at a time: a server or a search holding it must stop first)") from None
    if folder:
        quiet_lite_server()
        with _LITE_LOCK:
            _LITE_USERS[folder] = _LITE_USERS.get(folder, 0) + 1
    return client


def remove_empty_lite_indexes(uri: str, exc: Exception) -> list[str]:
    """Milvus Lite writes a collection's index files (``indexes/*.sidx``, ``*.idx``) in place: a writer killed while
    it wrote one leaves it empty, and every later load fails ("File is too small: 0"). An index file is made from the
    segments beside it (a load makes a missing one again) and an empty one holds nothing, so the empty ones of a local
    folder are removed, and their names returned (none where the error was another, or the store a server's)."""
    folder = _lite_folder(uri)
    if folder is None or "File is too small: 0" not in str(exc):
        return []
    removed = []
    for path in sorted(Path(folder).glob("collections/*/partitions/*/indexes/*")):
        if path.is_file() and not path.is_symlink() and path.stat().st_size == 0:
            path.unlink()
            removed.append(str(path))
    return removed


class _LiteLog(logging.Handler):
    """Within the block, what Milvus Lite's server manager logs (a 20-line traceback where another process holds the
    folder's lock) is kept here, for hmde's one line, instead of reaching the user's terminal first."""

    NAMES = ("milvus_lite", "pymilvus")

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self._saved: list = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage() + (f" {record.exc_info[1]}" if record.exc_info else ""))

    def __enter__(self) -> "_LiteLog":
        for name in self.NAMES:
            log = logging.getLogger(name)
            self._saved.append((log, log.propagate, list(log.handlers)))
            log.handlers, log.propagate = [self], False
        return self

    def __exit__(self, *exc) -> None:
        for log, propagate, handlers in self._saved:
            log.handlers, log.propagate = handlers, propagate


class _UnimplementedCalls(logging.Filter):
    """Milvus Lite's in-process server logs a traceback for each RPC it lacks (pymilvus's query iterator asks for a
    timestamp first, then does without): no fault of the user's, and no line for their terminal."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], NotImplementedError))


def quiet_lite_server() -> None:
    server_log = logging.getLogger("grpc._server")
    if not any(isinstance(f, _UnimplementedCalls) for f in server_log.filters):
        server_log.addFilter(_UnimplementedCalls())


def release(client, uri: str) -> None:
    """Close ``client``; the last of this process's clients of a Milvus Lite folder stops its server, so that another
    process (the next command, a writer) can open it."""
    client.close()
    folder = _lite_folder(uri)
    if not folder:
        return
    with _LITE_LOCK:
        _LITE_USERS[folder] = _LITE_USERS.get(folder, 1) - 1
        if _LITE_USERS[folder] > 0:
            return
        del _LITE_USERS[folder]
    try:
        from milvus_lite.server_manager import server_manager_instance
    except ImportError:
        return
    server_manager_instance.release_server(folder)


def collection_prefix(index_path: Path) -> str:
    """Collection names from the index folder's name (Milvus takes letters, digits and underscores)."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", Path(index_path).absolute().name) or "index"
    return ("hmde_" + name)[:200]


def text_too_long(value) -> str | None:
    """Why a document's text cannot be kept whole in Milvus (its VARCHAR holds 65,535 bytes), or None."""
    from ..methods.base import flat_text

    size = len(flat_text(value or "").encode("utf-8"))
    if size <= MAX_VARCHAR:
        return None
    return (f"the text is {size:,} bytes of UTF-8, and an index stored in Milvus keeps at most {MAX_VARCHAR:,} "
            "(Milvus's VARCHAR): split the document, or keep the index in hmde's own files (no --store)")


def _wide_integer(value, key: str) -> str | None:
    """The first integer beyond 64 bits inside a metadata value, as ``key.path``, or None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return key if not -2 ** 63 <= value <= 2 ** 63 - 1 else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    return next((found for k, v in items if (found := _wide_integer(v, f"{key}.{k}"))), None)


def metadata_problem(metadata) -> tuple[str, str] | None:
    """(field, why) where Milvus's JSON cannot keep a document's metadata (an integer beyond 64 bits: a
    DataNotMatchException traceback, a 500 from the server), or None."""
    for key, value in (metadata or {}).items():
        found = _wide_integer(value, str(key))
        if found:
            return str(key), (f"{found} is an integer beyond 64 bits, which Milvus's JSON cannot hold: write it as a "
                              "string, or keep the index in hmde's own files (no --store)")
    return None


def record_problem(text, metadata) -> tuple[str, str] | None:
    """(field, why) where a document cannot be kept whole in Milvus, or None."""
    problem = text_too_long(text)
    return ("text", problem) if problem else metadata_problem(metadata)


def check_records_fit(records, where: str) -> None:
    """Refuse, before anything is written, a document that Milvus would have to cut (its text; it was stored cut,
    silently) or could not take (metadata: an integer beyond 64 bits); records with ``text``, ``extra``, ``doc_id``
    and ``line``."""
    for i, record in enumerate(records):
        problem = record_problem(record.text, record.extra)
        if problem:
            at = where if record.line is not None else f"{where}[{i}]"
            raise InputError(f"document '{record.doc_id}': {problem[1]}", at, record.line, problem[0])


def fitting(records, path):
    """The records of a file as they stream by, each refused in one line where Milvus could not keep it whole."""
    for record in records:
        check_records_fit([record], str(path))
        yield record
