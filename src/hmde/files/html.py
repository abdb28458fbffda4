"""Web pages read with trafilatura: the main text without navigation, headers, footers and other boilerplate, as
Markdown (its headings become sections); the ``<title>`` is the title and ``<html lang>`` the language."""

from __future__ import annotations

from pathlib import Path

from .extracted import Extracted, FileRefused, needs_extra
from .markdown import markdown_parts
from .plain import decoded


def page_title_and_lang(html: str) -> tuple[str | None, str | None]:
    import lxml.html

    try:
        root = lxml.html.fromstring(html)
    except (ValueError, lxml.etree.ParserError):
        return None, None
    titles = root.xpath("//title/text()")
    title = " ".join(titles[0].split()) if titles and titles[0].strip() else None
    lang = (root.get("lang") or root.get("xml:lang") or "").strip() or None
    return title, lang


def read_html(path: Path) -> Extracted:
    try:
        import trafilatura
    except ImportError:
        raise needs_extra("trafilatura", "HTML") from None
    html = decoded(path, path.read_bytes(), "HTML")
    main = trafilatura.extract(html, output_format="markdown", include_comments=False, include_tables=True,
                               include_images=False, include_links=False, favor_recall=True, deduplicate=False)
    if not main:  # a page trafilatura finds no main text in (a short one): every text of its body
        main = trafilatura.html2txt(html) or ""
    parts, heading = markdown_parts(main)
    title, lang = page_title_and_lang(html)
    if not parts and not html.strip():
        raise FileRefused(path, "empty")
    return Extracted(parts, title or heading, lang)
