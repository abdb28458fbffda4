"""hmde's relevance in [0, 1] of a model without an answerability fit (:mod:`hmde.index.relevance`'s ``Z_SLOPE``
and ``RAW_SLOPE``), fitted and checked (issue 76). The bundled models' relevance is an answerability since issue 95:
benchmarks/answerability.py fits it, on collections that also hold queries with no answer.

hmde's score (best sentence + 0.5 x the document vector's cosine) is a similarity without a scale a threshold can
read across collections. The relevance is ``1 / (1 + exp(-(A * z + B)))``, z the hit's score among the query's 50 best
candidates (the raw score where a collection has fewer than 10), fitted by logistic regression (scikit-learn) on the
top-10 hits of dev queries (relevant: the query's right document), so that one threshold means about the same
precision in different collections. Fitted on two XQuAD collections, checked also on four it never saw (MasakhaNEWS
headlines against their articles in English, French, Swahili and Hausa), hmde-e5 with its default index settings.

Collections (each an index built with defaults):
- ``xquad-articles``: the 48 XQuAD articles, article i in German, Greek, Hindi or English (i mod 4); the first question
  of every paragraph in English and in Greek (480 queries);
- ``xquad-paragraphs``: the 240 paragraphs, paragraph j in one of the four languages (j mod 4); every paragraph's first
  question in English (240);
- ``masakhanews-eng`` (``-fra``, ``-swa``, ``-hau``): the dev articles of MasakhaNEWS, each headline the query of
  its article (monolingual; not used in the fit).

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
NEWS = ("eng", "fra", "swa", "hau")


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


def searched(docs, queries, work: Path, name: str):
    """Each query's 50 best hits (score, relevant, hmde's relevance), by an index built with defaults."""
    from hmde.index.search import Index

    with Index.create(str(work / name), docs) as index:
        results = index.search([q for q, _ in queries], top_k=50)
    return [[(h.score, h.doc_id == want, h.relevance) for h in hits] for (_, want), hits in zip(queries, results)]


def fit(results, features) -> tuple[float, float]:
    """A logistic regression's slope and offset on the feature of each query's top-10 hits."""
    from sklearn.linear_model import LogisticRegression

    x = np.array([f for hits in results for f in features(hits)[:10]])
    y = np.array([r for hits in results for _, r, _ in hits[:10]], int)
    model = LogisticRegression(C=1e4, max_iter=2000).fit(x[:, None], y)
    return float(model.coef_[0, 0]), float(model.intercept_[0])


def z_values(hits):
    pool = np.array([s for s, _, _ in hits])
    return list((pool - pool.mean()) / max(pool.std(), 1e-9))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--news", type=int, default=300, help="MasakhaNEWS dev articles per language")
    args = parser.parse_args()
    from hmde.index import relevance

    work = Path(tempfile.mkdtemp(prefix="hmde-relevance-"))
    collections = xquad_collections(args.data)
    for lang in NEWS:
        collections[f"masakhanews-{lang}"] = masakhanews(args.data, lang, args.news)
    results = {name: searched(docs, queries, work, name) for name, (docs, queries) in collections.items()}
    fitted = [q for name in FIT for q in results[name]]
    print(f"fitted on {', '.join(FIT)}: z among the best {relevance.POOL}: A = {fit(fitted, z_values)[0]:.2f}, "
          f"B = {fit(fitted, z_values)[1]:.2f} (hmde: {relevance.Z_SLOPE}, {relevance.Z_OFFSET}); the raw score: "
          "A = {:.1f}, B = {:.1f} (hmde: {}, {})".format(*fit(fitted, lambda h: [s for s, _, _ in h]),
                                                         relevance.RAW_SLOPE, relevance.RAW_OFFSET))
    print("\nhmde's relevance of each query's top 10 (hits above the threshold, their precision, right documents kept)")
    print("\n| collection | queries | right document at rank 1 | " + " | ".join(f"relevance >= {t}" for t in THRESHOLDS)
          + " |")
    print("|---|---|---|" + "---|" * len(THRESHOLDS))
    for name, per_query in results.items():
        top = [h for hits in per_query for h in hits[:10]]
        relevant = np.array([r for _, r, _ in top])
        shipped = np.array([v for _, _, v in top])
        first = np.mean([hits[0][1] for hits in per_query if hits])
        cells = []
        for t in THRESHOLDS:
            kept = shipped >= t
            precision = f"{relevant[kept].mean():.3f}" if kept.any() else "-"
            cells.append(f"{int(kept.sum())}, {precision}, {int(relevant[kept].sum())}/{int(relevant.sum())}")
        print(f"| {name}{' (fit)' if name in FIT else ''} | {len(per_query)} | {first:.3f} | " + " | ".join(cells)
              + " |")


if __name__ == "__main__":
    main()
