"""Read document collections from JSONL(.gz), TSV, TXT or Parquet files.

Every problem is reported as an :class:`~hmde.errors.InputError` naming the file,
the line and the field, so a user can fix the input without reading a traceback.
"""

from __future__ import annotations

import gzip
import json
import zlib
from functools import lru_cache
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Sequence, Union

from ..errors import InputError

Text = Union[str, list]


MAX_ID_CHARS = 1000  # the longest document id, for every way in: files, Python's documents and the server
ALL_FIELDS = ("*",)  # keep_fields: every field besides the id, the text and the language (a document's metadata)

@dataclass
class DocumentRecord:
    """One document: its id, its text (a string, or a list of pre-split sentences) and language."""

    doc_id: str
    text: Text
    lang: str | None = None
    extra: dict = field(default_factory=dict)
    line: int | None = None  # where it is in its file (line, or row of a Parquet file), for error messages
    source: str | None = None  # the file it came from, where inputs were several (hmde.files.inputs)


class CheckedLines:
    """A text file's lines, where undecodable bytes, a fake or truncated gzip stream and read
    errors become one :class:`InputError` naming the file and line instead of a traceback."""

    def __init__(self, path: Path, handle):
        self.path, self.handle, self.line = path, handle, 0

    def __enter__(self) -> "CheckedLines":
        return self

    def __exit__(self, *exc) -> None:
        self.handle.close()

    def close(self) -> None:
        self.handle.close()

    def __iter__(self):
        return self

    def __next__(self) -> str:
        try:
            raw = next(self.handle)  # bytes, decoded line by line so that an error names its line
            text = raw.decode("utf-8")
        except StopIteration:
            raise
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x}); convert the file to UTF-8",
                             str(self.path), self.line + 1) from None
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
            raise InputError(f"not a complete gzip file ({exc})", str(self.path), self.line + 1) from None
        except OSError as exc:
            raise InputError(f"cannot read ({exc.strerror or exc})", str(self.path), self.line + 1) from None
        self.line += 1
        if self.line == 1 and text.startswith("\ufeff"):  # a UTF-8 byte-order mark (Windows tools write one)
            text = text[1:]
        return text[:-2] + "\n" if text.endswith("\r\n") else text

    def read(self) -> str:
        return "".join(self)


def open_text(path: str | Path) -> CheckedLines:
    """Open a UTF-8 text file for reading by lines, transparently un-gzipping ``.gz`` files."""
    path = Path(path)
    if not path.exists():
        raise InputError("file not found", path=str(path))
    if path.is_dir():
        raise InputError("is a folder, expected a file", path=str(path))
    try:
        if path.suffix == ".gz":
            return CheckedLines(path, gzip.open(path, "rb"))
        return CheckedLines(path, open(path, "rb"))
    except OSError as exc:
        raise InputError(f"cannot open ({exc.strerror or exc})", path=str(path)) from None


def input_format(path: str | Path) -> str:
    name = Path(path).name.lower()
    for suffix, fmt in ((".jsonl.gz", "jsonl"), (".jsonl", "jsonl"), (".json.gz", "jsonl"), (".tsv.gz", "tsv"),
                        (".tsv", "tsv"), (".txt.gz", "txt"), (".txt", "txt"), (".parquet", "parquet")):
        if name.endswith(suffix):
            return fmt
    raise InputError("unknown input format; expected .jsonl, .jsonl.gz, .tsv, .txt or .parquet", path=str(path))


def _check_text(value, path, line, name) -> Text:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return value
    raise InputError(f"must be a string or a list of strings, got {type(value).__name__}", str(path), line, name)


def _doc_id(value, path, line_no, field: str) -> str:
    """A string, or a whole number written as one; null, booleans, floats and objects are refused
    (``str(None)`` would silently make every null id the document "None")."""
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    got = "null" if value is None else "empty" if isinstance(value, str) else type(value).__name__
    raise InputError(f"the id must be a non-empty string or a whole number, got {got}", str(path), line_no, field)


def _read_jsonl(path, text_field, id_field, lang_field, keep_fields) -> Iterator[DocumentRecord]:
    with open_text(path) as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"malformed JSON ({exc.msg} at column {exc.colno})", str(path), line_no) from None
            if not isinstance(obj, dict):
                raise InputError("each line must be a JSON object", str(path), line_no)
            if text_field not in obj:
                raise InputError("missing field (use --text-field to name another)", str(path), line_no, text_field)
            if id_field not in obj:
                raise InputError("missing field (use --id-field to name another)", str(path), line_no, id_field)
            lang = obj.get(lang_field) if lang_field else None
            if lang is not None and not isinstance(lang, str):
                raise InputError("must be a string", str(path), line_no, lang_field)
            extra = {k: v for k, v in obj.items() if k not in (text_field, id_field, lang_field)} \
                if keep_fields == ALL_FIELDS else {k: obj[k] for k in keep_fields if k in obj}
            yield DocumentRecord(_doc_id(obj[id_field], path, line_no, id_field),
                                 _check_text(obj[text_field], path, line_no, text_field), lang, extra, line_no)


def _read_tsv(path) -> Iterator[DocumentRecord]:
    with open_text(path) as f:
        for line_no, line in enumerate(f, 1):
            line = line.rstrip("\n").rstrip("\r")
            if not line.strip():
                continue
            if "\t" not in line:
                raise InputError("expected 'id<TAB>text', found no tab", str(path), line_no)
            doc_id, text = line.split("\t", 1)
            if not doc_id.strip():
                raise InputError("empty id", str(path), line_no, "id")
            yield DocumentRecord(doc_id, text, line=line_no)


def _read_txt(path) -> Iterator[DocumentRecord]:
    """One document per line, its id the line number; a blank line is no document (it was an empty one)."""
    with open_text(path) as f:
        for line_no, line in enumerate(f, 1):
            if line.strip():
                yield DocumentRecord(str(line_no), line.rstrip("\n"), line=line_no)


def _read_parquet(path, text_field, id_field, lang_field, keep_fields) -> Iterator[DocumentRecord]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(str(path))
    except Exception as exc:
        raise InputError(f"cannot read Parquet ({exc})", str(path)) from None
    names = pf.schema_arrow.names
    for needed in (text_field, id_field):
        if needed not in names:
            raise InputError(f"missing column (columns: {names})", str(path), None, needed)
    if keep_fields == ALL_FIELDS:
        keep_fields = tuple(n for n in names if n not in (text_field, id_field, lang_field))
    columns = [c for c in {text_field, id_field, lang_field, *keep_fields} if c and c in names]
    row = 0
    for batch in pf.iter_batches(columns=columns):
        for rec in batch.to_pylist():
            row += 1
            yield DocumentRecord(
                _doc_id(rec[id_field], path, row, id_field),
                _check_text(rec[text_field], path, row, text_field),
                rec.get(lang_field) if lang_field else None,
                {k: json_safe(rec[k]) for k in keep_fields if k in rec},
                row,
            )


_WARNED_LANGS: set[tuple[str, str]] = set()


def json_safe(value):
    """A Parquet value as JSON holds it (a document's metadata is kept as JSON): dates and times as ISO strings,
    decimals as numbers, bytes as text (UTF-8, else dropped), lists and structs element by element."""
    import datetime
    import decimal

    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


@lru_cache(maxsize=4096)  # asked once per document of a collection; a collection has few distinct codes
def is_language_tag(lang: str) -> bool:
    """A code or tag that names a language (ISO 639-1/-3, BCP-47; ``_`` as in ``zho_Hans`` read as
    ``-``): ``en``, ``eng``, ``por_BR``, ``npi_Deva``; not ``xx``, ``!!`` or blanks."""
    import langcodes

    try:
        return bool(lang.strip()) and langcodes.tag_is_valid(lang.strip().replace("_", "-"))
    except (ValueError, LookupError, langcodes.tag_parser.LanguageTagError):
        return False


def surrogate_at(text: str) -> int | None:
    """Where ``text`` holds a lone surrogate (``\\ud800`` from a JSON escape: no UTF-8 encodes it, and tokenizers,
    DuckDB and Milvus fail on it), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def _checked(records: Iterable[DocumentRecord], path, text_field: str, id_field: str, lang_field: str | None):
    """Every format's records, checked where JSON escapes and Parquet types can break what comes later:
    text and ids must be encodable UTF-8 (a lone surrogate ``\\ud800`` failed after the model loaded),
    a language must be a string, and one that is no language tag (``xx``, ``!!``) is read as unknown,
    with one warning per value naming its first line."""
    import sys

    for r in records:
        check_metadata(r.extra, str(path), r.line)
        if len(r.doc_id) > MAX_ID_CHARS:
            raise InputError(f"the id is {len(r.doc_id):,} characters long; ids hold at most {MAX_ID_CHARS:,} (one limit "
                             "for files, Python and the server)", str(path), r.line, id_field)
        for name, value in ((id_field, r.doc_id), (text_field, r.text)):
            for s in ([value] if isinstance(value, str) else value):
                bad = surrogate_at(s)
                if bad is not None:
                    raise InputError(f"holds a lone surrogate (U+{ord(s[bad]):04X}, from a JSON escape): not text; "
                                     "fix or drop it", str(path), r.line, name)
        if r.lang is not None:
            if not isinstance(r.lang, str):
                raise InputError(f"must be a string (a language code), got {type(r.lang).__name__}", str(path),
                                 r.line, lang_field)
            if not is_language_tag(r.lang):
                if (str(path), r.lang) not in _WARNED_LANGS:  # once per run, though inputs are read twice
                    _WARNED_LANGS.add((str(path), r.lang))
                    print(f"hmde: warning: {path}, line {r.line}, field '{lang_field}': {r.lang!r} is no language "
                          "code; read as unknown", file=sys.stderr)
                r.lang = None
        yield r


def read_documents(
    path: str | Path,
    text_field: str = "text",
    id_field: str = "doc_id",
    lang_field: str | None = "lang",
    keep_fields: Sequence[str] = (),
    allow_empty_file: bool = False,
) -> Iterator[DocumentRecord]:
    """Yield the documents of one file, in file order.

    Formats: ``.jsonl``/``.jsonl.gz`` (fields as named; the text may be a list of
    sentences), ``.tsv`` (id, text), ``.txt`` (one document per line, ids are line
    numbers), ``.parquet`` (columns as named). An empty file is an error unless
    ``allow_empty_file``.
    """
    fmt = input_format(path)
    if fmt == "jsonl":
        it = _read_jsonl(path, text_field, id_field, lang_field, keep_fields)
    elif fmt == "tsv":
        it = _read_tsv(path)
    elif fmt == "txt":
        it = _read_txt(path)
    else:
        it = _read_parquet(path, text_field, id_field, lang_field, keep_fields)
    it = _checked(it, path, text_field if fmt in ("jsonl", "parquet") else "text",
                  id_field if fmt in ("jsonl", "parquet") else "id", lang_field)
    empty = True
    for record in it:
        empty = False
        yield record
    if empty and not allow_empty_file:
        raise InputError("the file holds no documents", str(path))


def check_unique_ids(records: Iterable[DocumentRecord], path: str | Path,
                     id_field: str = "doc_id") -> dict[str, int | None]:
    """Refuse an input whose ids repeat (rows of vectors and hits are known by id), naming both places (lines, or the
    files two inputs' documents came from).

    Streams: only each id and its line are kept (returned, in input order)."""
    first: dict[str, int | None] = {}
    sources: dict[str, str] = {}
    for r in records:
        if r.doc_id in first:
            where = f"on line {first[r.doc_id]}" if first[r.doc_id] is not None \
                else "by " + sources.get(r.doc_id, "another input")
            if r.doc_id in sources and first[r.doc_id] is not None and sources[r.doc_id] != str(r.source or path):
                where += f" of {sources[r.doc_id]}"
            raise InputError(f"the id '{r.doc_id}' was already used {where}; ids must be unique",
                             str(r.source or path), r.line, id_field if r.line is not None else None)
        first[r.doc_id] = r.line
        if r.source is not None:
            sources[r.doc_id] = r.source
    return first


def is_empty_text(text: Text) -> bool:
    if isinstance(text, str):
        return not text.strip()
    return not any(s.strip() for s in text)


def records_from(documents: Iterable, where: str = "documents") -> list[DocumentRecord]:
    """Documents given as values (Python's :meth:`hmde.Index.add`, a server's request body) as checked records:
    each a :class:`DocumentRecord` or a mapping with ``doc_id`` (a non-empty string or a whole number), ``text``
    (a string or a list of sentences) and an optional ``lang`` (a language code); every other key is the
    document's metadata (JSON values: title, url, date...); ids unique. A bad one is an
    :class:`InputError` naming it as ``documents[i]`` and its field."""
    out: list[DocumentRecord] = []
    seen: dict[str, int] = {}
    if isinstance(documents, (str, bytes)) or isinstance(documents, dict):
        raise InputError("must be a list of documents", where)
    for i, doc in enumerate(documents):
        at = f"{where}[{i}]"
        given = None  # a record's metadata as given: its keys may be doc_id, text or lang too (a framework's)
        if isinstance(doc, DocumentRecord):
            doc, given = {"doc_id": doc.doc_id, "text": doc.text, "lang": doc.lang}, dict(doc.extra)
        if not hasattr(doc, "get"):
            raise InputError(f"must be an object with doc_id and text, got {type(doc).__name__}", at)
        if "doc_id" not in doc:
            raise InputError("missing field", at, field="doc_id")
        doc_id = _doc_id(doc.get("doc_id"), at, None, "doc_id")
        if len(doc_id) > MAX_ID_CHARS or "\n" in doc_id or "\r" in doc_id:
            raise InputError(f"the id must be one line of at most {MAX_ID_CHARS:,} characters", at, field="doc_id")
        if "text" not in doc:
            raise InputError("missing field", at, field="text")
        text = _check_text(doc.get("text"), at, None, "text")
        for name, strings in (("doc_id", [doc_id]), ("text", [text] if isinstance(text, str) else text)):
            for s in strings:
                bad = surrogate_at(s)
                if bad is not None:
                    raise InputError(f"holds a lone surrogate (U+{ord(s[bad]):04X}): not text", at, field=name)
        lang = doc.get("lang")
        if lang is not None and (not isinstance(lang, str) or not is_language_tag(lang)):
            raise InputError(f"must be a language code (en, deu, zh-Hant...), got {lang!r}", at, field="lang")
        if doc_id in seen:
            raise InputError(f"the id '{doc_id}' was already used by {where}[{seen[doc_id]}]; ids must be unique", at,
                             field="doc_id")
        seen[doc_id] = i
        metadata = given if given is not None else {str(k): v for k, v in doc.items()
                                                    if k not in ("doc_id", "text", "lang")}
        check_metadata(metadata, at)
        out.append(DocumentRecord(doc_id, text, lang or None, metadata))
    return out


def check_metadata(metadata, where: str, line: int | None = None) -> None:
    """A document's metadata must be JSON (what the index stores and filters): refused naming the field."""
    if not metadata:
        return
    for key, value in metadata.items():
        try:
            json.dumps(value, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InputError(f"metadata must be JSON values ({exc})", where, line, str(key)) from None
        bad = _surrogate_inside(key, value)  # JSON lets them pass; UTF-8 (DuckDB, Milvus, HTTP) does not (issue 94)
        if bad is not None:
            raise InputError(f"holds a lone surrogate (U+{ord(bad):04X}): not text", where, line, str(key))


def _surrogate_inside(key, value) -> str | None:
    """The first lone surrogate in a metadata key or anywhere in its JSON value (keys of objects too), or None."""
    stack = [key, value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            at = surrogate_at(item)
            if at is not None:
                return item[at]
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return None
