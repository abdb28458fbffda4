"""Markdown files (and the Markdown trafilatura makes of a web page's main text), read with markdown-it-py: each
heading opens a section, the first heading is the title, the text of paragraphs, lists, quotes, tables and code kept
without its markup."""

from __future__ import annotations

from pathlib import Path

from .extracted import Extracted, Part
from .plain import decoded

def _inline_text(token) -> str:
    """An inline token's words without their markup: links and emphasis as their text, images as their alt text,
    soft breaks as spaces."""
    out = []
    for child in token.children or ():
        if child.type in ("text", "code_inline", "html_inline"):
            out.append(child.content if child.type != "html_inline" else "")
        elif child.type in ("softbreak", "hardbreak"):
            out.append("\n" if child.type == "hardbreak" else " ")
        elif child.type == "image":
            out.append(child.content)
    return "".join(out)


def markdown_parts(text: str) -> tuple[list[Part], str | None]:
    """``text``'s parts (each with the heading it stands under; a table's row is one part, its cells joined by
    " | ") and its first heading."""
    from markdown_it import MarkdownIt

    parts: list[Part] = []
    section, title, heading, row = None, None, False, None
    for token in MarkdownIt("commonmark").enable("table").parse(text):
        if token.type in ("heading_open", "heading_close"):
            heading = token.type == "heading_open"
        elif token.type in ("tr_open", "tr_close"):
            if token.type == "tr_close" and row:
                parts.append(Part(" | ".join(row), section=section))
            row = [] if token.type == "tr_open" else None
        elif token.type == "inline":
            words = _inline_text(token).strip()
            if not words:
                continue
            if row is not None:
                row.append(words)
            elif heading:
                section = words
                title = title or words
                parts.append(Part(words, section=section))
            else:
                parts.append(Part(words, section=section))
        elif token.type in ("fence", "code_block") and token.content.strip():
            parts.append(Part(token.content.strip(), section=section))
    return parts, title


def read_markdown(path: Path) -> Extracted:
    parts, title = markdown_parts(decoded(path, path.read_bytes(), "Markdown"))
    return Extracted(parts, title)
