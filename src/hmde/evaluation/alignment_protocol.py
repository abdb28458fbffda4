"""Document alignment run end to end with an evaluation encoder: concept-aligned collections
(one file per language, pairs of languages) or WMT16's web domains (.lett files and gold pairs).
``hmde eval align`` parses its flags into these calls."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from .alignment import alignment_metrics, combine_domains, load_concept_documents, load_lett


def align_domains(enc, lett_files: Sequence[str], gold: str, src_lang: str, tgt_lang: str, scoring: str, k: int,
                  matching: str, report: Callable[[str], None] = print) -> tuple[dict, list, str]:
    """(metrics, files, dataset name): each web domain aligned on its own, recall over all of them."""
    domains = {Path(p).name.removesuffix(".gz").removesuffix(".lett"): load_lett(p, gold, src_lang, tgt_lang)
               for p in lett_files}
    enc.prepare([(d.texts, d.lang) for pair in domains.values() for d in pair])
    per_domain = {}
    for name, (src, tgt) in domains.items():
        m = alignment_metrics(enc.documents(src.texts, src.lang), enc.documents(tgt.texts, tgt.lang),
                              src.concepts, tgt.concepts, scoring, k, matching)
        per_domain[name] = m
        report(f"{name}: recall {m['recall']:.3f} ({m['found_pairs']}/{m['gold_pairs']})  P@1 {m['p@1']:.3f}")
    total = combine_domains(per_domain)
    report(f"recall over {len(domains)} domain(s): {total['recall']:.4f} ({total['found_pairs']}/"
           f"{total['gold_pairs']})")
    metrics = {"domains": per_domain, "all_domains": total, "average": total["recall"], "headline": "recall"}
    files = sorted({f for pair in domains.values() for d in pair for f in d.files})
    return metrics, files, ",".join(sorted(domains))


def align_language_pairs(enc, folder: str | Path, pairs: Sequence[tuple[str, str]], scoring: str, k: int,
                         matching: str, report: Callable[[str], None] = print) -> tuple[dict, list]:
    """(metrics, files): every pair of concept-aligned collections, each language encoded once."""
    sets = {lang: load_concept_documents(folder, lang) for pair in pairs for lang in pair}
    enc.prepare([(s.texts, s.lang) for s in sets.values()])
    per_pair = {}
    for a, b in pairs:
        m = alignment_metrics(enc.documents(sets[a].texts, a), enc.documents(sets[b].texts, b),
                              sets[a].concepts, sets[b].concepts, scoring, k, matching)
        per_pair[f"{a}-{b}"] = m
        report(f"{a}-{b}: P@1 {m['p@1_src->tgt']:.3f} / {m['p@1_tgt->src']:.3f}  recall {m['recall']:.3f}")
    metrics = {"pairs": per_pair, "average": float(np.mean([m["p@1"] for m in per_pair.values()]))}
    return metrics, [f for s in sets.values() for f in s.files]
