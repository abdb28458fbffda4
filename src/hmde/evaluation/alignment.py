"""Parallel document alignment (PUD, WMT16 ``.lett``): P@1 both ways and recall.

Documents of two languages share a ``concept`` id when they translate each other.
Each source document retrieves its best target (cosine or margin, see
:mod:`hmde.align.similarity`); P@1 is scored with scikit-learn. Recall is the share of gold
pairs found by the one-to-one alignment: greedy over the full score matrix (LAWDR's
procedure), the Hungarian assignment, or LASER's top-1 ``max`` mode. WMT16 is scored as
the shared task does: documents are matched within their web domain, recall is summed
over the domains' gold pairs.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
from sklearn.metrics import accuracy_score

from ..errors import InputError
from ..io.documents import open_text, read_documents
from ..align.similarity import align, full_scores, match_one_to_one, score_candidates


@dataclass
class DocumentSet:
    ids: list[str]
    texts: list
    concepts: list[str]
    lang: str
    files: list[str]


def load_concept_documents(folder: str | Path, lang: str, text_field: str = "text") -> DocumentSet:
    """``folder/<lang>.jsonl(.gz)`` with ``doc_id``, ``concept`` and text."""
    folder = Path(folder)
    path = next((p for p in (folder / f"{lang}.jsonl.gz", folder / f"{lang}.jsonl") if p.exists()), None)
    if path is None:
        have = sorted(p.name.split(".")[0] for p in folder.glob("*.jsonl*"))
        raise InputError(f"language '{lang}' is missing (have: {', '.join(have) or 'none'})", path=str(folder))
    ids, texts, concepts = [], [], []
    for line, rec in enumerate(read_documents(path, text_field=text_field, keep_fields=("concept",)), 1):
        if "concept" not in rec.extra:
            raise InputError("no 'concept' field", str(path), line, "concept")
        ids.append(rec.doc_id)
        texts.append(rec.text)
        concepts.append(str(rec.extra["concept"]))
    return DocumentSet(ids, texts, concepts, lang, [str(path)])


def load_lett(path: str | Path, pairs_path: str | Path, src_lang: str = "en", tgt_lang: str = "fr"
              ) -> tuple[DocumentSet, DocumentSet]:
    """A WMT16 bilingual document alignment domain: ``.lett`` (lang, mime, encoding, url,
    base64 HTML, base64 text per line) and gold ``src_url<TAB>tgt_url`` pairs."""
    sides = {src_lang: ([], []), tgt_lang: ([], [])}
    with open_text(path) as f:
        for line_no, line in enumerate(f, 1):
            cols = line.rstrip("\n").split("\t")
            if len(cols) < 6:
                raise InputError(f"expected 6 tab-separated fields, got {len(cols)}", str(path), line_no)
            if cols[0] in sides:
                try:
                    text = base64.b64decode(cols[5]).decode("utf-8")  # .lett text is UTF-8 whatever the page was
                except UnicodeDecodeError as exc:
                    raise InputError(f"the decoded text is not UTF-8 ({exc.reason})", str(path), line_no,
                                     "text") from None
                except ValueError as exc:
                    raise InputError(f"bad base64 ({exc})", str(path), line_no, "text") from exc
                sides[cols[0]][0].append(cols[3])
                sides[cols[0]][1].append(text)
    concept_of: dict[str, str] = {}
    with open_text(pairs_path) as f:
        for line_no, line in enumerate(f, 1):
            cols = line.rstrip("\n").split("\t")
            if len(cols) < 2:
                raise InputError("expected source URL<TAB>target URL", str(pairs_path), line_no)
            concept_of[cols[0]] = concept_of[cols[1]] = f"gold{line_no}"
    out = []
    for lang, (urls, texts) in sides.items():
        concepts = [concept_of.get(u, f"none:{u}") for u in urls]
        out.append(DocumentSet(urls, texts, concepts, lang, [str(path), str(pairs_path)]))
    return out[0], out[1]


def alignment_metrics(src: np.ndarray, tgt: np.ndarray, src_concepts: Sequence[str], tgt_concepts: Sequence[str],
                      scoring: str = "cosine", k: int = 4, matching: str = "greedy") -> dict:
    """P@1 in both directions over documents whose translation exists, and one-to-one recall.

    Recall is the share of gold pairs in the one-to-one matching: ``greedy`` over the full
    score matrix (LAWDR's procedure, default), ``hungarian``, or ``top1`` (LASER's max mode
    over each side's best candidate, which leaves documents unmatched)."""
    tgt_index = {c: j for j, c in enumerate(tgt_concepts)}
    src_index = {c: i for i, c in enumerate(src_concepts)}
    gold = [(i, tgt_index[c]) for i, c in enumerate(src_concepts) if c in tgt_index]
    if not gold:
        raise InputError("no concept occurs on both sides: nothing to align")
    fwd, bwd = score_candidates(src, tgt, scoring, k)
    gi = np.array([i for i, _ in gold])
    gj = np.array([j for _, j in gold])
    p_fwd = accuracy_score(gj, fwd.ids[gi, 0])
    p_bwd = accuracy_score(gi, bwd.ids[gj, 0])
    if matching == "top1":
        matched = align(src, tgt, scoring, k, direction="max")
    else:
        matched = match_one_to_one(full_scores(src, tgt, scoring, k), matching)
    found = {(i, j) for i, j, _ in matched}
    hits = sum((i, j) in found for i, j in gold)
    recall = hits / len(gold)
    return {"p@1_src->tgt": float(p_fwd), "p@1_tgt->src": float(p_bwd), "p@1": float((p_fwd + p_bwd) / 2),
            "recall": float(recall), "found_pairs": int(hits), "matching": matching, "gold_pairs": len(gold), "src_docs": len(src_concepts),
            "tgt_docs": len(tgt_concepts), "unmatched_src": len(src_concepts) - len(gold),
            "unmatched_tgt": len(tgt_concepts) - len(src_index.keys() & tgt_index.keys())}


def evaluate_alignment(encode: Callable[[Sequence, str], np.ndarray], folder: str | Path, pairs: Sequence[tuple[str, str]],
                       scoring: str = "cosine", k: int = 4) -> dict:
    """Per language pair metrics and their average P@1; each language is encoded once."""
    cache: dict[str, tuple[DocumentSet, np.ndarray]] = {}

    def get(lang):
        if lang not in cache:
            docs = load_concept_documents(folder, lang)
            cache[lang] = (docs, encode(docs.texts, lang))
        return cache[lang]

    per_pair, files = {}, set()
    for a, b in pairs:
        (da, va), (db, vb) = get(a), get(b)
        files.update(da.files + db.files)
        per_pair[f"{a}-{b}"] = alignment_metrics(va, vb, da.concepts, db.concepts, scoring, k)
    average = float(np.mean([m["p@1"] for m in per_pair.values()]))
    return {"pairs": per_pair, "average": average, "files": sorted(files)}


def combine_domains(per_domain: dict[str, dict]) -> dict:
    """WMT16's aggregate over web domains: found gold pairs / all gold pairs (micro recall)."""
    gold = sum(m["gold_pairs"] for m in per_domain.values())
    found = sum(m["found_pairs"] for m in per_domain.values())
    return {"recall": found / gold if gold else 0.0, "found_pairs": found, "gold_pairs": gold,
            "domains": len(per_domain),
            "p@1": float(np.average([m["p@1"] for m in per_domain.values()],
                                    weights=[m["gold_pairs"] for m in per_domain.values()]))}
