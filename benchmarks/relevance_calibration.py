"""hmde's relevance in [0, 1] (:func:`hmde.integrations.hits.relevance`), fitted and checked (issue 76).

hmde's score (best sentence + 0.5 x the document vector's cosine) is a similarity without a scale a threshold can
read. The relevance is ``1 / (1 + exp(-(A * score + B)))``, fitted by logistic regression (scikit-learn) on the top-10
hits of dev queries (relevant: the query's right document), so that one threshold means about the same precision in
different collections. Fitted on two XQuAD collections, checked also on two it never saw (MasakhaNEWS headlines
against their articles, in English and in Hausa), hmde-e5 with its default index settings.

Collections (each an index built with defaults):
- ``xquad-articles``: the 48 XQuAD articles, article i in German, Greek, Hindi or English (i mod 4); the first question
  of every paragraph in English and in Greek (480 queries);
- ``xquad-paragraphs``: the 240 paragraphs, paragraph j in one of the four languages (j mod 4); every paragraph's first
  question in English (240);
- ``masakhanews-eng``, ``masakhanews-hau``: the dev articles of MasakhaNEWS in English and Hausa, each headline the
  query of its article (monolingual; not used in the fit).

    python benchmarks/relevance_calibration.py --data ../shared/data
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

THRESHOLDS = (0.3, 0.5, 0.7, 0.9)
FIT = ("xquad-articles", "xquad-paragraphs")


def xquad_collections(data: Path) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import integrations

    from hmde.evaluation import clir

    docs, queries = integrations.collection(data)
    out = {"xquad-articles": (docs, queries["en"] + queries["el"])}
    folder = data / "eval" / "xquad"
    raw = {lang: json.loads(clir.xquad_file(folder, lang).read_text(encoding="utf-8"))["data"]
           for lang in integrations.LANGS}
    paragraphs, questions, j = [], [], 0
    for a, article in enumerate(raw["en"]):
        for p, para in enumerate(article["paragraphs"]):
            lang = integrations.LANGS[j % 4]
            paragraphs.append({"doc_id": f"p{a}.{p}", "lang": integrations.CODES[lang],
                               "text": raw[lang][a]["paragraphs"][p]["context"]})
            questions.append((para["qas"][0]["question"], f"p{a}.{p}"))
            j += 1
    out["xquad-paragraphs"] = (paragraphs, questions)
    return out


def masakhanews(data: Path, lang: str, limit: int) -> tuple[list, list]:
    path = data / "eval" / "masakhanews" / lang / "dev.tsv.gz"
    with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))[:limit]
    docs = [{"doc_id": f"{lang}{i}", "lang": lang, "text": r["text"]} for i, r in enumerate(rows)]
    return docs, [(r["headline"], f"{lang}{i}") for i, r in enumerate(rows)]


def scored_hits(docs, queries, work: Path, name: str) -> list[tuple[float, bool, int]]:
    """(score, relevant, query number) of every query's top-10 hits."""
    from hmde.index.search import Index

    with Index.create(str(work / name), docs) as index:
        results = index.search([q for q, _ in queries], top_k=10)
    return [(h.score, h.doc_id == want, qi) for qi, ((_, want), hits) in enumerate(zip(queries, results))
            for h in hits]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--news", type=int, default=300, help="MasakhaNEWS dev articles per language")
    args = parser.parse_args()
    from sklearn.linear_model import LogisticRegression

    from hmde.integrations import hits as hits_module

    work = Path(tempfile.mkdtemp(prefix="hmde-relevance-"))
    collections = xquad_collections(args.data)
    for lang in ("eng", "hau"):
        collections[f"masakhanews-{lang}"] = masakhanews(args.data, lang, args.news)
    scored = {name: scored_hits(docs, queries, work, name) for name, (docs, queries) in collections.items()}
    fit = np.array([(s, r) for name in FIT for s, r, _ in scored[name]], np.float64)
    model = LogisticRegression(C=1e6, max_iter=1000).fit(fit[:, :1], fit[:, 1].astype(int))
    slope, offset = float(model.coef_[0, 0]), float(model.intercept_[0])
    print(f"fitted on {', '.join(FIT)} ({len(fit):,} hits): relevance = 1 / (1 + exp(-({slope:.2f} x score "
          f"{offset:+.2f}))); hmde ships A = {hits_module.RELEVANCE_SLOPE}, B = {hits_module.RELEVANCE_OFFSET}")
    print("\n| collection | queries | right document at rank 1 | " + " | ".join(
        f"relevance >= {t}: hits, precision, right documents kept" for t in THRESHOLDS) + " |")
    print("|---|---|---|" + "---|" * len(THRESHOLDS))
    for name, rows in scored.items():
        scores = np.array([s for s, _, _ in rows])
        relevant = np.array([r for _, r, _ in rows])
        queries = len(collections[name][1])
        rel = 1 / (1 + np.exp(-(slope * scores + offset)))
        at_one = {}
        for s, r, qi in rows:
            at_one.setdefault(qi, r)
        first = sum(at_one.values())
        cells = []
        for t in THRESHOLDS:
            kept = rel >= t
            precision = relevant[kept].mean() if kept.any() else float("nan")
            cells.append(f"{int(kept.sum())}, {precision:.3f}, {int(relevant[kept].sum())}/{int(relevant.sum())}")
        print(f"| {name}{' (fit)' if name in FIT else ''} | {queries} | {first / queries:.3f} | " + " | ".join(cells)
              + " |")


if __name__ == "__main__":
    main()
