"""PDF files read with pypdfium2 (PDFium, Chrome's PDF engine): the text of each page in PDFium's reading order, its
page number kept; lines a page wrapped at its width are joined again, so that a sentence is one unit. An encrypted
file, a damaged one, or one without a text layer (a scan) is refused, naming it."""

from __future__ import annotations

import re
from pathlib import Path

from .extracted import Extracted, FileRefused, Part, needs_extra

FULL_LINE = 0.7  # a line at least this share of the page's width goes on in the next (wrapped at the width)
_LAYOUT_HYPHEN = re.compile(r"(?<=[^\W\d_])\x02(?=([^\W\d_]))")  # between two letters (joined where lowercase)
_SENTENCE_END = tuple(".!?…。！？؟।:;")
_CLOSERS = "\"'”’»›)」』"
_UNSPACED = re.compile("[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def unwrapped(page_text: str) -> list[str]:
    """A page's paragraphs: PDFium gives one line per printed line; a line nearly as long as the page's width was
    wrapped there and goes on in the next (joined with a space; with nothing between characters of a script written
    without spaces and after a hyphen); a shorter line ends its paragraph (a heading, a paragraph's last line)."""
    # PDFium writes a hyphen at a line's end as U+0002 and joins the lines: a word split by the layout is joined
    # again ("Fuß-ball"), a hyphen of the text kept ("Pro Bowl-Cornerback")
    page_text = _LAYOUT_HYPHEN.sub(lambda m: "" if m.group(1).islower() else "-", page_text).replace("\x02", "-")
    lines = [line.strip() for line in page_text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    lengths = sorted(len(line) for line in lines if line)
    width = lengths[int(0.9 * (len(lengths) - 1))] if lengths else 0  # the page's width, robust to a joined line
    out, current = [], ""
    for line in lines:
        if not line:
            if current:
                out.append(current)
            current = ""
            continue
        if not current:
            current = line
        elif current.endswith("-") and current[-2:-1].isalnum() and line[:1].isalnum():
            current += line  # a hyphen of the text at the line's end (PDFium marks a layout's own as U+0002)
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
            paragraphs = [p for p in unwrapped(text) if p.strip()]
            if paragraphs and parts and not parts[-1].text.rstrip(_CLOSERS).endswith(_SENTENCE_END):
                # a sentence the page break cut goes on: one part, on the page it starts on
                parts[-1] = Part(parts[-1].text + " " + paragraphs.pop(0), page=parts[-1].page)
            parts.extend(Part(p, page=number + 1) for p in paragraphs)
        title = (document.get_metadata_dict().get("Title") or "").strip() or None
    finally:
        document.close()
    if count and not parts:
        raise FileRefused(path, f"no text layer in its {count} page(s) (a scan?)",
                          "run OCR on it first (ocrmypdf) or leave it out")
    return Extracted(parts, title, pages=count)
