"""Whether an index's search fits the machine's memory, said before a build starts (issue 96): a flat index holds
every sentence vector in memory to search (16M sentences of a million documents: 24.6 GB, on a 24 GB machine). A
collection whose flat index would not fit is refused in one line naming the memory it needs and the flag that fits
(``--type ivfpq``: ``--pq-m`` bytes a vector) before any model work. The sentences are estimated from the texts'
length (dev data: 148 characters a unit on XQuAD's Wikipedia, about 110 on news; 120 is taken); the machine's memory
is its physical memory, or ``HMDE_MEMORY_BYTES`` (planning for another machine)."""

from __future__ import annotations

import os

from ..errors import HmdeError

CHARS_PER_SENTENCE = 120
USABLE = 0.9  # of the memory a search may take (the process, DuckDB and the model need the rest)
MEMORY_VARIABLE = "HMDE_MEMORY_BYTES"


def machine_memory() -> int:
    given = os.environ.get(MEMORY_VARIABLE, "").strip()
    if given:
        try:
            value = int(float(given))
        except ValueError:
            value = 0
        if value <= 0:
            raise HmdeError(f"{MEMORY_VARIABLE} must be a number of bytes > 0, got {given!r}")
        return value
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def gb(n: float) -> str:
    """A size as people read it: 24.6 GB, 123 MB, 98 kB."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:,.1f} {unit}" if unit == "GB" else f"{n / size:,.0f} {unit}"
    return f"{int(n)} bytes"


def check_fits(index_type: str, multi_vector: bool, documents: int, text_chars: int, dim: int, pq_m: int = 96,
               held_sentences: int = 0, where: str = "the collection", sentence_bytes: int = 4) -> None:
    """Refuse a flat index whose search would not fit in memory (``held_sentences``: those an index being added to
    holds already; ``sentence_bytes``: 4 a number, 2 for float16 sentence vectors), naming what it needs and what
    fits."""
    if index_type != "flat":
        return
    sentences = (text_chars // CHARS_PER_SENTENCE + documents if multi_vector else 0) + held_sentences
    need = documents * dim * 4 + sentences * dim * sentence_bytes
    have = machine_memory()
    if need <= USABLE * have:
        return
    compressed = (documents + sentences) * (pq_m + 8)
    half = documents * dim * 4 + sentences * dim * 2  # float16 sentence vectors, where they are not already
    smaller = f"--sentence-dtype float16 (about {gb(half)}) or " if sentence_bytes == 4 and sentences and \
        half <= USABLE * have else ""
    raise HmdeError(f"{where}: a flat index of {documents:,} documents (about {sentences:,} sentence vectors) needs "
                    f"about {gb(need)} of memory to search, this machine has {gb(have)}: build it with {smaller}"
                    f"--type ivfpq (about {gb(compressed)}; --pq-m {pq_m} bytes a vector), or on a machine with more "
                    "memory")


def check_records_fit(meta, records, where: str) -> None:
    """:func:`check_fits` for a new index's ``records`` (in memory: Python's :meth:`hmde.Index.create`)."""
    if meta.store:
        return
    chars = sum(len(r.text) if isinstance(r.text, str) else sum(map(len, r.text)) for r in records)
    check_fits(meta.index_type, bool(meta.multi_vector), len(records), chars, meta.dim, meta.pq_m or 96, 0, where,
               sentence_bytes(meta))


def sentence_bytes(meta) -> int:
    """The bytes of one stored sentence vector's number: its ``sentence_dtype``'s (float16: 2; float32, and an index
    stored in Milvus: 4)."""
    import numpy as np

    return np.dtype(getattr(meta, "sentence_dtype", "float32")).itemsize
