"""Single-vector against multi-vector retrieval on the same lower encoder, side by side.

Rows: XQuAD article-level and paragraph-level CLIR (14 pairs in USE-m's languages), and
sentence-query retrieval over long documents (``hmde sentence-queries``: each sentence of
an English chapter or news document a query, the other language's documents the collection):
Bible chapters (in hmde-use's training data) and 30-line WMT news documents with every
document sharing a sentence with hmde-use's training news left out (held out); and keyword queries:
English help-page titles (LibreOffice, GNOME: ../shared/data/docs) against the bodies of the same pages in another
language, the queries from the development third of the concepts (``hmde.pretraining.sentence_stage.dev_concept``),
whose pages hmde-e5's sentence stage never trained on; every page of the language is in the collection.
Columns: hmde's document vector, mean, first, seg, lawdr, plain sentence vectors scored by
their best sentence (``--multi-vector lower``), and HMDE's contextualised sentence vectors
(``--multi-vector context``), the latter also mixed with the document vector.

Every number comes from ``hmde eval clir`` (result JSONs kept in --work), so a row can be
rerun alone. Usage:

    python benchmarks/contextual_retrieval.py --data ../shared/data --model hmde-use --work runs/ctx
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

XQUAD_PAIRS = ",".join([f"{c}-en" for c in ("ar", "de", "es", "ru", "th", "tr", "zh")]
                       + [f"en-{c}" for c in ("ar", "de", "es", "ru", "th", "tr", "zh")])
XQUAD_OTHER_PAIRS = ",".join([f"{c}-en" for c in ("el", "hi", "ro", "vi")] + [f"en-{c}" for c in ("el", "hi", "ro", "vi")])
TRAINING_WMT = ("deu-eng", "deu-fra", "eng-fra", "eng-jpn", "eng-pol", "eng-rus", "eng-tur", "eng-zho")  # hmde-use's
LONG_WMT = ("deu-eng", "eng-rus", "eng-zho", "eng-tur", "eng-fra")
COLUMNS = {  # name -> extra eval arguments
    "hmde-doc": [],
    "mean": ["--method", "mean"],
    "first": ["--method", "first"],
    "seg": ["--method", "seg"],
    "lawdr": ["--method", "lawdr"],
    "sentences": ["--multi-vector", "lower"],
    "contextual": ["--multi-vector", "context"],
    "contextual+doc": ["--multi-vector", "context", "--doc-weight", "0.5"],
    # the fusions hmde search can default to (issue 42): plain sentences with the `mean` document vector
    "sentences-top2": ["--multi-vector", "lower", "--top-sentences", "2"],
    "sentences+0.25mean": ["--method", "mean", "--multi-vector", "lower", "--doc-weight", "0.25"],
    "sentences+0.5mean": ["--method", "mean", "--multi-vector", "lower", "--doc-weight", "0.5"],
    "sentences+1mean": ["--method", "mean", "--multi-vector", "lower", "--doc-weight", "1"],
    "sentences+0.5doc": ["--multi-vector", "lower", "--doc-weight", "0.5"],  # the model's own document vector
}


KEYWORD_ROWS = (("libreoffice", "jpn"), ("libreoffice", "rus"), ("gnome", "deu"), ("gnome", "rus"))


def unique_titles(english: list[dict]) -> dict[str, str]:
    """concept -> title of the English help pages whose title no other English page has (a query names one page)."""
    counts: dict[str, int] = {}
    for page in english:
        counts[page["title"]] = counts.get(page["title"], 0) + 1
    return {p["concept"]: p["title"] for p in english if counts[p["title"]] == 1}


def page_body(page: dict) -> list[str]:
    """A help page's paragraphs without its own title paragraph (so a title query must match the body)."""
    return page["paragraphs"][1:] if page["paragraphs"][:1] == [page["title"]] else page["paragraphs"]


def keyword_queries(data: Path, source: str, lang: str, folder: Path) -> None:
    """Keyword queries from docs/: each English help page's title (the titles unique in English) of the
    development concepts a query; the relevant document the same page in ``lang``, whose own title paragraph is
    removed, so the query must match the page's body, as keywords match a text that does not repeat them. Every
    page in ``lang`` is a document (the other concepts' pages are the distractors)."""
    import gzip

    from hmde.pretraining.sentence_stage import dev_concept

    def pages(code: str) -> list[dict]:
        with gzip.open(data / "docs" / source / f"{code}.jsonl.gz", "rt", encoding="utf-8") as f:
            return [json.loads(line) for line in f]

    titles = unique_titles(pages("eng"))
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "topics.tsv", "w", encoding="utf-8") as topics, \
            open(folder / "qrels.txt", "w", encoding="utf-8") as qrels, \
            open(folder / "documents.jsonl", "w", encoding="utf-8") as docs:
        for page in pages(lang):
            body = page_body(page)
            if not body:
                continue
            docs.write(json.dumps({"doc_id": page["doc_id"], "text": "\n".join(body)}, ensure_ascii=False) + "\n")
            if page["concept"] in titles and dev_concept(source, page["concept"]):
                qid = f"q{page['concept']}"
                topics.write(f"{qid}\t{titles[page['concept']]}\n")
                qrels.write(f"{qid} 0 {page['doc_id']} 1\n")


def run(cmd: list[str]) -> None:
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def tasks(data: Path, work: Path) -> dict[str, list[str]]:
    """Row name -> the eval clir arguments naming its data (sentence-query sets built once)."""
    out = {
        "XQuAD article": ["--xquad", str(data / "eval" / "xquad"), "--pairs", XQUAD_PAIRS, "--unit", "article"],
        "XQuAD paragraph": ["--xquad", str(data / "eval" / "xquad"), "--pairs", XQUAD_PAIRS, "--unit", "paragraph"],
        # languages outside USE-m's 16 (el, hi, ro, vi): only models covering them are measured there
        "XQuAD article (other)": ["--xquad", str(data / "eval" / "xquad"), "--pairs", XQUAD_OTHER_PAIRS, "--unit",
                                  "article"],
    }
    wmt = data / "parallel" / "wmt"
    training_news, long_news = work / "wmt-training.jsonl.gz", work / "wmt-long.jsonl.gz"
    if not long_news.exists():  # as hmde recipe use: 30-line news documents, training documents' sentences excluded
        run(["hmde", "pseudo-documents", *[str(wmt / f"{f}.tsv.gz") for f in TRAINING_WMT], "--output",
             str(training_news), "--lines", "5", "--max-documents", "2000"])
        run(["hmde", "pseudo-documents", *[str(wmt / f"{f}.tsv.gz") for f in LONG_WMT], "--output", str(long_news),
             "--lines", "30"])
    sources = {"bible": lambda q, d: [str(data / "bible" / f"{q}.jsonl.gz"), str(data / "bible" / f"{d}.jsonl.gz")],
               "wmt": lambda q, d: [str(long_news), "--exclude", str(training_news)]}
    for source, src, tgt, title in (("bible", "eng", "spa", "Bible"), ("bible", "eng", "zho", "Bible"),
                                    ("wmt", "eng", "deu", "WMT (held out)"), ("wmt", "eng", "rus", "WMT (held out)")):
        folder = work / f"sq-{source}-{src}-{tgt}"
        if not (folder / "topics.tsv").exists():
            run(["hmde", "sentence-queries", *sources[source](src, tgt), "--query-lang", src, "--doc-lang", tgt,
                 "-o", str(folder), "--max-queries", "1000"])  # as hmde recipe use evaluates hmde-use
        out[f"{title} {src}->{tgt} sentence queries"] = [
            "--topics", str(folder / "topics.tsv"), "--qrels", str(folder / "qrels.txt"),
            "--documents", str(folder / "documents.jsonl"), "--query-lang", src, "--doc-lang", tgt]
    for source, lang in KEYWORD_ROWS:  # keyword queries (issue 42): English page titles -> the page's body
        folder = work / f"kw-dev-{source}-eng-{lang}"  # the development concepts (before stop 74: all)
        if not (folder / "topics.tsv").exists():
            keyword_queries(data, source, lang, folder)
        out[f"{source} titles eng->{lang} keyword queries"] = [
            "--topics", str(folder / "topics.tsv"), "--qrels", str(folder / "qrels.txt"),
            "--documents", str(folder / "documents.jsonl"), "--query-lang", "eng", "--doc-lang", lang]
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="the shared data folder (eval/xquad, bible/)")
    p.add_argument("--model", default="hmde-use")
    p.add_argument("--work", default="runs/contextual", help="result JSONs and sentence-query sets")
    p.add_argument("--columns", default=",".join(COLUMNS))
    p.add_argument("--backend", help="hmde eval's --backend (default: its own, auto); an fp32 and an int8 run side by "
                   "side need their own --work")
    p.add_argument("--rows", help="comma-separated row names (default: all)")
    p.add_argument("--sentence-cache", help="hmde eval --sentence-cache: every column reuses the sentence vectors "
                   "of the first (a row's lower encoder is the same in every column)")
    p.add_argument("--lawdr-everywhere", action="store_true",
                   help="also run lawdr on the sentence-query rows (its KDE over their 30k+ sentences takes over "
                   "10 minutes per run on 2 cores; skipped by default, as in the README's table)")
    args = p.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    rows = tasks(Path(args.data), work)
    wanted_rows = [r for r in rows if not args.rows or r in args.rows.split(",")]
    columns = [c for c in args.columns.split(",") if c]
    table: dict[str, dict[str, tuple[float, float]]] = {}
    for row in wanted_rows:
        for column in columns:
            if column == "lawdr" and "sentence queries" in row and not args.lawdr_everywhere:
                continue
            out = work / f"{row.replace(' ', '_').replace('>', '')}.{column}.json"
            if not out.exists():
                cache = ["--sentence-cache", args.sentence_cache] if args.sentence_cache else []
                backend = ["--backend", args.backend] if args.backend else []
                run(["hmde", "eval", "clir", args.model, *rows[row], *COLUMNS[column], "--no-progress",
                     "--measures", "AP,RR", *cache, *backend, "-o", str(out)])
            averages = json.loads(out.read_text())["metrics"]["averages"]
            table.setdefault(row, {})[column] = (averages["AP"], averages["RR"])
    print(f"model {args.model}; MAP / MRR (queries through the lower encoder alone)\n")
    print("| task | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for row, values in table.items():
        best = max(v[0] for v in values.values())
        cells = [("–" if v is None else (f"**{v[0]:.3f}**" if v[0] == best else f"{v[0]:.3f}") + f" / {v[1]:.3f}")
                 for v in (values.get(c) for c in columns)]
        print(f"| {row} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
