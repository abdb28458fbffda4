"""Sentence alignments as files: hmde's JSONL (one bead per line, with the texts and, where hmde split the
documents, each sentence's character span), Vecalign's ``[i, ...]:[j, ...]:score`` lines, and a TSV bitext for MT
training (the two texts first, then the bead's score and the two document ids, under a header line)."""

from __future__ import annotations

import json
from typing import Iterable, Sequence

FORMATS = ("jsonl", "vecalign", "tsv")
TSV_HEADER = "src_text\ttgt_text\tscore\tsrc_doc\ttgt_doc\n"  # `cut -f1,2` gives the plain bitext


def alignment_lines(src_doc: str, tgt_doc: str, src: Sequence[str], tgt: Sequence[str], beads: Iterable, fmt: str,
                    min_score: float | None = None, src_spans: Sequence[tuple[int, int]] | None = None,
                    tgt_spans: Sequence[tuple[int, int]] | None = None) -> list[str]:
    """The lines of one document pair's beads (:class:`hmde.align.sentence_alignment.Bead`) in ``fmt``; TSV holds
    only beads with both sides, scoring at least ``min_score``. ``src_spans``/``tgt_spans``: each sentence's
    ``[start, end)`` in the text hmde split (-1, -1: not found), written with the JSONL beads."""
    out = []
    for bead in beads:
        src_text = " ".join(src[i] for i in bead.src)
        tgt_text = " ".join(tgt[j] for j in bead.tgt)
        if fmt == "jsonl":
            line = {"src_doc": src_doc, "tgt_doc": tgt_doc, "src": bead.src, "tgt": bead.tgt,
                    "score": round(bead.score, 6), "src_text": src_text, "tgt_text": tgt_text}
            if src_spans is not None:
                line["src_spans"] = [list(src_spans[i]) for i in bead.src]
            if tgt_spans is not None:
                line["tgt_spans"] = [list(tgt_spans[j]) for j in bead.tgt]
            out.append(json.dumps(line, ensure_ascii=False) + "\n")
        elif fmt == "vecalign":
            out.append(f"{bead.src}:{bead.tgt}:{bead.score:.6f}\n")
        elif fmt == "tsv":
            if bead.src and bead.tgt and (min_score is None or bead.score >= min_score):
                out.append(f"{_one_line(src_text)}\t{_one_line(tgt_text)}\t{bead.score:.6f}\t{_one_line(src_doc)}\t"
                           f"{_one_line(tgt_doc)}\n")
        else:
            raise ValueError(f"unknown alignment format {fmt!r} ({', '.join(FORMATS)})")
    return out


def _one_line(text: str) -> str:
    return " ".join(text.split())
