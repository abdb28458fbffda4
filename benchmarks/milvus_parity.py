"""Does a Milvus-stored index rank as hmde's own index does? The dev XQuAD articles in 4 languages (de, el, hi, en),
Greek and English questions, both indexes built with defaults from one Parquet file of vectors (encoded once), each
searched with the same query vectors under several settings. Prints, per setting, the share of the top-10 hits that
are the same document at the same rank, the share with the same evidence, and the largest score difference.

    python benchmarks/milvus_parity.py --data ../shared/data --articles 48 --questions 200
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

LANGS = ("de", "el", "hi", "en")
SETTINGS = {  # name -> Index.search options
    "defaults": {},
    "--query-lang (given)": {"query_lang": "given"},
    "--lang de": {"lang": "de"},
    "--top-sentences 2": {"top_sentences": 2},
    "--doc-weight 0": {"doc_weight": 0.0},
    "--filter": {"filter": 'half == "first" and article != 3'},
    "--single-vector": {"multi_vector": False},
}


def collection(data: Path, articles: int, questions: int):
    from hmde.evaluation import clir

    docs, queries = [], []
    for lang in LANGS:
        _, col, _ = clir.load_xquad(data / "eval" / "xquad", "el", lang, "article")
        for i, (doc_id, text) in enumerate(zip(col.doc_ids[:articles], col.texts[:articles])):
            docs.append({"doc_id": f"{lang}-{doc_id}", "text": text, "lang": lang, "article": i,
                         "half": "first" if i < articles // 2 else "second"})
    for lang in ("el", "en"):
        topics, _, qrels = clir.load_xquad(data / "eval" / "xquad", lang, "en", "article")
        kept = [(t, lang) for qid, t in zip(topics.ids, topics.texts)
                if int(next(iter(qrels[qid]))[1:]) < articles][:questions]
        queries += kept
    return docs, queries


def compare(a, b) -> dict:
    pairs = [(x, y) for qa, qb in zip(a, b) for x, y in zip(qa, qb)]
    total = sum(len(q) for q in a)
    return {"hits": total, "same_doc": sum(x.doc_id == y.doc_id for x, y in pairs) / max(total, 1),
            "same_evidence": sum(x.doc_id == y.doc_id and [t for t, _ in x.evidence] == [t for t, _ in y.evidence]
                                 for x, y in pairs) / max(total, 1),
            "max_score_diff": max([abs(x.score - y.score) for x, y in pairs if x.doc_id == y.doc_id], default=0.0),
            "same_count": all(len(x) == len(y) for x, y in zip(a, b))}


def measure(data: Path, articles: int, questions: int, folder: Path, settings=SETTINGS) -> dict:
    from hmde.cli.main import main
    from hmde.index.search import Index

    docs, queries = collection(data, articles, questions)
    src = folder / "articles.jsonl"
    src.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    for argv in (["encode", "hmde-e5", str(src), "-o", str(folder / "rep.parquet")],
                 ["index", "build", str(folder / "rep.parquet"), "-o", str(folder / "own")],
                 ["index", "build", str(folder / "rep.parquet"), "-o", str(folder / "stored"), "--store",
                  f"milvus:{folder / 'hmde.db'}"]):
        if main(argv + ["--no-progress"]) != 0:
            raise SystemExit(f"failed: hmde {' '.join(argv)}")
    texts = [t for t, _ in queries]
    out = {}
    with Index.open(str(folder / "own")) as own, Index.open(str(folder / "stored")) as stored:
        vectors = own.encode_queries(texts)
        for name, options in settings.items():
            results = []
            for index in (own, stored):
                hits = []
                for lang in ("el", "en"):  # each query set with its own language (detected, or given)
                    rows = [i for i, (_, x) in enumerate(queries) if x == lang]
                    given = {**options, "query_lang": lang} if options.get("query_lang") == "given" else options
                    hits += index.search([texts[i] for i in rows], top_k=10, query_vectors=vectors[rows], **given)
                results.append(hits)
            out[name] = compare(*results)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument("--articles", type=int, default=48)
    parser.add_argument("--questions", type=int, default=200, help="per query language")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = measure(Path(args.data), args.articles, args.questions, Path(tmp))
    print(f"{'setting':24} {'hits':>6} {'same doc':>9} {'same evidence':>14} {'max |score diff|':>17}")
    for name, row in result.items():
        print(f"{name:24} {row['hits']:6d} {row['same_doc']:9.4f} {row['same_evidence']:14.4f} "
              f"{row['max_score_diff']:17.2e}")


if __name__ == "__main__":
    main()
