"""POST /indexes/{name}/files on a real uvicorn server (issue 93): multipart uploads read by the same layer as the
command line's, committed as `hmde index upsert` commits; a client's file name is only ever an id (never a path the
server reaches); the limits (files a request, the body) and every refusal are a 4xx JSON naming the field."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("multipart")
import httpx  # noqa: E402

from document_files import ARTICLE_HTML, MARKDOWN, word_file  # noqa: E402
from hmde.cli.main import main  # noqa: E402
from hmde.serve.options import ServeOptions  # noqa: E402
from serve_helpers import ThreadServer  # noqa: E402


@pytest.fixture()
def served_index(tmp_path, hmde_dir):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "first.md").write_text("# First\n\nThe cat sat on the mat.\n", encoding="utf-8")
    index = tmp_path / "news"
    assert main(["index", "build", str(hmde_dir), str(docs), "-o", str(index), "--no-progress"]) == 0
    from hmde.serve.served import load_served

    return load_served(str(hmde_dir), [str(index)], "cpu"), index


def answer(response, status: int, field=None) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    if status >= 400:
        assert set(body["error"]) >= {"message", "param"} and body["error"]["param"] == field, body
        assert "Traceback" not in response.text
    return body


def test_uploads_are_indexed_as_files_and_searched_with_their_sections(served_index, tmp_path, hmde_dir):
    served, index = served_index
    word = word_file(tmp_path / "report.docx").read_bytes()
    with ThreadServer(served, ServeOptions(writable=True)) as running:
        url = running.url + "/indexes/news/files"
        body = answer(httpx.post(url, files=[("files", ("web/finale.html", ARTICLE_HTML.encode(), "text/html")),
                                             ("files", ("notes.md", MARKDOWN.encode(), "text/markdown")),
                                             ("files", ("report.docx", word, "application/octet-stream"))],
                                 timeout=60), 200)
        assert body == {"index": "news", "mode": "upsert", "documents": 3, "replaced": 0, "live": 4,
                        "skipped_files": []}
        hits = answer(httpx.post(running.url + "/search", json={
            "index": "news", "queries": ["Profits doubled compared with last year."], "top_k": 4}),
            200)["results"][0]["hits"]
        hit = next(h for h in hits if h["doc_id"] == "report.docx")
        first = hit["sentences"][0]
        start, end = first.pop("chars")  # where the sentence stands in the document's text
        assert first == {"text": "Profits doubled compared with last year.", "score": 1.0, "section": "Results"}
        assert hit["text"][start:end] == first["text"]
        assert hit["metadata"]["format"] == "docx" and "hmde_folder" not in hit["metadata"]
        again = answer(httpx.post(url, files=[("files", ("notes.md", b"# Notes\n\nChanged.", "text/markdown"))],
                                  data={"mode": "skip"}), 200)
        assert (again["documents"], again["skipped"]) == (0, 1)


def test_every_refusal_names_its_field_and_writes_nothing(served_index, tmp_path):
    served, index = served_index
    secret = tmp_path / "secret.md"
    secret.write_text("# Secret\n\nOn the server's disk.\n", encoding="utf-8")
    options = ServeOptions(writable=True, max_upload_files=2, max_body_bytes=64 * 1024)
    with ThreadServer(served, options) as running:
        url = running.url + "/indexes/news/files"

        def post(*files, **data):
            return httpx.post(url, files=[("files", f) for f in files], data=data or None, timeout=60)

        ok = ("a.md", b"# A\n\nText.", "text/markdown")
        for name in ("../up.md", str(secret), "a/../../b.md", "..\\windows.md"):
            body = answer(post((name, b"# X\n\nY.", "text/markdown")), 400, "files[0]")
            assert "no file name hmde takes as an id" in body["error"]["message"]
        assert "no reader for .png" in answer(post(ok, ("p.png", b"\x89PNG", "image/png")), 415,
                                              "files[1]")["error"]["message"]
        assert "Too many files" in answer(post(ok, ok, ok), 400, "files")["error"]["message"]
        assert "already sent as files[0]" in answer(post(ok, ok), 400, "files[1]")["error"]["message"]
        big = ("big.txt", b"word " * 20_000, "text/plain")
        assert answer(post(big), 413, "body")["error"]["message"].startswith("the request body is larger")
        body = answer(post(ok, ("cut.pdf", b"%PDF-1.4 cut short", "application/pdf")), 422, "files[1]")
        assert body["error"]["message"].startswith("files[1]: cut.pdf: not a readable PDF (")
        assert body["error"]["message"].endswith("; nothing was written (on_error=skip writes the others)")
        assert answer(httpx.post(url, json={"files": []}), 415, "files")
        assert "mode must be add, upsert or skip" in answer(post(ok, mode="replace"), 400, "mode")["error"]["message"]
        assert answer(httpx.get(running.url + "/indexes/news"), 200)["documents"] == 1  # nothing written
        skipped = answer(post(ok, ("cut.pdf", b"%PDF-1.4 cut short", "application/pdf"), on_error="skip"), 200)
        assert skipped["documents"] == 1 and [s["file"] for s in skipped["skipped_files"]] == ["cut.pdf"]
        # a name that is a path on the server's disk was refused above; a plain one reads only what was sent
        answer(post(("secret.md", b"# Sent\n\nWhat the client sent.", "text/markdown")), 200)
        found = httpx.post(running.url + "/indexes/news/documents/query", json={"ids": ["secret.md"]}).json()
        assert found["documents"][0]["text"] == "Sent\n\nWhat the client sent."
    with ThreadServer(served, ServeOptions()) as read_only:
        answer(httpx.post(read_only.url + "/indexes/news/files", files=[("files", ok)]), 403, None)
