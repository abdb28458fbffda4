"""Word files (.docx) read with python-docx: paragraphs and table rows in document order, headings (the Heading and
Title styles) opening sections; the file's title and language from its properties."""

from __future__ import annotations

import zipfile
from pathlib import Path

from .extracted import Extracted, FileRefused, Part, needs_extra


def _blocks(document):
    """The body's paragraphs and tables, in the order they stand."""
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    for child in document.element.body.iterchildren():
        tag = child.tag.rsplit("}", 1)[-1]
        if tag == "p":
            yield Paragraph(child, document)
        elif tag == "tbl":
            yield Table(child, document)


def read_docx(path: Path) -> Extracted:
    try:
        import docx
        from docx.opc.exceptions import PackageNotFoundError
    except ImportError:
        raise needs_extra("python-docx", "Word") from None
    try:
        document = docx.Document(str(path))
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        hint = " (encrypted files are not zip archives)" if path.read_bytes()[:4] == b"\xd0\xcf\x11\xe0" else ""
        raise FileRefused(path, f"not a readable Word file{hint} ({type(exc).__name__})") from None
    parts: list[Part] = []
    section, heading_title = None, None
    for block in _blocks(document):
        if hasattr(block, "rows"):
            for row in block.rows:
                cells = list(dict.fromkeys(c.text.strip() for c in row.cells if c.text.strip()))
                if cells:
                    parts.append(Part(" | ".join(cells), section=section))
            continue
        text = block.text.strip()
        if not text:
            continue
        style = (block.style.name if block.style is not None else "") or ""
        if style.startswith("Heading") or style == "Title":
            section = text
            heading_title = heading_title or text
        parts.append(Part(text, section=section))
    props = document.core_properties
    return Extracted(parts, (props.title or "").strip() or heading_title, (props.language or "").strip() or None)
