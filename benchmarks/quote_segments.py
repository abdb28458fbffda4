"""Quotation marks that merged sentences (issue 95), measured on the dev data: how many texts and units the quote
handling of :mod:`hmde.text.quotes` changes (XQuAD paragraphs in 12 languages, MasakhaNEWS dev articles in 8), the
longest unit before and after, and XQuAD article retrieval (English questions, articles in the languages most
changed, hmde-e5, best sentence + document vector) with the splitter as it was and as it is, side by side.

    python benchmarks/quote_segments.py --data ../shared/data
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import glob
import gzip
import json
import tempfile
from collections import Counter
from pathlib import Path


@contextlib.contextmanager
def old_splitter():
    """The splitter without the quote handling of issue 95 (what it was before)."""
    from hmde.text import segmentation as seg

    saved = seg.paired_quotes, seg.split_long_quoted
    seg.paired_quotes, seg.split_long_quoted = (lambda split: split), (lambda pieces, split: pieces)
    try:
        yield
    finally:
        seg.paired_quotes, seg.split_long_quoted = saved


def dev_texts(data: Path) -> list[tuple[str, str, str]]:
    out = []
    for f in sorted(glob.glob(str(data / "eval" / "xquad" / "xquad.*.json"))):
        lang = f.split(".")[-2]
        out += [("xquad", p["context"], lang) for a in json.load(open(f, encoding="utf-8"))["data"]
                for p in a["paragraphs"]]
    csv.field_size_limit(10**9)
    for f in sorted(glob.glob(str(data / "eval" / "masakhanews" / "*" / "dev.tsv.gz")))[:8]:
        with gzip.open(f, "rt", encoding="utf-8") as h:
            out += [("masakhanews", row["text"], f.split("/")[-2]) for row in csv.DictReader(h, delimiter="\t")]
    return out


def retrieval(data: Path, lang: str, model: str) -> tuple[float, float]:
    from hmde import Index

    folder = data / "eval" / "xquad"
    docs = [{"doc_id": f"a{a}", "text": "\n\n".join(p["context"] for p in article["paragraphs"]), "lang": lang}
            for a, article in enumerate(json.load(open(folder / f"xquad.{lang}.json", encoding="utf-8"))["data"])]
    english = json.load(open(folder / "xquad.en.json", encoding="utf-8"))["data"]
    questions = [(q["question"], f"a{a}") for a, article in enumerate(english) for p in article["paragraphs"]
                 for q in p["qas"]]
    with tempfile.TemporaryDirectory() as work, Index.create(work + "/idx", docs, model=model) as index:
        hits = index.search([q for q, _ in questions], top_k=10)
    mrr = sum(next((1 / k for k, h in enumerate(hs, 1) if h.doc_id == want), 0.0) for hs, (_, want) in
              zip(hits, questions)) / len(questions)
    return mrr, sum(hs[0].doc_id == want for hs, (_, want) in zip(hits, questions)) / len(questions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--model", default="hmde-e5")
    parser.add_argument("--langs", default="th,de,el,zh", help="XQuAD article languages for the retrieval rows")
    args = parser.parse_args()
    from hmde.text.segmentation import split_sentences

    texts = dev_texts(args.data)
    with old_splitter():
        before = [split_sentences(t, lang) for _, t, lang in texts]
    after = [split_sentences(t, lang) for _, t, lang in texts]
    changed = Counter(src for (src, _, _), a, b in zip(texts, before, after) if a != b)
    print("| dev texts | texts | changed | units before | units after | longest before | longest after |")
    print("|---|---|---|---|---|---|---|")
    for src in ("xquad", "masakhanews"):
        rows = [(a, b) for (s, _, _), a, b in zip(texts, before, after) if s == src]
        print(f"| {src} | {len(rows)} | {changed[src]} | {sum(len(a) for a, _ in rows)} | "
              f"{sum(len(b) for _, b in rows)} | {max(len(u) for a, _ in rows for u in a)} | "
              f"{max(len(u) for _, b in rows for u in b)} |")
    print("\n| XQuAD en -> articles | MRR@10 before | MRR@10 after | P@1 before | P@1 after |")
    print("|---|---|---|---|---|")
    for lang in args.langs.split(","):
        with old_splitter():
            old = retrieval(args.data, lang, args.model)
        new = retrieval(args.data, lang, args.model)
        print(f"| {lang} | {old[0]:.4f} | {new[0]:.4f} | {old[1]:.4f} | {new[1]:.4f} |")


if __name__ == "__main__":
    main()
