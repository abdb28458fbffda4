"""The one reading layer: any input a user names (a folder, a PDF, HTML, Word, Markdown or text file, or documents
already shaped as JSONL, TSV, Parquet or one-per-line text) becomes :class:`~hmde.io.documents.DocumentRecord`s.
The command line (``index build|add|upsert|sync``, ``encode``, ``align``, ``classify``), ``hmde.Index`` and the
server's upload route all read through :func:`read_inputs`.

A file document's id is its path relative to the folder it was found in (a file named alone: its name); its metadata
holds ``path``, ``title``, ``format``, ``sha256`` and ``bytes`` (a PDF also ``pages``), the places of its pages and
sections (:mod:`hmde.files.places`), and, where it came from a folder, that folder's key (``hmde_folder``: a digest
of its real path, which ``index sync`` reads: documents from elsewhere are never its to delete)."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

from ..errors import InputError
from ..io.documents import DocumentRecord, check_metadata, input_format, read_documents
from .extracted import FileRefused
from .folders import folder_files
from .formats import MAX_FILE_BYTES, file_format, read_file
from .places import PLACES_KEY, assemble

FOLDER_KEY = "hmde_folder"
STRUCTURED = (".jsonl", ".jsonl.gz", ".json.gz", ".tsv", ".tsv.gz", ".txt.gz", ".parquet")
KINDS = ".pdf, .html, .docx, .md or .txt"


@dataclass
class ReadOptions:
    """How inputs are read: the fields of structured files, how a ``.txt`` named alone is read (``lines``: one
    document per line, as before; ``document``: the file is one document; a folder's are always documents), what a
    bad file does (``stop``: the run stops before anything is written; ``skip``: it is listed and passed over), and
    the largest file read."""

    text_field: str = "text"
    id_field: str = "doc_id"
    lang_field: str | None = "lang"
    keep_fields: Sequence[str] = ()
    txt: str = "lines"
    on_error: str = "stop"
    max_bytes: int = MAX_FILE_BYTES
    keep_text: bool = False  # a file's text kept for a second read in this process (the command line's two passes)

    def __post_init__(self):
        if self.txt not in ("lines", "document"):
            raise InputError(f"txt must be lines or document, got {self.txt!r}")
        if self.on_error not in ("stop", "skip"):
            raise InputError(f"on_error must be stop or skip, got {self.on_error!r}")


@dataclass
class ReadReport:
    """What a read found besides its documents: for the summary line of every door."""

    files: int = 0
    pages: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file, reason)
    other_kinds: Counter = field(default_factory=Counter)
    links_out: list[str] = field(default_factory=list)
    line_files: list[str] = field(default_factory=list)  # .txt files read one document per line

    def lines(self) -> list[str]:
        """What a summary says of this read, one line each (nothing where there is nothing to say)."""
        out = []
        if self.skipped:
            shown = "; ".join(f"{p} ({r})" for p, r in self.skipped[:10])
            more = f"; and {len(self.skipped) - 10} more" if len(self.skipped) > 10 else ""
            out.append(f"skipped {len(self.skipped)} file(s): {shown}{more}")
        if self.other_kinds:
            kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.other_kinds.items()))
            out.append(f"left out {sum(self.other_kinds.values())} file(s) no reader reads ({kinds}); readers: {KINDS}")
        if self.links_out:
            out.append(f"did not follow {len(self.links_out)} link(s) leaving the folder: "
                       + ", ".join(self.links_out[:5]) + (" ..." if len(self.links_out) > 5 else ""))
        for path in self.line_files:
            out.append(f"read {path} as one document per line (blank lines skipped; --txt document reads it as one "
                       "document)")
        return out


def as_paths(inputs) -> list[Path]:
    if isinstance(inputs, (str, Path)):
        return [Path(inputs)]
    paths = [Path(p) for p in inputs]
    if not paths:
        raise InputError("no input named")
    return paths


def is_structured(path: Path, options: ReadOptions) -> bool:
    """Whether ``path`` holds documents already shaped (one per record) rather than being one document."""
    name = path.name.lower()
    return name.endswith(STRUCTURED) or (name.endswith(".txt") and options.txt == "lines")


def file_record(path: Path, doc_id: str, options: ReadOptions, folder: Path | None = None) -> DocumentRecord:
    """One document file as a record (:class:`FileRefused` where it cannot be one)."""
    extracted = read_file(path, options.max_bytes, options.keep_text)
    text, places = assemble(extracted)
    data = path.read_bytes()
    metadata = {"path": doc_id, "title": extracted.title or Path(doc_id).stem, "format": file_format(path),
                "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    if extracted.pages is not None:
        metadata["pages"] = extracted.pages
    if places:
        metadata[PLACES_KEY] = places
    if folder is not None:
        metadata[FOLDER_KEY] = folder_key(folder)
    check_metadata(metadata, str(path))
    return DocumentRecord(doc_id, text, file_language(extracted.lang), metadata, None, str(path))


def folder_key(folder: Path) -> str:
    """Which folder a document came from, as ``index sync`` knows it: a digest of the folder's real path (the path
    itself stays on the machine that read it: a served index's hits go to clients)."""
    return "folder-" + hashlib.sha256(str(Path(folder).resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:16]


def file_language(lang: str | None) -> str | None:
    """A file's own language tag (``de-DE``, ``en``) as hmde's data writes languages (ISO 639-3: ``deu``), or None
    where it names none (then the index detects it, as for documents given without one)."""
    from ..io.documents import is_language_tag
    from ..text.coverage import iso639_3

    if not lang or not is_language_tag(lang):
        return None
    return iso639_3(lang) or None


def read_inputs(inputs, options: ReadOptions | None = None, report: ReadReport | None = None,
                progress: Callable[[str, int], None] | None = None) -> Iterator[DocumentRecord]:
    """Every document of ``inputs`` (one path or several), in order; ``report`` gathers what was skipped and left
    out; ``progress(file, pages)`` after each document file."""
    options = options or ReadOptions()
    report = report if report is not None else ReadReport()
    for path in as_paths(inputs):
        if not path.exists():
            raise InputError("file not found" if path.suffix else "file or folder not found", str(path))
        if path.is_dir():
            found = folder_files(path)
            report.other_kinds.update(found.other_kinds)
            report.links_out.extend(found.links_out)
            if not found.files:
                kinds = f" (it holds {', '.join(sorted(found.other_kinds))})" if found.other_kinds else ""
                raise InputError(f"the folder holds no document files{kinds}; readers: {KINDS}, or documents as "
                                 ".jsonl/.tsv/.parquet", str(path))
            for file, rel in found.files:
                yield from _one_file(file, rel, options, report, progress, path)
        elif is_structured(path, options):
            if path.name.lower().endswith(".txt"):
                report.line_files.append(str(path))
            for record in read_documents(path, options.text_field, options.id_field, options.lang_field,
                                         options.keep_fields):
                record.source = str(path)
                yield record
        elif file_format(path) is not None:
            yield from _one_file(path, path.name, options, report, progress, None)
        else:
            try:
                input_format(path)
            except InputError:
                raise InputError(f"unknown input format; give a folder, a document file ({KINDS}) or documents "
                                 "as .jsonl, .jsonl.gz, .tsv or .parquet", str(path)) from None


def read_files(files, options: ReadOptions, report: ReadReport, progress=None, folder: Path | None = None):
    """The documents of ``files`` (``(path, id)`` pairs, found in ``folder``), as a folder's are read."""
    for path, rel in files:
        yield from _one_file(path, rel, options, report, progress, folder)


def _one_file(path: Path, doc_id: str, options: ReadOptions, report: ReadReport, progress, folder):
    try:
        record = file_record(path, doc_id, options, folder)
    except FileRefused as refused:
        if options.on_error == "stop":
            raise InputError(f"{refused}; --on-error skip indexes the other files") from None
        report.skipped.append((doc_id if folder is not None else str(path), refused.reason))
        return
    report.files += 1
    report.pages += record.extra.get("pages") or 0
    if progress is not None:
        progress(doc_id, record.extra.get("pages") or 0)
    yield record
