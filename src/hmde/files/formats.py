"""Which reader reads which file, the limits every file meets first (size, emptiness), and the extracted text kept
for a second pass of one run (the command line checks every input before it embeds, then reads it again)."""

from __future__ import annotations

import threading
from pathlib import Path

from ..errors import InputError
from .extracted import Extracted, FileRefused

# suffix -> the format a document file is read as (its metadata's "format")
FORMATS = {".pdf": "pdf", ".html": "html", ".htm": "html", ".xhtml": "html", ".docx": "docx", ".md": "markdown",
           ".markdown": "markdown", ".txt": "text", ".text": "text"}
MAX_FILE_BYTES = 256 * 2**20  # a file larger than this is refused before it is read (--max-file-mb)
_KEPT_CHARS = 256 * 2**20  # extracted text kept for the next pass of one run, at most
_kept: dict[tuple, Extracted] = {}
_kept_chars = [0]
_lock = threading.Lock()


def file_format(path: Path) -> str | None:
    """The format ``path`` is read as, or None where no reader reads it."""
    return FORMATS.get(path.suffix.lower())


def _reader(fmt: str):
    if fmt == "pdf":
        from .pdf import read_pdf
        return read_pdf
    if fmt == "html":
        from .html import read_html
        return read_html
    if fmt == "docx":
        from .word import read_docx
        return read_docx
    if fmt == "markdown":
        from .markdown import read_markdown
        return read_markdown
    from .plain import read_text_file
    return read_text_file


def read_file(path: Path, max_bytes: int = MAX_FILE_BYTES, keep: bool = False) -> Extracted:
    """``path``'s text by its format's reader; :class:`FileRefused` (one line naming the file) where it is too large,
    empty, or its reader cannot read it or finds no text. ``keep``: kept for a second read of this file unchanged
    (a command's two passes; a server's uploads and Python's writes keep nothing)."""
    fmt = file_format(path)
    if fmt is None:
        raise FileRefused(path, f"no reader for {path.suffix or 'files without a suffix'}")
    try:
        stat = path.stat()
    except OSError as exc:
        raise FileRefused(path, f"cannot read ({exc.strerror or exc})") from None
    if stat.st_size > max_bytes:
        raise FileRefused(path, f"too large ({stat.st_size / 2**20:,.1f} MiB; at most {max_bytes / 2**20:,.0f} MiB)",
                          "--max-file-mb raises the limit")
    if stat.st_size == 0:
        raise FileRefused(path, "an empty file")
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    with _lock:
        if key in _kept:
            return _kept[key]
    try:
        extracted = _reader(fmt)(path)
    except FileRefused:
        raise
    except InputError as exc:  # a reader's library not installed (the extra that brings it): no bad file
        raise InputError(str(exc), str(path)) from None
    except OSError as exc:
        raise FileRefused(path, f"cannot read ({exc.strerror or exc})") from None
    except Exception as exc:  # a reader's own failure on a damaged file: one line, never its traceback
        raise FileRefused(path, f"not a readable {fmt} file ({type(exc).__name__}: "
                                f"{(str(exc).splitlines() or [''])[0][:160]})") from None
    if not any(p.text.strip() for p in extracted.parts):
        raise FileRefused(path, "no text in it")
    size = sum(len(p.text) for p in extracted.parts)
    with _lock:
        if keep and _kept_chars[0] + size <= _KEPT_CHARS:
            _kept[key] = extracted
            _kept_chars[0] += size
    return extracted
