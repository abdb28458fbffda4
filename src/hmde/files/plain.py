"""Plain text files as one document each: UTF-8 (a byte-order mark dropped), paragraphs kept; a file of binary bytes or
another encoding is refused, naming it."""

from __future__ import annotations

from pathlib import Path

from .extracted import Extracted, FileRefused, Part

BINARY_SHARE = 0.01  # NUL and other control bytes beyond this share of the first block: not text


def decoded(path: Path, data: bytes, what: str = "text") -> str:
    """``data`` as text, or :class:`FileRefused` naming ``path``: binary bytes, or bytes that are not UTF-8."""
    head = data[:8192]
    controls = sum(1 for b in head if b < 32 and b not in (9, 10, 12, 13))
    if b"\x00" in head or (head and controls / len(head) > BINARY_SHARE):
        raise FileRefused(path, f"binary data, not {what} (a NUL or control bytes in its first block)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileRefused(path, f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})",
                          "convert the file to UTF-8") from None
    return text[1:] if text.startswith("\ufeff") else text


def paragraphs(text: str) -> list[str]:
    """The paragraphs of a text: runs of lines between blank lines, their line breaks kept (the segmenter reads a
    line that ends without punctuation as a heading)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    out, lines = [], []
    for line in text.split("\n") + [""]:
        if line.strip():
            lines.append(line.rstrip())
        elif lines:
            out.append("\n".join(lines).strip())
            lines = []
    return out


def read_text_file(path: Path) -> Extracted:
    text = decoded(path, path.read_bytes())
    return Extracted([Part(p) for p in paragraphs(text)])
