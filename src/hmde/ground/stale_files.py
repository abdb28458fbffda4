"""Temporaries that name their writer, so that a later run can tell a dead writer's leftovers.

A writer killed by SIGKILL (or the kernel's OOM killer) runs no cleanup, and its temporary
``.v.npy.XXXXXXXX.tmp`` stayed beside the output forever. A lock beside every output would let
the next writer know that nobody else is writing, but it leaves a lock file beside every result.
Instead, the temporaries of streamed outputs carry ``HOST-PID`` (``.v.npy.XXXXXXXX.HOST-PID.tmp``):
the next writer of the same output on the same host removes those whose process is gone. A live
writer's temporary is never touched, nor one written from another host on a shared filesystem.
"""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:64] or "host"


def writer_tag() -> str:
    """The suffix that names this process in a temporary's name (before ``.tmp``)."""
    return f".{_host()}-{os.getpid()}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def remove_dead_writers_temporaries(output: str | os.PathLike, suffix: str = "") -> list[Path]:
    """Remove ``.NAME.XXXXXXXX{suffix}.HOST-PID.tmp`` beside ``output`` written by a dead process of this host
    (``suffix``: what the writer put before its tag, e.g. ``.parquet``)."""
    output = Path(output).absolute()
    if not output.parent.is_dir():
        return []
    pattern = re.compile(rf"^\.{re.escape(output.name)}\.[a-z0-9_]{{8}}{re.escape(suffix)}\.{re.escape(_host())}"
                         r"-(\d+)\.tmp$")
    removed = []
    for entry in output.parent.iterdir():
        match = pattern.match(entry.name)
        if match and entry.is_file() and not _alive(int(match.group(1))):
            entry.unlink(missing_ok=True)
            removed.append(entry)
    return removed


def remove_dead_writers_folders(parent: str | os.PathLike, prefix: str) -> list[Path]:
    """Remove the working folders ``{prefix}XXXXXXXX.HOST-PID.tmp`` in ``parent`` that a dead process of this host made
    (``hmde mine``'s vectors: a SIGKILL left 1.4-6 MB folders beside the output for ever, issue 94); a live run's and
    another host's are kept."""
    import shutil

    parent = Path(parent).absolute()
    if not parent.is_dir():
        return []
    pattern = re.compile(rf"^{re.escape(prefix)}[a-z0-9_]{{8}}\.{re.escape(_host())}-(\d+)\.tmp$")
    removed = []
    for entry in parent.iterdir():
        match = pattern.match(entry.name)
        if match and entry.is_dir() and not entry.is_symlink() and not _alive(int(match.group(1))):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed
