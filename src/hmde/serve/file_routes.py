"""``POST /indexes/{name}/files`` (with ``--writable``): files uploaded as ``multipart/form-data`` (the field
``files``, once per file; ``mode``: add, upsert (default) or skip; ``on_error``: stop (default) or skip) read by the
one reading layer (:func:`hmde.files.inputs.file_record`), embedded by the batcher and committed as the documents
route commits. A file's name is its document's id and ``path`` (a client's name is only ever a name: the bytes are
read from a temporary file of the server's own, named by position); the body limit bounds the upload, and at most
``max_upload_files`` files come in one request."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path, PurePosixPath

from fastapi import Request

from ..errors import InputError
from ..files.extracted import FileRefused
from ..files.formats import file_format
from ..io.documents import MAX_ID_CHARS, surrogate_at
from .served import RequestError

FILES_ROUTE = "/indexes/{name}/files"


def upload_name(name: str | None, at: str) -> str:
    """A client's file name as a document id: a relative POSIX path without ``..``, control characters or a
    leading ``/``, of a suffix a reader reads."""
    if not name or not name.strip():
        raise RequestError(f"{at}: the part has no file name (send it as a file: filename=...)", at)
    clean = name.replace("\\", "/").strip()
    parts = PurePosixPath(clean).parts
    if clean.startswith("/") or ".." in parts or any(ord(c) < 32 for c in clean) or surrogate_at(clean) is not None \
            or len(clean) > MAX_ID_CHARS:
        raise RequestError(f"{at}: {name[:80]!r} is no file name hmde takes as an id (a relative path of at most "
                           f"{MAX_ID_CHARS:,} characters, without '..' or control characters)", at)
    if file_format(Path(clean)) is None:
        raise RequestError(f"{at}: {clean!r}: no reader for {PurePosixPath(clean).suffix or 'files without a suffix'} "
                           "(readers: .pdf, .html, .docx, .md, .txt)", at, 415)
    return clean


def add_file_routes(app, options, embed_and_commit, check_writable) -> None:
    @app.post(FILES_ROUTE)
    async def upload_files(name: str, request: Request):
        from ..files.inputs import ReadOptions, file_record

        target = check_writable(name)
        if not request.headers.get("content-type", "").startswith("multipart/form-data"):
            raise RequestError("send the files as multipart/form-data, each in a part named 'files'", "files", 415)
        try:
            form = await request.form(max_files=options.max_upload_files, max_fields=16)
        except Exception as exc:  # Starlette's MultiPartException: too many files, a malformed body
            raise RequestError(f"files: {exc}", "files", 400) from None
        mode = str(form.get("mode") or "upsert")
        on_error = str(form.get("on_error") or "stop")
        if mode not in ("add", "upsert", "skip"):
            raise RequestError(f"mode must be add, upsert or skip, got {mode!r}", "mode")
        if on_error not in ("stop", "skip"):
            raise RequestError(f"on_error must be stop or skip, got {on_error!r}", "on_error")
        uploads = form.getlist("files")
        if not uploads:
            raise RequestError("no files: send each in a part named 'files'", "files")
        names = []
        for i, upload in enumerate(uploads):
            if isinstance(upload, str):
                raise RequestError(f"files[{i}]: a text field, not a file", f"files[{i}]")
            names.append(upload_name(upload.filename, f"files[{i}]"))
        seen: dict[str, int] = {}
        for i, doc_id in enumerate(names):
            if doc_id in seen:
                raise RequestError(f"files[{i}]: {doc_id!r} was already sent as files[{seen[doc_id]}]", f"files[{i}]")
            seen[doc_id] = i
        contents = [await upload.read() for upload in uploads]

        def read_all():
            records, skipped = [], []
            read = ReadOptions(on_error=on_error, max_bytes=options.max_body_bytes)
            with tempfile.TemporaryDirectory(prefix="hmde-upload-") as folder:
                for i, (doc_id, data) in enumerate(zip(names, contents)):
                    path = Path(folder) / f"{i}{PurePosixPath(doc_id).suffix.lower()}"
                    path.write_bytes(data)
                    try:
                        record = file_record(path, doc_id, read)
                    except FileRefused as refused:
                        if on_error == "stop":
                            raise RequestError(f"files[{i}]: {doc_id}: {refused.reason}; nothing was written "
                                               "(on_error=skip writes the others)", f"files[{i}]", 422) from None
                        skipped.append({"file": doc_id, "reason": refused.reason})
                        continue
                    except InputError as exc:
                        raise RequestError(f"files[{i}]: {doc_id}: {exc}", f"files[{i}]", 422) from None
                    record.source = doc_id
                    records.append(record)
            return records, skipped

        records, skipped = await asyncio.to_thread(read_all)
        if not records:
            return {"index": name, "mode": mode, "documents": 0, "replaced": 0, "skipped_files": skipped}
        written, replaced, passed = await embed_and_commit(target, records, mode)
        return {"index": name, "mode": mode, "documents": len(records) - passed, "replaced": replaced,
                "live": written.live, "skipped_files": skipped} | ({"skipped": passed} if mode == "skip" else {})
