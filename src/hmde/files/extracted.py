"""What a reader takes out of one file: its text in parts (a paragraph, a heading, a page's text), each with where it
stands (page, section), and the file's own title and language where it says them."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InputError


@dataclass
class Part:
    """A run of a document's text: a paragraph or heading, with the page it is on (PDF) and the heading above it."""

    text: str
    page: int | None = None
    section: str | None = None


@dataclass
class Extracted:
    """One file's text as its reader found it."""

    parts: list[Part] = field(default_factory=list)
    title: str | None = None
    lang: str | None = None  # as the file says it (<html lang>, a Word file's language), else detected later
    pages: int | None = None  # a PDF's page count


class FileRefused(InputError):
    """A file hmde cannot read as a document (encrypted, corrupt, empty, scanned, binary, too large): one line
    naming it and why; ``reason`` is the short form a list of skipped files shows."""

    def __init__(self, path, reason: str, advice: str = ""):
        super().__init__(reason + (f"; {advice}" if advice else ""), str(path))
        self.reason = reason


def needs_extra(module: str, what: str) -> InputError:
    """The error when the library that reads ``what`` files is not installed: it names the extra that brings it."""
    return InputError(f"reading {what} files needs the {module} package: pip install 'hmde[files]'")
