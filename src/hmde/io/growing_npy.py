"""A ``.npy`` file of float32 (or float16) rows written a batch at a time, its row count unknown until the end.

Why: an index's sentence vectors (16 per document; 24 GB as float32 for a million documents) were
concatenated in memory and saved at the end, so a build's memory grew with the collection. Here each
batch is appended to the file and the header, written first with room for any count, is rewritten
with the real shape when the file is closed: memory holds one batch. The result is an ordinary
``.npy`` (format 1.0) that ``numpy.load`` reads, memory-mapped or not.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

HEADER_BYTES = 128  # magic, version, length and the header dict, padded: fits any 2-d float32 shape
DTYPES = {"float32": "<f4", "float16": "<f2"}


def _header(rows: int, dim: int, descr: str = "<f4") -> bytes:
    body = repr({"descr": descr, "fortran_order": False, "shape": (rows, dim)}).encode("latin1")
    pad = HEADER_BYTES - 10 - len(body) - 1
    if pad < 0:
        raise ValueError(f"shape ({rows}, {dim}) does not fit a {HEADER_BYTES}-byte .npy header")
    return b"\x93NUMPY\x01\x00" + (HEADER_BYTES - 10).to_bytes(2, "little") + body + b" " * pad + b"\n"


def as_stored(rows: np.ndarray, dtype: str) -> np.ndarray:
    """float32 ``rows`` as a file of ``dtype`` gives them back (float16: rounded), as float32."""
    rows = np.asarray(rows, np.float32)
    return rows if dtype == "float32" else rows.astype(DTYPES[dtype]).astype(np.float32)


class GrowingNpy:
    """``with GrowingNpy(path, dim) as out: out.append(rows)...``; ``out.rows`` counts what was written; ``dtype``
    "float32" (default) or "float16" (rows are rounded to it as they are appended)."""

    def __init__(self, path: str | Path, dim: int, dtype: str = "float32"):
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        self.path, self.dim, self.rows, self.descr = Path(path), int(dim), 0, DTYPES[dtype]

    def __enter__(self) -> "GrowingNpy":
        self._file = open(self.path, "wb")
        self._file.write(_header(0, self.dim, self.descr))
        return self

    def append(self, rows: np.ndarray) -> None:
        rows = np.ascontiguousarray(rows, dtype=self.descr).reshape(-1, self.dim)
        self._file.write(rows.tobytes())
        self.rows += len(rows)

    def extend_from(self, array: np.ndarray, chunk: int = 65536) -> None:
        """Append the rows of another (memory-mapped) array, ``chunk`` rows at a time."""
        for start in range(0, len(array), chunk):
            self.append(np.asarray(array[start:start + chunk]))

    def __exit__(self, *exc) -> None:
        try:
            if exc[0] is None:
                self._file.seek(0)
                self._file.write(_header(self.rows, self.dim, self.descr))
        finally:
            self._file.close()
