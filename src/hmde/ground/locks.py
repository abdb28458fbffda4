"""Advisory locks that let several processes write and read one output folder safely.

hmde replaces a folder (an index, an export) by writing a temporary folder beside it and
renaming it into place (:func:`hmde.ground.atomic.atomic_dir`). Two things can still go wrong
when processes share a folder, and a lock beside the folder (never inside it: the
folder itself is replaced) guards each:

* two writers each read the old folder, add their part and swap in their result: one
  addition is lost. :func:`exclusive_writer` serialises writers for the whole
  read-modify-write; a second one waits and says so.
* a reader opens its files one by one while a writer swaps folders: it may read
  ``index.json`` of one version and ``docs.duckdb`` of the next. Readers hold a shared
  lock while they open (:func:`reading`), writers an exclusive one for the two renames
  of the swap (:func:`swapping`), so readers wait milliseconds, not for a whole build.

Holding the writer lock also proves that no other writer is alive, so temporaries
left by a killed writer are removed then (:func:`remove_stale_temporaries`).
The locks are ``filelock``'s (flock for writers, SQLite for the shared/exclusive pair).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

from ..errors import HmdeError


def lock_file(path: str | os.PathLike, kind: str) -> Path:
    """``.NAME.KIND.lock`` beside the folder ``path``."""
    path = Path(path).absolute()
    return path.parent / f".{path.name}.{kind}.lock"


def _can_lock(path: Path) -> bool:
    """Locks are files beside ``path``: where nobody may write, nobody writes, and no lock is needed."""
    parent = Path(path).absolute().parent  # where lock_file() puts the locks
    return parent.is_dir() and os.access(parent, os.W_OK | os.X_OK)


def stale_temporaries(path: str | os.PathLike) -> list[Path]:
    """Temporaries that :func:`hmde.ground.atomic.atomic_dir` makes for ``path``: ``.NAME.XXXXXXXX.tmp``
    (the new folder being written) and ``.NAME.old.PID`` (the old one being removed)."""
    path = Path(path).absolute()
    name = re.escape(path.name)
    pattern = re.compile(rf"^\.{name}\.(?:[a-z0-9_]{{8}}\.tmp|old\.\d+)$")
    if not path.parent.is_dir():
        return []
    return sorted(p for p in path.parent.iterdir() if pattern.match(p.name) and p.is_dir())


def remove_stale_temporaries(path: str | os.PathLike) -> None:
    """Call with the writer lock held: every temporary of ``path`` then belongs to a dead writer. Where a
    writer was killed between the two renames of a swap (systems without an atomic exchange), ``path`` is
    missing and its old version is the ``.old`` folder: that is put back, not removed."""
    path = Path(path).absolute()
    stale = stale_temporaries(path)
    olds = [p for p in stale if p.name.startswith(f".{path.name}.old.")]
    if not path.exists() and len(olds) == 1:
        os.replace(olds[0], path)
        stale.remove(olds[0])
    for entry in stale:
        shutil.rmtree(entry, ignore_errors=True)


WRITER_WAIT_S = 3600.0  # how long a writer waits for another to finish (HMDE_LOCK_TIMEOUT overrides)
_THREAD_LOCKS: dict = {}  # lock file -> the RLock that serialises this process's threads writing that folder
_THREAD_LOCKS_GUARD = threading.Lock()


def writer_wait() -> float:
    """Seconds a writer waits for the folder's writer lock: ``$HMDE_LOCK_TIMEOUT``, else :data:`WRITER_WAIT_S`."""
    value = os.environ.get("HMDE_LOCK_TIMEOUT")
    try:
        return float(value) if value else WRITER_WAIT_S
    except ValueError:
        raise HmdeError(f"HMDE_LOCK_TIMEOUT must be a number of seconds, got {value!r}") from None


def _thread_lock(file: Path) -> threading.RLock:
    with _THREAD_LOCKS_GUARD:
        return _THREAD_LOCKS.setdefault(str(file), threading.RLock())


def _waited(path: Path, file: Path, waited: float, who: str) -> HmdeError:
    return HmdeError(f"waited {waited:g} s for the writer lock of {path} ({file}), held by {who}, and gave up: "
                     "try again when that write has ended (HMDE_LOCK_TIMEOUT sets how long to wait)")


@contextlib.contextmanager
def exclusive_writer(path: str | os.PathLike) -> Iterator[None]:
    """Hold the writer lock of folder ``path``: wait (saying so once) while another process or another thread of
    this one holds it, at most :func:`writer_wait` seconds (then a one-line error naming the lock).

    Re-entrant within a thread, so a writer may call helpers that take it again.
    """
    from filelock import FileLock, Timeout

    path = Path(path)
    path.absolute().parent.mkdir(parents=True, exist_ok=True)
    file = lock_file(path, "write")
    wait = writer_wait()
    threads = _thread_lock(file)  # flock is per open file: threads of one process are serialised here first
    started = time.monotonic()
    if not threads.acquire(timeout=wait if wait >= 0 else -1):
        raise _waited(path, file, wait, "another thread of this process")
    try:
        lock = FileLock(file, is_singleton=True, thread_local=False)
        try:
            lock.acquire(blocking=False)
        except Timeout:
            print(f"hmde: waiting for another hmde process writing {path} (lock {lock.lock_file})", file=sys.stderr,
                  flush=True)
            try:
                lock.acquire(timeout=max(0.0, wait - (time.monotonic() - started)) if wait >= 0 else -1)
            except Timeout:
                raise _waited(path, file, wait, "another process") from None
        try:
            if lock.lock_counter == 1:
                remove_stale_temporaries(path)
            yield
        finally:
            lock.release()
    finally:
        threads.release()


def writer_alive(path: str | os.PathLike) -> bool:
    """Whether a process holds the writer lock of folder ``path`` now (one of another folder: this one's own lock is
    re-entrant and would answer False)."""
    from filelock import FileLock, Timeout

    if not path or not lock_file(path, "write").is_file():
        return False
    lock = FileLock(lock_file(path, "write"), is_singleton=False)
    try:
        lock.acquire(blocking=False)
    except Timeout:
        return True
    except OSError:  # a folder nobody may lock in: nobody writes there
        return False
    lock.release()
    return False


def _read_write_lock(path: Path):
    from filelock import ReadWriteLock

    return ReadWriteLock(lock_file(path, "swap"), is_singleton=False)


@contextlib.contextmanager
def reading(path: str | os.PathLike) -> Iterator[None]:
    """Hold off a writer's swap of folder ``path`` while its files are opened."""
    path = Path(path)
    if not _can_lock(path):
        yield
        return
    lock = _read_write_lock(path)
    try:
        with lock.read_lock():
            yield
    finally:
        lock.close()


@contextlib.contextmanager
def swapping(path: str | os.PathLike) -> Iterator[None]:
    """Exclude readers of folder ``path`` while it is replaced."""
    lock = _read_write_lock(Path(path))
    try:
        with lock.write_lock():
            yield
    finally:
        lock.close()
