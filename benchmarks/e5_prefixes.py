"""Which prefix should multilingual-e5-small put before the sentences of documents?

The model card asks for "query: " or "passage: " on every input. Queries get "query: ". For the
sentences that hmde embeds inside documents (methods mean, hmde, lawdr, ...) this script measures
both on the dev sets, with method ``mean``, queries through the lower encoder alone:

- PUD document alignment, P@1 of each language's 397 documents against English (both directions);
- XQuAD: questions in one language, whole articles in another, MAP (one relevant article each).

    python benchmarks/e5_prefixes.py --data ../shared/data [--pud deu,ell,...] [--xquad de-en,...]

The winner is the folder's ``default_prompt_name``; docs/multilingual-e5.md records the figures.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import numpy as np


def pud_documents(folder: Path, lang: str) -> tuple[list[str], list[list[str]]]:
    with gzip.open(folder / f"{lang}.jsonl.gz", "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return [r["concept"] for r in rows], [r["sentences"] for r in rows]


def p_at_1(a: np.ndarray, b: np.ndarray) -> float:
    gold = np.arange(len(a))
    return float(((a @ b.T).argmax(1) == gold).mean() + ((b @ a.T).argmax(1) == gold).mean()) / 2


def mean_average_precision(q: np.ndarray, d: np.ndarray, relevant: list[int]) -> float:
    scores = q @ d.T
    ranks = (scores > scores[np.arange(len(q)), relevant][:, None]).sum(1) + 1
    return float((1.0 / ranks).mean())  # one relevant document per query: AP = 1 / rank


def main() -> None:
    from hmde.evaluation.clir import load_xquad
    from hmde.hierarchical import HierarchicalEncoder
    from hmde.methods import DocumentVectorizer

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument("--pud", default="deu,rus,zho,ara,hin,tha,fin,kor")
    parser.add_argument("--xquad", default="de-en,ru-en,zh-en,ar-en,el-en,hi-en,th-en,en-de")
    args = parser.parse_args()
    data = Path(args.data)
    model = HierarchicalEncoder.from_sentence_encoder("multilingual-e5-small")
    st = model.lower.model
    rows = []
    for prompt_name in ("query", "document"):
        st.default_prompt_name = prompt_name  # the switch a user has: hmde reads it on every call
        vectorizer = DocumentVectorizer(model, "mean")
        ids, eng = pud_documents(data / "eval" / "pud", "eng")
        english = vectorizer.encode(eng, ["eng"] * len(eng), normalize_embeddings=True)
        for lang in args.pud.split(","):
            lang_ids, docs = pud_documents(data / "eval" / "pud", lang)
            assert lang_ids == ids
            rows.append((prompt_name, f"PUD {lang}-eng P@1",
                         p_at_1(vectorizer.encode(docs, [lang] * len(docs), normalize_embeddings=True), english)))
        for pair in args.xquad.split(","):
            q_lang, d_lang = pair.split("-")
            topics, collection, qrels = load_xquad(data / "eval" / "xquad", q_lang, d_lang, unit="article")
            docs = vectorizer.encode(collection.texts, [d_lang] * len(collection.texts), normalize_embeddings=True)
            queries = model.encode_queries(topics.texts, normalize_embeddings=True)
            index = {d: i for i, d in enumerate(collection.doc_ids)}
            relevant = [index[next(iter(qrels[q]))] for q in topics.ids]
            rows.append((prompt_name, f"XQuAD {pair} article MAP", mean_average_precision(queries, docs, relevant)))
        print(f"done: {prompt_name}", flush=True)
    tasks = list(dict.fromkeys(task for _, task, _ in rows))
    value = {(p, t): v for p, t, v in rows}
    print("| task | `query: ` | `passage: ` |\n|---|---|---|")
    for task in tasks:
        print(f"| {task} | {value['query', task]:.3f} | {value['document', task]:.3f} |")
    for kind in ("PUD", "XQuAD"):
        q = np.mean([value["query", t] for t in tasks if t.startswith(kind)])
        p = np.mean([value["document", t] for t in tasks if t.startswith(kind)])
        print(f"| {kind} mean | {q:.3f} | {p:.3f} |")


if __name__ == "__main__":
    main()
