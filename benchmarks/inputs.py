"""Documents as files against the same texts as JSONL (issue 93): search quality equal, and what reading costs
beside embedding.

Collection: the dev data's 48 XQuAD articles in five languages (German, Chinese, Russian, Spanish, Greek: 240
documents, several scripts, CJK included), each written once as JSONL (``text``: its paragraphs joined by blank
lines) and once as a file, the formats in turn (PDF printed by Chromium from the page, HTML with navigation, a header
and a footer around the article, Word through python-docx, Markdown, plain text). Queries: the first English question
of every paragraph (240); relevant: the question's article in any of its five languages (the first one ranked
counts). MRR@10 and P@1 of :meth:`hmde.Index.search` (hmde-e5) over the index built from JSONL and over the index
built from the folder (``Index.create(files=...)``, as ``hmde index build FOLDER`` reads it); reading (files/s,
pages/s, per format) and the whole build timed in one process.

    python benchmarks/inputs.py --data ../shared/data
"""

from __future__ import annotations

import argparse
import html
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

LANGS = {"de": "deu", "zh": "zho", "ru": "rus", "es": "spa", "el": "ell"}
FORMATS = ("pdf", "html", "docx", "md", "txt")
PAGE = """<!doctype html><html lang="{lang}"><head><meta charset="utf-8"><title>{title}</title></head><body>
<header><a href="/">Home</a> | <a href="/news">News</a> | <a href="/about">About us</a> | <a href="/login">Log in</a>
</header><nav><ul><li><a href="/a">Politics</a></li><li><a href="/b">Science</a></li><li><a href="/c">Sport</a></li>
</ul></nav><main><article><h1>{title}</h1>{body}</article></main>
<footer><p>© 2026 Example Media. All rights reserved.</p><p><a href="/privacy">Privacy</a> | <a href="/terms">Terms</a>
</p></footer></body></html>"""


def articles(data: Path):
    """(doc_id, lang, title, paragraphs) of every article in every language, and the English questions."""
    folder = data / "eval" / "xquad"
    docs = []
    for code, lang in LANGS.items():
        raw = json.loads((folder / f"xquad.{code}.json").read_text(encoding="utf-8"))["data"]
        for a, article in enumerate(raw):
            paragraphs = [p["context"].strip() for p in article["paragraphs"]]
            title = article.get("title", f"Article {a}").replace("_", " ")
            docs.append((f"a{a}-{code}", lang, title, paragraphs))
    english = json.loads((folder / "xquad.en.json").read_text(encoding="utf-8"))["data"]
    questions = [(p["qas"][0]["question"], f"a{a}") for a, article in enumerate(english) for p in article["paragraphs"]]
    return docs, questions


def write_files(docs, folder: Path, chromium: str | None) -> dict[str, str]:
    """Each document as a file of its turn's format; returns doc_id -> the file's id in the folder."""
    import docx

    names = {}
    for i, (doc_id, lang, title, paragraphs) in enumerate(docs):
        fmt = FORMATS[i % len(FORMATS)]
        if fmt == "pdf" and chromium is None:
            fmt = "html"
        name = f"{doc_id}.{fmt}"
        path = folder / name
        body = "".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)
        if fmt in ("html", "pdf"):
            page = PAGE.format(lang=lang, title=html.escape(title), body=body)
            if fmt == "html":
                path.write_text(page, encoding="utf-8")
            else:  # a printed article: the page's text alone, as a report's PDF holds it
                printed = folder / f"{doc_id}.print.html"
                printed.write_text(f"<!doctype html><html lang='{lang}'><head><meta charset='utf-8'><title>"
                                   f"{html.escape(title)}</title></head><body>{body}</body></html>", encoding="utf-8")
                subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-pdf-header-footer",
                                f"--print-to-pdf={path}", printed.as_uri()], check=True, capture_output=True)
                printed.unlink()
        elif fmt == "docx":
            document = docx.Document()
            document.core_properties.title = title
            for p in paragraphs:
                document.add_paragraph(p)
            document.save(path)
        elif fmt == "md":
            path.write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
        else:
            path.write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
        names[doc_id] = name
    return names


def sentences_kept(docs, records) -> dict[str, list[int]]:
    """Per format: how many of each JSONL document's sentences its file's text gives back, exactly and with
    whitespace aside (a PDF's text loses the spaces XQuAD's Chinese has around names), and how many there were."""
    import re

    from hmde.text.segmentation import split_sentences

    def squeezed(x: str) -> str:
        return re.sub(r"\s+", "", x)

    by_id = {r.doc_id.rsplit(".", 1)[0]: r for r in records}
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for doc_id, lang, _, paragraphs in docs:
        record = by_id[doc_id]
        want = [w.lstrip("\ufeff") for w in split_sentences("\n\n".join(paragraphs), lang)]  # XQuAD has BOMs
        got = split_sentences(record.text, lang)
        row = out[record.doc_id.rsplit(".", 1)[1]]
        row[0] += sum(w in set(got) for w in want)
        row[1] += sum(squeezed(w) in {squeezed(g) for g in got} for w in want)
        row[2] += len(want)
    return out


def scores(hits, questions, id_of) -> tuple[float, float]:
    mrr, p1 = 0.0, 0
    for ranked, (_, article) in zip(hits, questions):
        ids = [id_of(h.doc_id) for h in ranked]
        rank = next((k for k, x in enumerate(ids, 1) if x == article), None)
        mrr += 1.0 / rank if rank and rank <= 10 else 0.0
        p1 += ids[:1] == [article]
    return mrr / len(questions), p1 / len(questions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--model", default="hmde-e5")
    args = parser.parse_args()
    from hmde import Index
    from hmde.files.inputs import ReadReport, read_inputs

    docs, questions = articles(args.data)
    work = Path(tempfile.mkdtemp(prefix="hmde-inputs-"))
    folder = work / "files"
    folder.mkdir()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    started = time.perf_counter()
    names = write_files(docs, folder, chromium)
    print(f"wrote {len(names)} files in {time.perf_counter() - started:.1f} s", file=sys.stderr)

    per_format, report = defaultdict(lambda: [0, 0.0]), ReadReport()
    started = time.perf_counter()
    last = [started]

    def moved(name: str, pages: int) -> None:
        now = time.perf_counter()
        per_format[name.rsplit(".", 1)[1]][0] += 1
        per_format[name.rsplit(".", 1)[1]][1] += now - last[0]
        last[0] = now

    records = list(read_inputs(folder, report=report, progress=moved))
    read_s = time.perf_counter() - started
    kept = sentences_kept(docs, records)
    jsonl = [{"doc_id": d, "text": "\n\n".join(p), "lang": lang} for d, lang, _, p in docs]
    rows = []
    for kind in ("jsonl", "files"):
        started = time.perf_counter()
        index = Index.create(str(work / f"index-{kind}"), documents=jsonl if kind == "jsonl" else records,
                             model=args.model)
        build_s = time.perf_counter() - started
        sentences = index.info().get("sentences")
        hits = index.search([q for q, _ in questions], top_k=10)
        mrr, p1 = scores(hits, questions, lambda x: x.split("-")[0].split(".")[0])
        rows.append((kind, mrr, p1, build_s, sentences))
        index.close()
    print("| collection | MRR@10 | P@1 | build (s, embedding included) | sentences |")
    print("|---|---|---|---|---|")
    for kind, mrr, p1, build_s, sentences in rows:
        print(f"| {kind} | {mrr:.3f} | {p1:.3f} | {build_s:.1f} | {sentences} |")
    print()
    print(f"reading the folder: {report.files} files, {report.pages} PDF pages in {read_s:.2f} s "
          f"({report.files / read_s:.1f} files/s)")
    print("| format | files | files/s | sentences kept (exactly / whitespace aside) |")
    print("|---|---|---|---|")
    for fmt, (count, seconds) in sorted(per_format.items()):
        exact, loose, total = kept[fmt]
        print(f"| {fmt} | {count} | {count / seconds:.1f} | {exact / total:.3f} / {loose / total:.3f} |")
    pdf_pages = report.pages
    if pdf_pages and per_format.get("pdf"):
        print(f"\nPDF: {pdf_pages} pages, {pdf_pages / per_format['pdf'][1]:.1f} pages/s")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
