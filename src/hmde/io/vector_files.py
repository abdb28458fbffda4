"""Vector files as ``hmde encode`` writes them: OUT.npy (float32, one row per document, input order)
and OUT.ids.txt beside it, always both or neither, never half-written, never overwriting an
earlier pair until the new one is whole."""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np

from ..ground.atomic import atomic_path, save_npy_atomic, write_text_atomic
from ..errors import HmdeError
from ..encoders.finite_vectors import require_finite


def ids_path_for(output: str | Path) -> Path:
    output = Path(output)
    stem = output.name[:-4] if output.name.endswith(".npy") else output.name
    return output.with_name(stem + ".ids.txt")


def write_vectors(output: str | Path, ids: list[str], vectors: np.ndarray) -> None:
    """Write OUT.npy and OUT.ids.txt, each atomically."""
    for i in ids:
        if "\n" in i:
            raise HmdeError(f"document id {i!r} contains a newline")
    require_finite(vectors, ids)
    save_npy_atomic(output, np.ascontiguousarray(vectors, dtype=np.float32))
    write_text_atomic(ids_path_for(output), "".join(f"{i}\n" for i in ids))


class VectorWriter:
    """OUT.npy and OUT.ids.txt written chunk by chunk into temporary files (the .npy memory-mapped,
    its blocks reserved first: a full disk is an error naming the file, not a SIGBUS mid-write), moved
    into place at the end; an interrupted run leaves neither.

    The two renames cannot be one atomic step, so they are ordered so that the two files on disk are
    never of two runs: the old OUT.ids.txt is removed, then the new OUT.npy moved in, then the new
    OUT.ids.txt. A kill between the steps leaves a matrix without ids (refused by readers, replaced by
    the next run), never new ids beside an old matrix."""

    def __init__(self, output: str | Path, count: int):
        self.output, self.count, self.row, self.dim = Path(output), count, 0, None

    def __enter__(self) -> "VectorWriter":
        from ..ground.stale_files import remove_dead_writers_temporaries, writer_tag

        self._stack = contextlib.ExitStack()
        for path in (self.output, ids_path_for(self.output)):  # SIGKILL leaves .v.npy.XXXXXXXX.HOST-PID.tmp
            remove_dead_writers_temporaries(path)
        # entered ids first, so that on exit the matrix is moved in first and the ids last (see above)
        self._ids_path = self._stack.enter_context(atomic_path(ids_path_for(self.output), suffix=writer_tag()))
        self._npy = self._stack.enter_context(atomic_path(self.output, suffix=writer_tag()))
        self._ids = open(self._ids_path, "w", encoding="utf-8")
        self._array = None
        return self

    def add(self, ids: list[str], vectors: np.ndarray) -> None:
        vectors = np.asarray(vectors, dtype=np.float32)
        require_finite(vectors, ids)
        if self._array is None:
            self.dim = int(vectors.shape[1])
            self._array = np.lib.format.open_memmap(self._npy, mode="w+", dtype=np.float32,
                                                    shape=(self.count, self.dim))
            reserve(self._npy, self.output)
        self._array[self.row:self.row + len(ids)] = vectors
        self.row += len(ids)
        self._ids.write("".join(f"{i}\n" for i in ids))

    def __exit__(self, exc_type, exc, tb):
        self._ids.close()
        if self._array is not None:
            self._array.flush()
            self._array = None
        if exc_type is None and self.row != self.count:
            error = HmdeError(f"{self.row} vectors for {self.count} documents: the input changed while it was read")
            self._stack.__exit__(HmdeError, error, None)  # the temporaries are removed, nothing replaced
            raise error
        if exc_type is None:
            ids_path_for(self.output).unlink(missing_ok=True)  # no instant shows new ids beside an old matrix
        return self._stack.__exit__(exc_type, exc, tb)


def reserve(path: Path, output: Path) -> None:
    """Allocate every block of the memory-mapped file now: writing into a sparse mapping on a full disk
    kills the process with SIGBUS; here it is an OSError naming the output (one line from the CLI)."""
    import errno
    import os

    fd = os.open(path, os.O_RDWR)
    try:
        os.posix_fallocate(fd, 0, os.fstat(fd).st_size)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EINVAL):  # file systems without fallocate: left sparse
            return
        raise OSError(exc.errno, exc.strerror, str(output)) from None
    finally:
        os.close(fd)
