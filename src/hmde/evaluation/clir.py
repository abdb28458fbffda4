"""Cross-lingual retrieval: rank a whole collection for each query, score with ir-measures.

The paper's CLEF protocol: the query (title + description) is embedded by the lower
(sentence) encoder alone, documents by the document method, ranked by cosine over the
WHOLE collection (exact FAISS search). A re-ranking mode re-scores a given first-stage
run (TREC format), as the paper's public code did. Metrics come from ir-measures.

Loaders: generic TREC topics/qrels/run files with JSONL documents, CLEF-2003 SGML
collections, and XQuAD (question -> the article or paragraph holding its answer).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..errors import HmdeError, InputError
from ..io.documents import open_text, read_documents
from ..align.similarity import knn

DEFAULT_MEASURES = ("AP", "RR", "nDCG@10", "R@100")
ISO1_TO_ISO3 = {"ar": "ara", "de": "deu", "el": "ell", "en": "eng", "es": "spa", "hi": "hin", "ro": "ron",
                "ru": "rus", "th": "tha", "tr": "tur", "vi": "vie", "zh": "zho", "fi": "fin", "it": "ita",
                "fr": "fra", "nl": "nld", "sv": "swe"}


@dataclass
class Collection:
    doc_ids: list[str]
    texts: list
    lang: str | None
    files: list[str] = field(default_factory=list)


@dataclass
class Topics:
    ids: list[str]
    texts: list[str]
    lang: str | None
    files: list[str] = field(default_factory=list)


# -- generic TREC files ------------------------------------------------------------------
def read_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """TREC qrels: ``qid iter docid relevance`` per line."""
    qrels: dict[str, dict[str, int]] = {}
    with open_text(path) as f:
        for line_no, line in enumerate(f, 1):
            cols = line.split()
            if not cols:
                continue
            if len(cols) != 4:
                raise InputError(f"expected 'qid iter docid relevance', got {len(cols)} fields", str(path), line_no)
            try:
                rel = int(cols[3])
            except ValueError:
                raise InputError(f"relevance must be an integer, got {cols[3]!r}", str(path), line_no, "relevance")
            qrels.setdefault(cols[0], {})[cols[2]] = rel
    return qrels


def read_run(path: str | Path) -> dict[str, dict[str, float]]:
    """TREC run: ``qid Q0 docid rank score tag`` per line."""
    run: dict[str, dict[str, float]] = {}
    with open_text(path) as f:
        for line_no, line in enumerate(f, 1):
            cols = line.split()
            if not cols:
                continue
            if len(cols) != 6:
                raise InputError(f"expected 'qid Q0 docid rank score tag', got {len(cols)} fields", str(path), line_no)
            try:
                run.setdefault(cols[0], {})[cols[2]] = float(cols[4])
            except ValueError:
                raise InputError(f"score must be a number, got {cols[4]!r}", str(path), line_no, "score")
    return run


def check_run_field(value: str, what: str) -> None:
    """A TREC run's columns are split at whitespace: an id or tag holding any cannot be read back."""
    if not value or any(c.isspace() for c in value):
        raise HmdeError(f"the {what} {value!r} {'is empty' if not value else 'holds whitespace'}: a TREC run "
                        "separates its columns by whitespace, so no reader could take it back; rename it")


def write_run(path: str | Path, run: dict[str, dict[str, float]], tag: str = "hmde") -> None:
    from ..ground.atomic import write_text_atomic

    check_run_field(tag, "run tag")
    for qid, docs in run.items():
        check_run_field(qid, "query id")
        for doc in docs:
            check_run_field(doc, "document id")
    lines = []
    for qid, docs in run.items():
        for rank, (doc, score) in enumerate(sorted(docs.items(), key=lambda x: -x[1]), 1):
            lines.append(f"{qid} Q0 {doc} {rank} {score:.6f} {tag}\n")
    write_text_atomic(path, "".join(lines))


def read_topics(path: str | Path, lang: str | None = None) -> Topics:
    """Topics as TSV (``qid<TAB>text``) or JSONL (``qid``/``text`` or ``title``+``description``).
    A repeated query id is refused: a run holds one ranking per id, so the first would be lost."""
    ids, texts, first_line = [], [], {}
    with open_text(path) as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            if str(path).endswith((".jsonl", ".jsonl.gz")):
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(f"invalid JSON ({exc.msg})", str(path), line_no) from exc
                qid = rec.get("qid", rec.get("query_id"))
                text = rec.get("text") or " ".join(x for x in (rec.get("title"), rec.get("description")) if x)
                if qid is None or not text:
                    raise InputError("needs 'qid' and 'text' (or 'title'/'description')", str(path), line_no)
            else:
                cols = line.rstrip("\n").split("\t")
                if len(cols) < 2:
                    raise InputError("expected qid<TAB>text", str(path), line_no)
                qid, text = cols[0], " ".join(cols[1:])
            if not str(text).strip():  # a blank query was refused later with no file, line or id
                raise InputError(f"query '{qid}' is empty (only whitespace)", str(path), line_no, "text")
            if str(qid) in first_line:
                raise InputError(f"query id '{qid}' repeats line {first_line[str(qid)]}: ids must be unique",
                                 str(path), line_no, "qid")
            first_line[str(qid)] = line_no
            ids.append(str(qid))
            texts.append(text)
    return Topics(ids, texts, lang, [str(path)])


def read_collection(path: str | Path, lang: str | None = None) -> Collection:
    docs = list(read_documents(path))
    return Collection([d.doc_id for d in docs], [d.text for d in docs], lang or docs[0].lang, [str(path)])


# -- CLEF 2003 -----------------------------------------------------------------------------
_DOC = re.compile(r"<DOC>(.*?)</DOC>", re.S)
_DOCNO = re.compile(r"<DOCNO>\s*(.*?)\s*</DOCNO>", re.S)
_TAG = re.compile(r"<[^>]+>")
_TOP = re.compile(r"<top>(.*?)</top>", re.S | re.I)

# The text fields of each CLEF 2003 ad-hoc collection (the rest is metadata: DOCID, DATE,
# BYLINE, section and keyword fields...). Each tag is read wherever it occurs, in document order.
CLEF_TEXT_FIELDS = {
    "LA Times 1994 (eng)": ("HEADLINE", "TEXT"),  # paragraphs as <P> inside both
    "Glasgow Herald 1995 (eng)": ("HEADLINE", "TEXT"),
    "Frankfurter Rundschau 1994 (deu)": ("TITLE", "TEXT"),
    "Der Spiegel 1994/95 (deu)": ("TITLE", "LEAD", "TEXT"),
    "SDA 1994/95 (deu), ATS 1994/95 (fra), AGZ 1994/95 (ita)": ("TI", "LD", "TX"),
    "Le Monde 1994/95 (fra), La Stampa 1994 (ita), EFE 1994/95 (spa)": ("TITLE", "TEXT"),
    "Algemeen Dagblad, NRC Handelsblad 1994/95 (nld)": ("TI", "LE", "TE"),
    "Aamulehti 1994/95 (fin)": ("TEXT",),
    "Izvestia 1995 (rus)": ("TITLE", "RETRO", "TEXT"),
    "TT 1994/95 (swe)": ("TEXT",),
    "Folha, Publico 1994/95 (por)": ("TEXT",),
    "LA Times 2002 (eng)": ("HD", "LD", "TE"),
}
CLEF_TEXT_TAGS = tuple(dict.fromkeys(t for tags in CLEF_TEXT_FIELDS.values() for t in tags))


def read_sgml(path: str | Path, encoding: str | None = None) -> tuple[str, str]:
    """A CLEF file's text and the encoding it was read in; ``.gz`` is un-gzipped.

    With ``encoding`` the bytes must decode in it: an error names the line of the first
    byte that does not. Without it: UTF-8 when the file is valid UTF-8 (Izvestia, TT),
    else ISO-8859-1, the encoding of the other European CLEF 2003 collections (DIRECT's
    table). Nothing is ever replaced silently.
    """
    import gzip

    path = Path(path)
    try:
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    except FileNotFoundError:
        raise InputError("file not found", path=str(path)) from None
    except (OSError, EOFError) as exc:
        raise InputError(f"cannot read ({exc})", path=str(path)) from None
    if encoding is None:
        try:
            return data.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            return data.decode("iso-8859-1"), "iso-8859-1"
    try:
        return data.decode(encoding), encoding
    except LookupError:
        raise InputError(f"unknown encoding '{encoding}'", path=str(path)) from None
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"not {encoding} (byte 0x{data[exc.start]:02x}); give the file's --encoding "
                         "(CLEF 2003: iso-8859-1 for most collections, utf-8 for Izvestia and TT)",
                         str(path), line) from None


def read_clef_documents(paths: Sequence[str | Path], lang: str | None = None,
                        text_tags: Sequence[str] = CLEF_TEXT_TAGS, encoding: str | None = None) -> Collection:
    """CLEF SGML collections: ``<DOC><DOCNO>id</DOCNO> ... </DOC>``; the text is every field of
    ``text_tags`` in document order (:data:`CLEF_TEXT_FIELDS`), markup removed, entities decoded."""
    import html

    ids, texts = [], []
    fields = re.compile(rf"<({'|'.join(map(re.escape, text_tags))})(?:\s[^>]*)?>(.*?)</\1>", re.S | re.I)
    for path in paths:
        content, _ = read_sgml(path, encoding)
        for m in _DOC.finditer(content):
            body = m.group(1)
            docno = _DOCNO.search(body)
            if not docno:
                line = content.count("\n", 0, m.start()) + 1
                raise InputError("a <DOC> without <DOCNO>", str(path), line, "DOCNO")
            parts = [html.unescape(_TAG.sub(" ", f.group(2))) for f in fields.finditer(body)]
            ids.append(docno.group(1))
            texts.append(" ".join(" ".join(parts).split()))
    if not ids:
        raise InputError("no <DOC> elements found", str(paths[0]) if paths else None)
    return Collection(ids, texts, lang, [str(p) for p in paths])


def read_clef_topics(path: str | Path, lang: str | None = None, encoding: str | None = None) -> Topics:
    """CLEF topics: ``<top><num>C141</num><XX-title>..</XX-title><XX-desc>..</XX-desc></top>``
    (decoded as :func:`read_sgml` says)."""
    content, _ = read_sgml(path, encoding)
    ids, texts = [], []
    for m in _TOP.finditer(content):
        body = m.group(1)
        num = re.search(r"<num>\s*(.*?)\s*</num>", body, re.S | re.I)
        title = re.search(r"<(?:\w+-)?title>(.*?)</(?:\w+-)?title>", body, re.S | re.I)
        desc = re.search(r"<(?:\w+-)?desc>(.*?)</(?:\w+-)?desc>", body, re.S | re.I)
        if not num or not title:
            line = content.count("\n", 0, m.start()) + 1
            raise InputError("a <top> without <num> or <title>", str(path), line)
        text = " ".join(x.group(1).strip() for x in (title, desc) if x)
        ids.append(num.group(1))
        texts.append(" ".join(text.split()))
    if not ids:
        raise InputError("no <top> elements found", str(path))
    return Topics(ids, texts, lang, [str(path)])


# -- XQuAD -----------------------------------------------------------------------------------
def xquad_file(folder: str | Path, lang: str) -> Path:
    code = {v: k for k, v in ISO1_TO_ISO3.items()}.get(lang, lang)
    path = Path(folder) / f"xquad.{code}.json"
    if not path.exists():
        have = sorted(p.name.split(".")[1] for p in Path(folder).glob("xquad.*.json"))
        raise InputError(f"language '{lang}' is missing from XQuAD (have: {', '.join(have)})", path=str(folder))
    return path


def load_xquad(folder: str | Path, query_lang: str, doc_lang: str, unit: str = "article"
               ) -> tuple[Topics, Collection, dict[str, dict[str, int]]]:
    """Questions in ``query_lang``; articles (48) or paragraphs (240) in ``doc_lang``."""
    if unit not in ("article", "paragraph"):
        raise InputError(f"unit must be article or paragraph, got '{unit}'")
    qpath, dpath = xquad_file(folder, query_lang), xquad_file(folder, doc_lang)
    qdata = json.loads(qpath.read_text(encoding="utf-8"))["data"]
    ddata = json.loads(dpath.read_text(encoding="utf-8"))["data"]
    doc_ids, texts = [], []
    for a, article in enumerate(ddata):
        paragraphs = [p["context"] for p in article["paragraphs"]]
        if unit == "article":
            doc_ids.append(f"a{a}")
            texts.append(" ".join(paragraphs))
        else:
            for p, context in enumerate(paragraphs):
                doc_ids.append(f"a{a}p{p}")
                texts.append(context)
    q_ids, q_texts, qrels = [], [], {}
    for a, article in enumerate(qdata):
        for p, para in enumerate(article["paragraphs"]):
            for qa in para["qas"]:
                q_ids.append(qa["id"])
                q_texts.append(qa["question"])
                qrels[qa["id"]] = {f"a{a}" if unit == "article" else f"a{a}p{p}": 1}
    topics = Topics(q_ids, q_texts, query_lang, [str(qpath)])
    return topics, Collection(doc_ids, texts, doc_lang, [str(dpath)]), qrels


# -- ranking and scoring ---------------------------------------------------------------------
def rank(query_vectors: np.ndarray, doc_vectors: np.ndarray, query_ids: Sequence[str], doc_ids: Sequence[str],
         depth: int = 1000) -> dict[str, dict[str, float]]:
    """Each query's top ``depth`` documents of the whole collection by cosine."""
    sims, idx = knn(query_vectors, doc_vectors, min(depth, len(doc_ids)))
    return {q: {doc_ids[j]: float(s) for s, j in zip(sims[i], idx[i]) if j >= 0} for i, q in enumerate(query_ids)}


def rank_scores(scores: np.ndarray, query_ids: Sequence[str], doc_ids: Sequence[str],
                depth: int = 1000) -> dict[str, dict[str, float]]:
    """Each query's top ``depth`` documents by a (queries, documents) score matrix."""
    depth = min(depth, len(doc_ids))
    out = {}
    for i, q in enumerate(query_ids):
        top = np.argsort(-scores[i], kind="stable")[:depth]
        out[q] = {doc_ids[j]: float(scores[i, j]) for j in top}
    return out


def rerank(query_vectors: np.ndarray, doc_vectors: np.ndarray, query_ids: Sequence[str], doc_ids: Sequence[str],
           first_stage: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Re-score a first-stage run's documents by cosine; unknown documents are an error."""
    from ..align.similarity import normalize

    q, d = normalize(query_vectors), normalize(doc_vectors)
    row = {doc: i for i, doc in enumerate(doc_ids)}
    out = {}
    for i, qid in enumerate(query_ids):
        docs = first_stage.get(qid, {})
        missing = [doc for doc in docs if doc not in row]
        if missing:
            raise InputError(f"the first-stage run names {len(missing)} document(s) not in the collection, e.g. "
                             f"'{missing[0]}' (query {qid})")
        out[qid] = {doc: float(q[i] @ d[row[doc]]) for doc in docs}
    return out


def check_qrels(qrels: dict[str, dict[str, int]], query_ids: Sequence[str], doc_ids: Sequence[str]) -> list[str]:
    """Warnings for qrels naming unknown documents or queries (they would score silently as misses)."""
    known_docs, known_q = set(doc_ids), set(query_ids)
    unknown = sorted({d for docs in qrels.values() for d in docs} - known_docs)
    warnings = []
    if unknown:
        warnings.append(f"qrels name {len(unknown)} document(s) not in the collection, e.g. '{unknown[0]}'")
    no_topic = sorted(set(qrels) - known_q)
    if no_topic:
        warnings.append(f"qrels name {len(no_topic)} query id(s) with no topic, e.g. '{no_topic[0]}'")
    if not set(qrels) & known_q:
        raise InputError("no query of the topics has relevance judgements: check that qrels and topics match")
    return warnings


def parse_measures(text: str) -> list[str]:
    """``--measures``: comma-separated ir-measures names, checked before any model loads."""
    import ir_measures

    names = [m.strip() for m in text.split(",") if m.strip()]
    if not names:
        raise HmdeError("--measures names no measure (e.g. AP,RR,nDCG@10)")
    for name in names:
        try:
            ir_measures.parse_measure(name)
        except (NameError, ValueError, TypeError, SyntaxError) as exc:
            raise HmdeError(f"--measures: '{name}' is not an ir-measures measure ({exc}); e.g. AP, RR, nDCG@10, "
                            "P@5, R@100") from None
    return names


def score_run(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]],
              measures: Sequence[str] = DEFAULT_MEASURES) -> dict[str, float]:
    """Aggregate measures (ir-measures) over the queries that have judgements."""
    import ir_measures

    parsed = [ir_measures.parse_measure(m) for m in measures]
    judged_run = {q: docs for q, docs in run.items() if q in qrels}
    for q in qrels:
        judged_run.setdefault(q, {})
    result = ir_measures.calc_aggregate(parsed, qrels, judged_run)
    return {str(m): float(result[m]) for m in parsed}


def evaluate_clir(encode_queries: Callable[[Sequence[str], str | None], np.ndarray],
                  encode_documents: Callable[[Sequence, str | None], np.ndarray],
                  topics: Topics, collection: Collection, qrels: dict[str, dict[str, int]],
                  measures: Sequence[str] = DEFAULT_MEASURES, first_stage: dict | None = None,
                  depth: int = 1000) -> tuple[dict, dict, list[str]]:
    """(metrics, run, warnings) for one query-language / document-language pair."""
    warnings = check_qrels(qrels, topics.ids, collection.doc_ids)
    qv = encode_queries(topics.texts, topics.lang)
    dv = encode_documents(collection.texts, collection.lang)
    if first_stage is not None:
        run = rerank(qv, dv, topics.ids, collection.doc_ids, first_stage)
    else:
        run = rank(qv, dv, topics.ids, collection.doc_ids, depth)
    return score_run(qrels, run, measures), run, warnings


# -- results by document length ----------------------------------------------------------------
def per_query_scores(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]], measure: str
                     ) -> dict[str, float]:
    """One measure per judged query (ir-measures); a query with nothing retrieved scores 0."""
    import ir_measures

    parsed = ir_measures.parse_measure(measure)
    scores = {q: 0.0 for q in qrels}
    for row in ir_measures.iter_calc([parsed], qrels, {q: run.get(q, {}) for q in qrels}):
        scores[row.query_id] = float(row.value)
    return scores


def length_label(n: int, bounds: Sequence[int]) -> str:
    """The bucket of a document of ``n`` sentences: bounds 8,16,32 -> 1-8, 9-16, 17-32, 33+."""
    low = 1
    for b in bounds:
        if n <= b:
            return f"{low}-{b}"
        low = b + 1
    return f"{low}+"


def scores_by_length(qrels: dict[str, dict[str, int]], scores: dict[str, float], sentences: dict[str, int],
                     bounds: Sequence[int]) -> dict[str, list[float]]:
    """Per-query scores grouped by the sentence count of each query's (first) relevant document.

    The paper's claim is that the document transformer helps most on long documents; this
    tells whether it does, query by query.
    """
    groups: dict[str, list[float]] = {}
    for q, score in scores.items():
        relevant = [d for d, r in qrels.get(q, {}).items() if r > 0 and d in sentences]
        if relevant:
            groups.setdefault(length_label(sentences[relevant[0]], bounds), []).append(score)
    return groups
