"""One DuckDB cursor per thread over one open connection (issue 92): a DuckDB connection runs one call at a time, and
eight threads searching one index through it were told "connection is busy with another call ... rebuild the index".
A cursor is a connection of its own to the same database (the snapshot's attached file), so each thread's queries
run beside the others'."""

from __future__ import annotations

import threading

from ..errors import HmdeError


class ThreadCursors:
    """``get()``: this thread's cursor of ``con`` (made on first use, ``setup`` run on it); ``close()``: every cursor,
    then ``con``."""

    def __init__(self, con, setup: str, name: str):
        self._con, self._setup, self._name = con, setup, name
        self._cursors: list = []
        self._thread = threading.local()
        self._lock = threading.Lock()

    def get(self):
        cursor = getattr(self._thread, "cursor", None)
        if cursor is not None and self._con is not None:
            return cursor
        with self._lock:
            if self._con is None:
                raise HmdeError(f"index {self._name} was closed")
            cursor = self._con.cursor()
            cursor.execute(self._setup)  # a cursor's settings are its own (the database it uses)
            self._cursors.append(cursor)
            self._thread.cursor = cursor
            return cursor

    def close(self) -> None:
        with self._lock:
            for cursor in self._cursors:
                cursor.close()
            self._cursors.clear()
            if self._con is not None:
                self._con.close()
                self._con = None
