"""Documents as they are (issue 93): folders and PDF, HTML, Word, Markdown and text files read by one layer
(hmde.files.inputs) that every door calls; what each reader keeps (text, title, language, pages, sections); bad files
said in one line before anything is written; the old .txt trap; hits naming their file, page and section."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from document_files import CHINESE_TEXT, encrypted_pdf, mixed_folder, print_pdf, scanned_pdf, two_page_html
from hmde.cli.main import main
from hmde.errors import InputError
from hmde.files.extracted import Extracted, Part
from hmde.files.inputs import ReadOptions, ReadReport, read_inputs
from hmde.files.places import assemble, places_of, sentence_offsets


def records(paths, **options):
    report = ReadReport()
    return {r.doc_id: r for r in read_inputs(paths, ReadOptions(**options), report)}, report


def test_places_are_found_in_order_and_named_by_page_and_section():
    text, places = assemble(Extracted([Part("Title", 1, "Intro"), Part("One. Two.", 1, "Intro"),
                                       Part("Two. Three.", 2, "Results")]))
    assert text == "Title\n\nOne. Two.\n\nTwo. Three."
    assert places == {"pages": [[0, 1], [18, 2]], "sections": [[0, "Intro"], [18, "Results"]]}
    sentences = ["Title", "One.", "Two.", "Two.", "Three."]
    # the second "Two." is the one on page 2: sentences are found in order, not by their first occurrence
    assert sentence_offsets(text, sentences, 4) == [0, 7, 12, 18, 23]
    assert places_of(text, sentences, [3, 2, 0], {"hmde_places": places}) == [
        {"page": 2, "section": "Results", "chars": [18, 22]}, {"page": 1, "section": "Intro", "chars": [12, 16]},
        {"page": 1, "section": "Intro", "chars": [0, 5]}]
    assert text[18:22] == "Two." and places_of(text, ["Title", "Changed"], [1], {"hmde_places": places}) == [{}]
    assert places_of(text, sentences, [0], {}) == [{}]  # a document that came without places


def test_each_reader_keeps_the_text_title_language_and_places(tmp_path):
    mixed_folder(tmp_path, pdf=False)
    docs, report = records(tmp_path)
    assert sorted(docs) == ["notes.md", "report.docx", "web/finale.html", "zh.txt"]  # ids: paths in the folder
    html = docs["web/finale.html"]
    assert html.lang == "deu" and html.extra["title"] == "Das Finale" and html.extra["format"] == "html"
    assert "Impressum" not in html.text and "Rechte vorbehalten" not in html.text  # navigation and footer left out
    assert html.text.startswith("Das Finale in Berlin\n\nUnsere Mannschaft hat am Sonntag")
    assert [s for _, s in html.extra["hmde_places"]["sections"]] == ["Das Finale in Berlin", "Die Tore"]
    md = docs["notes.md"]
    assert md.extra["title"] == "Résultats de l'étude" and md.lang is None  # detected when indexed
    assert "**" not in md.text and "http" not in md.text and "Le premier résultat est clair: la pluie" in md.text
    assert [s for _, s in md.extra["hmde_places"]["sections"]] == ["Résultats de l'étude", "Méthodes"]
    word = docs["report.docx"]
    assert word.extra["title"] == "Quarterly report" and word.lang == "eng"
    assert "Region | Sales\n\nNorth | 120" in word.text
    assert [s for _, s in word.extra["hmde_places"]["sections"]] == ["Introduction", "Results"]
    zh = docs["zh.txt"]
    assert zh.text == CHINESE_TEXT and zh.extra["title"] == "zh" and zh.extra["format"] == "text"
    assert all(len(r.extra["sha256"]) == 64 and r.extra["bytes"] > 0 for r in docs.values())
    assert report.files == 4 and report.lines() == []


def test_a_pdf_keeps_its_pages_and_joins_the_lines_it_wrapped(tmp_path):
    long = " ".join(["The committee met on Tuesday to discuss the harbour, the roads and the new school."] * 4)
    pdf = print_pdf(two_page_html(long, "The second page begins here."), tmp_path / "r.pdf")
    docs, report = records(pdf)
    doc = docs["r.pdf"]
    assert doc.extra["pages"] == 2 and doc.extra["format"] == "pdf" and report.pages == 2
    first, second = doc.text.split("\n\n")
    assert first == long  # Chromium wrapped it over several lines; one paragraph again
    assert second == "The second page begins here."
    assert doc.extra["hmde_places"]["pages"] == [[0, 1], [len(long) + 2, 2]]


def test_a_folder_leaves_out_hidden_files_other_kinds_and_links_that_leave_it(tmp_path):
    root = tmp_path / "docs"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "x.md").write_text("# hidden\n", encoding="utf-8")
    (root / ".draft.md").write_text("# hidden\n", encoding="utf-8")
    (root / "a.md").write_text("# A\n\nText.\n", encoding="utf-8")
    (root / "pic.png").write_bytes(b"\x89PNG\r\n")
    outside = tmp_path / "secret.txt"
    outside.write_text("not for the index", encoding="utf-8")
    os.symlink(outside, root / "link.txt")
    os.symlink(root / "a.md", root / "again.md")  # a link that stays inside is read
    docs, report = records(root)
    assert sorted(docs) == ["a.md", "again.md"]
    assert report.lines() == [
        "left out 1 file(s) no reader reads (.png 1); readers: .pdf, .html, .docx, .md or .txt",
        "did not follow 1 link(s) leaving the folder: link.txt"]


def bad_files(tmp_path) -> dict[str, tuple[Path, str]]:
    """Each bad file and the reason its one line gives."""
    good = print_pdf(two_page_html("A page.", "Another page."), tmp_path / "good.pdf")
    out = {
        "encrypted": (encrypted_pdf(good, tmp_path / "locked.pdf"), "an encrypted PDF (it asks for a password); "
                      "decrypt it first (qpdf --decrypt) or leave it out"),
        "scanned": (scanned_pdf(tmp_path / "scan.pdf"), "no text layer in its 1 page(s) (a scan?); run OCR on it "
                    "first (ocrmypdf) or leave it out"),
        "corrupt": (tmp_path / "cut.pdf", "not a readable PDF ("),
        "empty": (tmp_path / "empty.md", "an empty file"),
        "binary": (tmp_path / "blob.txt", "binary data, not text (a NUL or control bytes in its first block)"),
        "not utf-8": (tmp_path / "latin.md", "not UTF-8 text (byte 0xe9 at offset 3); convert the file to UTF-8"),
        "word": (tmp_path / "broken.docx", "not a readable Word file (PackageNotFoundError)"),
        "huge": (tmp_path / "huge.txt", "too large (2.0 MiB; at most 1 MiB); --max-file-mb raises the limit"),
    }
    (tmp_path / "cut.pdf").write_bytes(good.read_bytes()[:300])
    (tmp_path / "empty.md").write_bytes(b"")
    (tmp_path / "blob.txt").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "latin.md").write_bytes("café au lait".encode("latin-1"))
    (tmp_path / "broken.docx").write_bytes(b"PK\x03\x04 not really a zip")
    (tmp_path / "huge.txt").write_text("word " * (2 * 2**20 // 5), encoding="utf-8")
    good.unlink()
    return out


def test_every_bad_file_is_one_line_naming_it_and_why(tmp_path):
    for kind, (path, reason) in bad_files(tmp_path).items():
        with pytest.raises(InputError) as caught:
            list(read_inputs(path, ReadOptions(max_bytes=2**20, txt="document")))
        assert str(caught.value).startswith(f"{path}: {reason}"), kind
        assert str(caught.value).endswith("; --on-error skip indexes the other files"), kind
        assert "\n" not in str(caught.value)


def test_a_bad_file_stops_the_build_before_anything_is_written_and_skip_indexes_the_rest(tmp_path, hmde_dir, capsys):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.md").write_text("# Good\n\nThe harbour opened in spring.\n", encoding="utf-8")
    (folder / "blob.txt").write_bytes(b"\x00\x01\x02" * 100)
    (folder / "empty.html").write_bytes(b"")
    index = tmp_path / "idx"
    assert main(["index", "build", str(hmde_dir), str(folder), "-o", str(index), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"hmde: error: {folder / 'blob.txt'}: binary data, not text (a NUL or control bytes in its first "
                   "block); --on-error skip indexes the other files")
    assert not index.exists()  # stopped before the model loaded: nothing written
    assert main(["index", "build", str(hmde_dir), str(folder), "-o", str(index), "--no-progress",
                 "--on-error", "skip"]) == 0
    out, err = capsys.readouterr()
    assert "indexed 1 documents" in out
    assert ("hmde: skipped 2 file(s): blob.txt (binary data, not text (a NUL or control bytes in its first block)); "
            "empty.html (an empty file)") in err


def test_a_txt_named_alone_is_one_document_per_line_without_blank_ones_and_says_so(tmp_path, hmde_dir, capsys):
    text = tmp_path / "article.txt"
    text.write_text("First paragraph of the article.\n\nSecond paragraph.\n\n\nThird.\n", encoding="utf-8")
    docs, report = records(text)
    assert {k: r.text for k, r in docs.items()} == {"1": "First paragraph of the article.", "3": "Second paragraph.",
                                                    "6": "Third."}  # blank lines were empty documents
    assert report.lines() == [f"read {text} as one document per line (blank lines skipped; --txt document reads it "
                              "as one document)"]
    docs, _ = records(text, txt="document")
    assert list(docs) == ["article.txt"]
    assert docs["article.txt"].text == "First paragraph of the article.\n\nSecond paragraph.\n\nThird."
    index = tmp_path / "idx"
    assert main(["index", "build", str(hmde_dir), str(text), "-o", str(index), "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert "indexed 3 documents" in out and "as one document per line" in err


def test_several_inputs_mix_files_folders_and_jsonl_and_a_repeated_id_names_both(tmp_path, capsys):
    folder = mixed_folder(tmp_path / "docs", pdf=False)
    jsonl = tmp_path / "more.jsonl"
    jsonl.write_text(json.dumps({"doc_id": "j1", "text": "A line.", "lang": "en"}) + "\n", encoding="utf-8")
    docs, _ = records([folder, jsonl, folder / "notes.md"])  # notes.md named alone is "notes.md" again
    assert "j1" in docs and docs["j1"].source == str(jsonl)
    assert main(["index", "build", "no-such-model", str(folder), str(folder / "notes.md"), "-o", str(tmp_path / "i"),
                 "--no-progress"]) == 2
    assert capsys.readouterr().err.strip() == (f"hmde: error: {folder / 'notes.md'}: the id 'notes.md' was already "
                                               f"used by {folder / 'notes.md'}; ids must be unique")
    assert main(["index", "build", str(tmp_path / "nowhere"), "-o", str(tmp_path / "i")]) == 2
    assert capsys.readouterr().err.strip().endswith("nowhere: file or folder not found")
    (tmp_path / "a.xyz").write_text("x")
    assert main(["index", "build", "no-such-model", str(tmp_path / "a.xyz"), "-o", str(tmp_path / "i")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"hmde: error: {tmp_path / 'a.xyz'}: unknown input format; give a folder, a document file (.pdf, .html, "
        ".docx, .md or .txt) or documents as .jsonl, .jsonl.gz, .tsv or .parquet")


def test_hits_name_the_file_its_title_and_the_page_and_section_of_the_evidence(tmp_path, hmde_dir, capsys):
    folder = mixed_folder(tmp_path / "docs")
    index = tmp_path / "idx"
    assert main(["index", "build", str(hmde_dir), str(folder), "-o", str(index), "--no-progress"]) == 0
    capsys.readouterr()
    for query, doc_id, place in (("Ships returned to the harbour in spring.", "harbour.pdf", {"page": 2}),
                                 ("Das erste Tor fiel in der zwölften Minute nach einer Ecke.", "web/finale.html",
                                  {"section": "Die Tore"}),
                                 ("Profits doubled compared with last year.", "report.docx", {"section": "Results"})):
        assert main(["search", str(index), query, "--json", "--top-k", "1", "--doc-weight", "0"]) == 0
        hit = json.loads(capsys.readouterr().out.splitlines()[0])
        assert hit["doc_id"] == doc_id and hit["evidence"][0]["sentence"] == query
        assert {k: hit["evidence"][0][k] for k in place} == place
        assert hit["metadata"]["path"] == doc_id
    assert main(["search", str(index), "Ships returned to the harbour in spring.", "--top-k", "1", "--doc-weight", "0"]) == 0
    assert "harbour.pdf  [eng]  (Report, page 2)  Ships returned to the harbour in spring." in capsys.readouterr().out


def test_python_reads_files_through_the_same_layer(tmp_path, hmde_dir):
    from hmde import Index

    folder = mixed_folder(tmp_path / "docs", pdf=False)
    with Index.create(str(tmp_path / "idx"), files=[folder / "notes.md"], model=str(hmde_dir), device="cpu") as index:
        assert index.document_ids() == ["notes.md"]
        (folder / "bad.docx").write_bytes(b"not a zip")
        with pytest.raises(InputError, match="bad.docx: not a readable Word file"):
            index.add_files([folder])
        assert index.count() == 1  # nothing written
        assert index.add_files([folder], mode="skip", on_error="skip") == 3  # notes.md is there: passed over
        assert index.last_read.skipped == [("bad.docx", "not a readable Word file (PackageNotFoundError)")]
        hit = index.search("Profits doubled compared with last year.", top_k=1, doc_weight=0)[0][0]
        start, end = hit.places[0].pop("chars")
        assert hit.doc_id == "report.docx" and hit.places[0] == {"section": "Results"}
        assert hit.text[start:end] == "Profits doubled compared with last year."
        assert hit.as_dict()["sentences"][0]["section"] == "Results"


def test_a_reader_not_installed_names_the_extra_even_with_skip(tmp_path, monkeypatch):
    """A core install reads Markdown and text; PDF, HTML and Word need the files extra, named in one line; it stops a
    run even with --on-error skip (a missing package is no bad file)."""
    import sys

    (tmp_path / "page.html").write_text("<html><body><p>A page.</p></body></html>", encoding="utf-8")
    monkeypatch.setitem(sys.modules, "trafilatura", None)  # import trafilatura raises ImportError
    with pytest.raises(InputError) as caught:
        list(read_inputs(tmp_path, ReadOptions(on_error="skip")))
    assert str(caught.value) == (f"{tmp_path / 'page.html'}: reading HTML files needs the trafilatura package: "
                                 "pip install 'hmde[files]'")
