"""Which prefix should multilingual-e5-small put before the sentences of documents?

The model card asks for "query: " or "passage: " on every input. Queries get "query: ". For the
sentences that hmde embeds inside documents (methods mean, hmde, lawdr, ...) this script measures
the prefixes on the dev sets, with method ``mean``, queries through the lower encoder alone (``--prompts``
picks the arms: ``query``, ``passage`` and ``none``, bare, hmde's default since stop 36). Each arm names
its literal prefix, not the folder's ``document`` prompt, so the arms stay what they say whatever the
folder's default is:

- PUD document alignment, P@1 of each language's 397 documents against English (both directions);
- XQuAD: questions in one language, whole articles in another, MAP (one relevant article each);
- sentence-query tasks (``--sq``: folders of ``topics.tsv``, ``qrels.txt`` and ``documents.jsonl`` as
  ``hmde recipe e5`` builds them, e.g. eng Bible verses against spa chapters), MAP by ``hmde eval
  clir``'s own protocol code, also split by the relevant document's length in sentences.

    python benchmarks/e5_prefixes.py --data ../shared/data [--pud deu,ell,...] [--xquad de-en,...]
    python benchmarks/e5_prefixes.py --pud "" --xquad "" --sq runs/e5/sq-bible-eng-spa,runs/e5/sq-wmt-eng-deu

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


def sentence_queries(model, folder: Path, bounds: list[int]) -> list[tuple[str, float]]:
    """MAP of one sentence-query task through ``hmde eval clir``'s code (method ``mean``, queries
    with ``query: ``), then MAP by the relevant document's length in sentences."""
    from hmde.evaluation.clir_protocol import file_task, run_clir_tasks
    from hmde.evaluation.encoders import EvalEncoder

    lang = folder.name.split("-")[-1]
    task = file_task(str(folder / "topics.tsv"), str(folder / "qrels.txt"), [str(folder / "documents.jsonl")],
                     "eng", lang)
    metrics, _, _ = run_clir_tasks(EvalEncoder(model, "mean"), [task], ["AP"], bounds=bounds,
                                   warn=lambda _: None, report=lambda _: None)
    rows = [(f"sq {folder.name} MAP", metrics["average"])]
    rows += [(f"sq {folder.name} MAP, documents of {label} sentences ({row['queries']} queries)", row["AP"])
             for label, row in metrics["by_length"].items()]
    return rows


def record(rows: list, prompt_name: str, task: str, value: float) -> None:
    """Keep one figure and print it at once, so that a run cut short keeps what it measured."""
    rows.append((prompt_name, task, value))
    print(f"{prompt_name}: {task}: {value:.3f}", flush=True)


def main() -> None:
    from hmde.evaluation.clir import load_xquad
    from hmde.encoders.hierarchical import HierarchicalEncoder
    from hmde.methods.vectorizer import DocumentVectorizer

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument("--pud", default="deu,rus,zho,ara,hin,tha,fin,kor")
    parser.add_argument("--xquad", default="de-en,ru-en,zh-en,ar-en,el-en,hi-en,th-en,en-de")
    parser.add_argument("--sq", default="", help="sentence-query task folders, comma-separated (eng queries; the "
                        "documents' language is the folder name's last part)")
    parser.add_argument("--length-buckets", default="16,24,32,48")
    parser.add_argument("--prompts", default="query,passage,none",
                        help="document-sentence prefixes to compare: query (query: ), passage (passage: ), none (bare)")
    args = parser.parse_args()
    arms = {"query": "query: ", "passage": "passage: ", "none": ""}
    heads = {name: f"`{prefix}`" if prefix else "bare" for name, prefix in arms.items()}
    prompt_names = args.prompts.split(",")
    if unknown := [p for p in prompt_names if p not in arms]:
        parser.error(f"--prompts: unknown {', '.join(unknown)}; choose from {', '.join(arms)}")
    data = Path(args.data)
    bounds = [int(b) for b in args.length_buckets.split(",")]
    model = HierarchicalEncoder.from_sentence_encoder("multilingual-e5-small")
    st = model.lower.model
    st.prompts = {**st.prompts, **arms}  # each arm one more named prompt (the bare one empty)
    rows = []
    for prompt_name in prompt_names:
        st.default_prompt_name = prompt_name  # the switch a user has: hmde reads it on every call
        vectorizer = DocumentVectorizer(model, "mean")
        if args.pud:
            ids, eng = pud_documents(data / "eval" / "pud", "eng")
            english = vectorizer.encode(eng, ["eng"] * len(eng), normalize_embeddings=True)
        for lang in filter(None, args.pud.split(",")):
            lang_ids, docs = pud_documents(data / "eval" / "pud", lang)
            assert lang_ids == ids
            record(rows, prompt_name, f"PUD {lang}-eng P@1",
                   p_at_1(vectorizer.encode(docs, [lang] * len(docs), normalize_embeddings=True), english))
        for pair in filter(None, args.xquad.split(",")):
            q_lang, d_lang = pair.split("-")
            topics, collection, qrels = load_xquad(data / "eval" / "xquad", q_lang, d_lang, unit="article")
            docs = vectorizer.encode(collection.texts, [d_lang] * len(collection.texts), normalize_embeddings=True)
            queries = model.encode_queries(topics.texts, normalize_embeddings=True)
            index = {d: i for i, d in enumerate(collection.doc_ids)}
            relevant = [index[next(iter(qrels[q]))] for q in topics.ids]
            record(rows, prompt_name, f"XQuAD {pair} article MAP", mean_average_precision(queries, docs, relevant))
        for folder in filter(None, args.sq.split(",")):
            for task, value in sentence_queries(model, Path(folder), bounds):
                record(rows, prompt_name, task, value)
        print(f"done: {prompt_name}", flush=True)
    tasks = list(dict.fromkeys(task for _, task, _ in rows))
    value = {(p, t): v for p, t, v in rows}
    print("| task | " + " | ".join(heads[p] for p in prompt_names) + " |\n|---" + "|---" * len(prompt_names) + "|")
    for task in tasks:
        print(f"| {task} | " + " | ".join(f"{value[p, task]:.3f}" for p in prompt_names) + " |")
    for kind in ("PUD", "XQuAD", "sq"):
        kept = [t for t in tasks if t.startswith(kind) and "sentences" not in t]
        if kept:
            print(f"| {kind} mean | " + " | ".join(f"{np.mean([value[p, t] for t in kept]):.3f}" for p in prompt_names)
                  + " |")


if __name__ == "__main__":
    main()
