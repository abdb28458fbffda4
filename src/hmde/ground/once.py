"""State made on first use and shared by every thread of a process: :func:`once` makes it exactly once per owner,
however many threads ask at the same moment (an open index's sentence owners, its FAISS bitmaps, its BM25
retriever, its calibration: issue 92, where eight threads searching one index each built their own, or read a
half-made one)."""

from __future__ import annotations

import threading
from typing import Callable, TypeVar

T = TypeVar("T")
_GUARD = threading.Lock()  # guards the making of each owner's lock


def owner_lock(owner) -> threading.RLock:
    """The owner's own re-entrant lock (made once, kept as ``owner._once_lock``)."""
    lock = getattr(owner, "_once_lock", None)
    if lock is None:
        with _GUARD:
            lock = getattr(owner, "_once_lock", None)
            if lock is None:
                lock = threading.RLock()
                owner._once_lock = lock
    return lock


def once(owner, name: str, make: Callable[[], T]) -> T:
    """``owner.<name>``, made by ``make()`` under the owner's lock where it is missing or None; the value every
    thread then reads."""
    value = getattr(owner, name, None)
    if value is not None:
        return value
    with owner_lock(owner):
        value = getattr(owner, name, None)
        if value is None:
            value = make()
            setattr(owner, name, value)
        return value
