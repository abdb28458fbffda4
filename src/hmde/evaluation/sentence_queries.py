"""Sentence-query retrieval over long documents: one sentence of a document is the query, the
collection is the same documents in another language, the translation of its document is relevant.

Why: this is the comparison the CLIR protocol makes (a short query through the lower encoder
alone, documents through the whole model), on documents much longer than a query, where the
paper claims the document transformer helps most. XQuAD has 48 articles; parallel documents
(Bible chapters, WMT news stretches) give thousands. Documents that share a sentence with a
training file (``exclude``) are left out of the collection, so that a model is not tested on
what it was trained on.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from ..ground.atomic import write_text_atomic
from ..errors import InputError
from ..io.documents import open_text
from ..text.segmentation import split_sentences


@dataclass
class ParallelDocument:
    doc_id: str
    concept: str
    lang: str
    sentences: list[str]


def read_parallel_documents(path: str | Path) -> list[ParallelDocument]:
    """Documents with ``doc_id``, ``concept``, ``lang`` and ``verses`` (pre-split) or ``text``."""
    out = []
    with open_text(path) as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"invalid JSON ({exc.msg})", str(path), line_no) from exc
            for field in ("doc_id", "concept", "lang"):
                if not isinstance(rec.get(field), str) or not rec[field]:
                    raise InputError("missing or not a string", str(path), line_no, field)
            sentences = rec.get("verses")
            if not isinstance(sentences, list):
                text = rec.get("text")
                if not isinstance(text, str):
                    raise InputError("needs 'verses' (a list) or 'text' (a string)", str(path), line_no, "text")
                sentences = split_sentences(text, rec["lang"])
            sentences = [s.strip() for s in sentences if isinstance(s, str) and s.strip()]
            if sentences:
                out.append(ParallelDocument(rec["doc_id"], rec["concept"], rec["lang"], sentences))
    return out


def _key(sentence: str) -> str:
    return " ".join(sentence.lower().split())


def build_task(documents: Sequence[ParallelDocument], query_lang: str, doc_lang: str, max_queries: int = 2000,
               seed: int = 0, exclude: Iterable[ParallelDocument] = ()) -> tuple[list, list, dict]:
    """(topics [(qid, text)], collection [(doc_id, text, n_sentences)], qrels {qid: {doc_id: 1}}).

    Concepts present in both languages, none of whose sentences occurs in ``exclude``
    (either language), form the collection; queries are sampled uniformly from the
    query-language sentences of those concepts.
    """
    seen = {_key(s) for d in exclude for s in d.sentences}
    by_lang: dict[str, dict[str, ParallelDocument]] = {query_lang: {}, doc_lang: {}}
    for d in documents:
        if d.lang in by_lang:
            by_lang[d.lang].setdefault(d.concept, d)
    concepts = sorted(set(by_lang[query_lang]) & set(by_lang[doc_lang]))
    concepts = [c for c in concepts if not any(_key(s) in seen for lang in (query_lang, doc_lang)
                                               for s in by_lang[lang][c].sentences)]
    if not concepts:
        raise InputError(f"no document exists in both {query_lang} and {doc_lang} (outside the excluded ones)")
    candidates = [(c, i) for c in concepts for i in range(len(by_lang[query_lang][c].sentences))]
    picks = sorted(random.Random(seed).sample(candidates, min(max_queries, len(candidates))))
    topics, qrels = [], {}
    for n, (c, i) in enumerate(picks):
        qid = f"q{n}"
        topics.append((qid, by_lang[query_lang][c].sentences[i]))
        qrels[qid] = {by_lang[doc_lang][c].doc_id: 1}
    collection = [(by_lang[doc_lang][c].doc_id, by_lang[doc_lang][c].sentences) for c in concepts]
    return topics, collection, qrels


def write_task(out_dir: str | Path, topics, collection, qrels, doc_lang: str) -> dict[str, Path]:
    """topics.tsv, qrels.txt (TREC) and documents.jsonl (pre-split) for ``hmde eval clir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {"topics": out / "topics.tsv", "qrels": out / "qrels.txt", "documents": out / "documents.jsonl"}
    write_text_atomic(files["topics"], "".join(f"{q}\t{' '.join(t.split())}\n" for q, t in topics))
    write_text_atomic(files["qrels"], "".join(f"{q} 0 {d} {r}\n" for q, docs in qrels.items() for d, r in docs.items()))
    write_text_atomic(files["documents"], "".join(
        json.dumps({"doc_id": d, "text": sentences, "lang": doc_lang}, ensure_ascii=False) + "\n"
        for d, sentences in collection))
    return files
