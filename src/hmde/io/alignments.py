"""Sentence alignments as files: hmde's JSONL (one bead per line, with the texts), Vecalign's
``[i, ...]:[j, ...]:score`` lines, and a two-column TSV bitext for MT training."""

from __future__ import annotations

import json
from typing import Iterable, Sequence

FORMATS = ("jsonl", "vecalign", "tsv")


def alignment_lines(src_doc: str, tgt_doc: str, src: Sequence[str], tgt: Sequence[str], beads: Iterable, fmt: str,
                    min_score: float | None = None) -> list[str]:
    """The lines of one document pair's beads (:class:`hmde.align.sentence_alignment.Bead`) in ``fmt``; TSV holds
    only beads with both sides, scoring at least ``min_score``."""
    out = []
    for bead in beads:
        src_text = " ".join(src[i] for i in bead.src)
        tgt_text = " ".join(tgt[j] for j in bead.tgt)
        if fmt == "jsonl":
            out.append(json.dumps({"src_doc": src_doc, "tgt_doc": tgt_doc, "src": bead.src, "tgt": bead.tgt,
                                   "score": round(bead.score, 6), "src_text": src_text, "tgt_text": tgt_text},
                                  ensure_ascii=False) + "\n")
        elif fmt == "vecalign":
            out.append(f"{bead.src}:{bead.tgt}:{bead.score:.6f}\n")
        elif fmt == "tsv":
            if bead.src and bead.tgt and (min_score is None or bead.score >= min_score):
                out.append(f"{_one_line(src_text)}\t{_one_line(tgt_text)}\n")
        else:
            raise ValueError(f"unknown alignment format {fmt!r} ({', '.join(FORMATS)})")
    return out


def _one_line(text: str) -> str:
    return " ".join(text.split())
