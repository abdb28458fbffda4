"""The open versions of one index that an :class:`hmde.Index` shares between threads (issue 92).

Each read leases the current snapshot (:meth:`Snapshots.lease`): a reader keeps the version it started with to
its end, whatever another thread's write or another process's commit swaps in meanwhile. A newer version is
opened once, by the first reader to see it, and the old one is closed when its last reader has let go (it was
closed at once, under the readers still in it: "index ... was closed", KeyError, AttributeError).
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Callable, Iterator


def version_of(path) -> tuple:
    """What changes when a writer swaps in a new version of the index (``index.json`` is a new file)."""
    st = os.stat(os.path.join(path, "index.json"))
    return st.st_ino, st.st_mtime_ns, st.st_size


def _version(store) -> tuple:
    """The version a snapshot is, as it recorded when it opened (a write's new version may be installed after a
    later write's)."""
    return getattr(store, "version", None) or version_of(store.path)


class Snapshots:
    """The current open version of the index at ``store.path`` and those still leased by readers."""

    def __init__(self, store, opener: Callable[[Path], object]):
        self._opener = opener  # path -> a fresh snapshot (DocumentIndex.open)
        self._lock = threading.Lock()
        self._current, self._version = store, _version(store)
        self._leases: dict[int, int] = {}  # id(snapshot) -> readers in it
        self._retired: dict[int, object] = {}  # replaced snapshots some reader still holds
        self._closed = False

    @property
    def current(self):
        return self._current

    def _refresh(self) -> None:
        """Open the folder's newer version, if a writer (of this process or another) committed one."""
        try:
            version = version_of(self._current.path)
        except FileNotFoundError:  # between the renames of a swap on a system without an atomic exchange
            return
        if version != self._version:
            self._install(self._opener(self._current.path))

    def _install(self, fresh) -> None:
        old, self._current = self._current, fresh
        self._version = _version(fresh)
        if self._leases.get(id(old)):
            self._retired[id(old)] = old
        else:
            old.close()

    @contextlib.contextmanager
    def lease(self, refresh: bool = True) -> Iterator[object]:
        """The newest committed snapshot (``refresh``: reopened first where the folder changed), held open until the
        block ends."""
        with self._lock:
            if self._closed:
                from ..errors import HmdeError

                raise HmdeError(f"index {self._current.path} was closed")
            if refresh:
                self._refresh()
            snapshot = self._current
            self._leases[id(snapshot)] = self._leases.get(id(snapshot), 0) + 1
        try:
            yield snapshot
        finally:
            with self._lock:
                key = id(snapshot)
                self._leases[key] -= 1
                if not self._leases[key]:
                    del self._leases[key]
                    retired = self._retired.pop(key, None)
                    if retired is not None:
                        retired.close()

    def replace(self, written) -> None:
        """Make ``written`` (a version this process just committed) the current one."""
        with self._lock:
            if written is not self._current:
                self._install(written)

    def close(self) -> None:
        """Close the current snapshot now and each leased one as its last reader ends."""
        with self._lock:
            self._closed = True
            current = self._current
            if self._leases.get(id(current)):
                self._retired[id(current)] = current
            else:
                current.close()
