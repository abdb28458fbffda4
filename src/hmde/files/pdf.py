"""PDF files read with pypdfium2 (PDFium, Chrome's PDF engine): the text of each page in PDFium's reading order, its
page number kept; lines a page wrapped at its width are joined again, so that a sentence is one unit. An encrypted
file, a damaged one, or one without a text layer (a scan) is refused, naming it."""

from __future__ import annotations

import re
from pathlib import Path

from .extracted import Extracted, FileRefused, Part, needs_extra

FULL_LINE = 0.7  # a line at least this share of the page's longest goes on in the next (wrapped at the width)
_SENTENCE_END = tuple(".!?…。！？؟।:;")
_UNSPACED = re.compile("[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def unwrapped(page_text: str) -> list[str]:
    """A page's paragraphs: PDFium gives one line per printed line; a line nearly as long as the page's longest was
    wrapped there and goes on in the next (joined with a space, or nothing between characters of a script written
    without spaces, or a hyphen's halves joined where a lowercase letter follows it); a shorter line ends its
    paragraph (a heading, a paragraph's last line)."""
    lines = [line.strip() for line in page_text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    width = max((len(line) for line in lines), default=0)
    out, current = [], ""
    for line in lines:
        if not line:
            if current:
                out.append(current)
            current = ""
            continue
        if not current:
            current = line
        elif current.endswith("-") and line[:1].islower():
            current = current[:-1] + line
        elif _UNSPACED.match(current[-1]) and _UNSPACED.match(line[0]):
            current += line
        else:
            current += " " + line
        if len(line) < FULL_LINE * width or (line.endswith(_SENTENCE_END) and len(line) < 0.9 * width):
            out.append(current)
            current = ""
    if current:
        out.append(current)
    return out


def read_pdf(path: Path) -> Extracted:
    try:
        import pypdfium2 as pdfium
    except ImportError:
        raise needs_extra("pypdfium2", "PDF") from None
    try:
        document = pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as exc:
        message = str(exc)
        if "password" in message.lower():
            raise FileRefused(path, "an encrypted PDF (it asks for a password)",
                              "decrypt it first (qpdf --decrypt) or leave it out") from None
        raise FileRefused(path, f"not a readable PDF ({message.splitlines()[0] if message else 'damaged'})") from None
    parts: list[Part] = []
    try:
        count = len(document)
        for number in range(count):
            page = document[number]
            textpage = page.get_textpage()
            try:
                text = textpage.get_text_bounded()
            finally:
                textpage.close()
                page.close()
            parts.extend(Part(p, page=number + 1) for p in unwrapped(text) if p.strip())
        title = (document.get_metadata_dict().get("Title") or "").strip() or None
    finally:
        document.close()
    if count and not parts:
        raise FileRefused(path, f"no text layer in its {count} page(s) (a scan?)",
                          "run OCR on it first (ocrmypdf) or leave it out")
    return Extracted(parts, title, pages=count)
