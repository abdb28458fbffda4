"""Rows of a stored 2-d ``.npy`` matrix read by position, without mapping the file.

Why: an index's ``sentences.npy`` grows to tens of gigabytes (16M sentences x 384 float32 = 24 GB), and a
search reads about a thousand scattered rows of it. Through a memory map every touched page, and on
kernels that cache files in large folios the whole folio around it, is mapped into the process and counted
in its resident memory: a search over 10M sentences showed 8.7 GB resident while it held under 1 GB of its
own. Positional reads (``os.preadv`` into the result) copy only the rows asked for; the page cache keeps
what the kernel chooses, reclaimable, outside the process. Runs of consecutive rows (a document's
sentences) are one read, and a search's scattered rows are read 16 at a time: from a cold page cache each
waits on the disk (10M sentences, 1,000 candidates a query: p50 107 ms one at a time).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import BinaryIO

import numpy as np

from ..errors import InputError


READ_THREADS = 16  # positional reads in flight at once (the GIL is released while one waits on the disk)
PARALLEL_FROM = 64  # fewer runs than this are read in the calling thread
_POOL = None
_POOL_LOCK = threading.Lock()


def _reader_pool():
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            from concurrent.futures import ThreadPoolExecutor

            _POOL = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="hmde-rows")
        return _POOL


class RowFile:
    """The rows of the matrix that ``array`` (``np.load(file, mmap_mode="r")``) maps, read through ``file``, the
    open file it was loaded from (so that both see one version of it, whatever replaces the path later)."""

    def __init__(self, file: BinaryIO, array: np.memmap, path: Path):
        if array.ndim == 2 and not array.flags.c_contiguous:
            file.close()
            raise InputError("the rows of a Fortran-ordered array are not contiguous; rebuild the index",
                             path=str(path))
        self._file, self._fd, self.path = file, file.fileno(), path
        self.dtype, self._offset = array.dtype, int(array.offset)
        self.shape = array.shape if array.ndim == 2 else (0, 0)  # the index refuses other shapes when it opens
        self._row_bytes = self.shape[1] * array.dtype.itemsize

    def __len__(self) -> int:
        return self.shape[0]

    def take(self, rows: np.ndarray) -> np.ndarray:
        """The given rows, in the given order (repeats allowed); runs of consecutive rows are read at once."""
        rows = np.asarray(rows, np.int64).reshape(-1)
        out = np.empty((len(rows), self.shape[1]), self.dtype)
        if not len(rows):
            return out
        if rows.min() < 0 or rows.max() >= self.shape[0]:
            raise IndexError(f"rows out of range 0..{self.shape[0] - 1} of {self.path}")
        order = np.argsort(rows, kind="stable")
        unique, first = np.unique(rows[order], return_index=True)
        block = np.empty((len(unique), self.shape[1]), self.dtype)
        breaks = np.flatnonzero(np.diff(unique) != 1) + 1  # runs of consecutive rows
        runs = [(int(unique[start]), block[start:end]) for start, end in zip(np.r_[0, breaks], np.r_[breaks, len(unique)])]
        if len(runs) < PARALLEL_FROM:
            for row, into in runs:
                self._read(row, into)
        else:  # rows on disk, not in the page cache, take a disk's latency each: several in flight at once,
            # each thread reading its share in turn (a task per row costs more than a cached row's read)
            def read_share(share):
                for row, into in share:
                    self._read(row, into)

            shares = [runs[i::READ_THREADS] for i in range(READ_THREADS)]
            list(_reader_pool().map(read_share, shares))
        out[order] = block[np.repeat(np.arange(len(unique)), np.diff(np.r_[first, len(rows)]))]
        return out

    def span(self, start: int, end: int) -> np.ndarray:
        """Rows ``start`` to ``end`` (exclusive) in one read."""
        start, end = max(0, int(start)), min(self.shape[0], int(end))
        out = np.empty((max(0, end - start), self.shape[1]), self.dtype)
        if len(out):
            self._read(start, out)
        return out

    def read_into(self, row: int, into) -> None:
        """Rows from ``row`` on into the buffer ``into`` (a whole number of rows: a FAISS index's own buffer)."""
        if row < 0 or (row * self._row_bytes + len(memoryview(into).cast("B"))) > self.shape[0] * self._row_bytes:
            raise IndexError(f"rows from {row} past the end of {self.path}")
        self._read(row, into)

    def _read(self, row: int, into: np.ndarray) -> None:
        view, done = memoryview(into).cast("B"), 0
        while done < len(view):  # a regular file answers in full, but a short read is not an error
            got = os.preadv(self._fd, [view[done:]], self._offset + row * self._row_bytes + done)
            if got == 0:
                raise InputError(f"the file ends before row {row + done // self._row_bytes}; rebuild the index",
                                 path=str(self.path))
            done += got

    def close(self) -> None:
        self._file.close()


def spans_to_rows(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Every row of the spans ``[start, start + count)``, in order."""
    starts, counts = np.asarray(starts, np.int64), np.asarray(counts, np.int64)
    if not len(counts) or not counts.sum():
        return np.zeros(0, np.int64)
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
    return offsets + np.arange(int(counts.sum()), dtype=np.int64)
