"""The CLIR protocol run end to end on tasks: queries through the lower encoder, documents
through the method (or their sentences, multi-vector), a ranking per task, trec_eval measures,
and MAP by document length. ``hmde eval clir`` parses its flags into these calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from . import clir


@dataclass
class ClirTask:
    name: str  # "eng-deu": query language - document language
    topics: clir.Topics
    collection: clir.Collection
    qrels: dict[str, dict[str, int]]


@dataclass
class SentenceScoring:
    """Multi-vector ranking (:mod:`hmde.index.multivector`): documents scored by their best sentences."""

    kind: str  # context (HMDE's contextualised sentence vectors) or lower (the sentence encoder's)
    top_sentences: int = 1
    doc_weight: float = 0.0


def xquad_tasks(folder: str | Path, pairs: Sequence[tuple[str, str]], unit: str) -> list[ClirTask]:
    return [ClirTask(f"{q}-{d}", *clir.load_xquad(folder, q, d, unit)) for q, d in pairs]


def file_task(topics_path: str, qrels_path: str, documents: Sequence[str], query_lang: str | None,
              doc_lang: str | None, clef: bool = False, encoding: str | None = None) -> ClirTask:
    """One task from files: TSV/JSONL topics and collection, or CLEF's SGML (``clef``)."""
    if clef:
        topics = clir.read_clef_topics(topics_path, query_lang, encoding=encoding)
        coll = clir.read_clef_documents(documents, doc_lang, encoding=encoding)
    else:
        topics = clir.read_topics(topics_path, query_lang)
        coll = clir.read_collection(documents[0], doc_lang)
    return ClirTask(f"{query_lang or 'q'}-{doc_lang or coll.lang or 'd'}", topics, coll, clir.read_qrels(qrels_path))


def task_run(enc, task: ClirTask, first_stage: dict | None, scoring: SentenceScoring | None) -> dict:
    """One task's ranking (query id -> doc id -> score) with the evaluation encoder ``enc``."""
    from ..index.multivector import score_documents

    topics, coll = task.topics, task.collection
    qv = enc.queries(topics.texts, topics.lang)
    if scoring is not None:
        sentences = enc.sentence_matrix(coll.texts, coll.lang, scoring.kind)  # context: documents too
        dv = enc.documents(coll.texts, coll.lang) if scoring.doc_weight else None
        scores = score_documents(qv, sentences, scoring.top_sentences, dv, scoring.doc_weight)
        return clir.rank_scores(scores, topics.ids, coll.doc_ids)
    dv = enc.documents(coll.texts, coll.lang)
    if first_stage:
        return clir.rerank(qv, dv, topics.ids, coll.doc_ids, first_stage)
    return clir.rank(qv, dv, topics.ids, coll.doc_ids)


def document_lengths(coll: clir.Collection) -> dict[str, int]:
    """Sentences per document (a list of sentences counts as given)."""
    from ..text.segmentation import split_sentences

    return {d: len(t) if isinstance(t, list) else len(split_sentences(t, coll.lang))
            for d, t in zip(coll.doc_ids, coll.texts)}


def run_clir_tasks(enc, tasks: Sequence[ClirTask], measures: Sequence[str], first_stage: dict | None = None,
                   bounds: Sequence[int] | None = None, scoring: SentenceScoring | None = None,
                   warn: Callable[[str], None] = print, report: Callable[[str], None] = print
                   ) -> tuple[dict, dict, set]:
    """(metrics, the whole run, the files read). ``metrics``: each task's measures, their averages
    (the first measure is the headline) and, with ``bounds``, the headline by document length."""
    enc.prepare([(c.texts, c.lang) for c in {t.collection.files[0]: t.collection for t in tasks}.values()])
    by_length: dict[str, list[float]] = {}
    per_task, files, full_run = {}, set(), {}
    main = measures[0]
    for task in tasks:
        for w in clir.check_qrels(task.qrels, task.topics.ids, task.collection.doc_ids):
            warn(f"{task.name}: {w}")
        run = task_run(enc, task, first_stage, scoring)
        scores = clir.score_run(task.qrels, run, list(measures))
        per_task[task.name] = scores
        if bounds:
            per_query = clir.per_query_scores(task.qrels, run, main)
            lengths = document_lengths(task.collection)
            for label, values in clir.scores_by_length(task.qrels, per_query, lengths, bounds).items():
                by_length.setdefault(label, []).extend(values)
        full_run.update({f"{task.name}:{q}" if len(tasks) > 1 else q: docs for q, docs in run.items()})
        files.update(task.topics.files + task.collection.files)
        report(f"{task.name}: " + "  ".join(f"{k} {v:.4f}" for k, v in scores.items()))
    metrics = {"pairs": per_task, "main_measure": main,
               "average": float(np.mean([s[main] for s in per_task.values()])),
               "averages": {m: float(np.mean([s[m] for s in per_task.values()])) for m in measures}}
    if by_length:
        order = [clir.length_label(b, bounds) for b in bounds] + [clir.length_label(bounds[-1] + 1, bounds)]
        metrics["by_length"] = {label: {"queries": len(by_length[label]), main: float(np.mean(by_length[label]))}
                                for label in order if label in by_length}
        for label, row in metrics["by_length"].items():
            report(f"documents of {label} sentences: {main} {row[main]:.4f} ({row['queries']} queries)")
    return metrics, full_run, files
