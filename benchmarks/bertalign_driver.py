"""Runs Bertalign's published aligner, unmodified, on given sentences and given vectors. Run by
``benchmarks/bertalign_side_by_side.py`` with the Python of a separate virtual environment where the
``bertalign`` package is installed (it is GPL: hmde never imports it, and no code of it is copied here; this
file only calls its public API).

    python bertalign_driver.py texts TASKS.json TEXTS.json
        the texts Bertalign will embed for each task (its own overlap windows of the pre-split sentences)
    python bertalign_driver.py align TASKS.json TEXTS.json VECTORS.npy BEADS.json
        each task aligned by ``Bertalign(..., is_split=True, model=ENCODER).align_sents()`` with its default
        settings, where ENCODER is Bertalign's own ``Encoder`` whose model returns the given vectors
        (row i of VECTORS.npy for text i of TEXTS.json) instead of running a sentence-transformers model.

TASKS.json: ``[{"src": [sentence, ...], "tgt": [sentence, ...]}, ...]``. BEADS.json: per task,
``{"beads": [[[i, ...], [j, ...]], ...], "seconds": s}`` (the aligner's time, vectors given).
"""

import json
import sys
import time

import numpy as np
import bertalign.aligner
from bertalign import Bertalign, Encoder
from bertalign.utils import LanguageDetectionError, clean_text, detect_lang, yield_overlaps

MAX_ALIGN = 5  # Bertalign's default; it embeds windows of up to MAX_ALIGN - 1 sentences


def sentences(side):
    """The sentences Bertalign reads from a side given pre-split (``is_split=True``)."""
    lines = clean_text("\n".join(side)).splitlines()
    if len(lines) != len(side):
        raise SystemExit(f"cleaning changed the number of sentences ({len(side)} -> {len(lines)})")
    return lines


class GivenVectors:
    """What ``Encoder.transform`` calls: ``encode(texts)``, answered from a table."""

    def __init__(self, texts, vectors):
        self.row = {t: i for i, t in enumerate(texts)}
        self.vectors = vectors

    def encode(self, texts):
        missing = [t for t in texts if t not in self.row]
        if missing:
            raise SystemExit(f"no vector given for {missing[0][:80]!r}")
        return self.vectors[[self.row[t] for t in texts]]


def language_or_unknown(text):
    """Bertalign detects each side's language (lingua, restricted to the languages its splitter knows) and stops
    where it cannot (Gujarati, Armenian); with pre-split sentences the language only names the side in its log,
    so an undetected one is called unknown instead. The alignment is untouched."""
    try:
        return detect_lang(text)
    except LanguageDetectionError:
        return "unknown"


bertalign.aligner.detect_lang = language_or_unknown


def main():
    command, tasks = sys.argv[1], json.load(open(sys.argv[2], encoding="utf-8"))
    if command == "texts":
        texts = {}
        for task in tasks:
            for side in (task["src"], task["tgt"]):
                texts.update(dict.fromkeys(yield_overlaps(sentences(side), MAX_ALIGN - 1)))
        json.dump(list(texts), open(sys.argv[3], "w", encoding="utf-8"), ensure_ascii=False)
        return
    texts = json.load(open(sys.argv[3], encoding="utf-8"))
    encoder = Encoder.__new__(Encoder)  # Bertalign's encoder, its model replaced by the given vectors
    encoder.model, encoder.model_name = GivenVectors(texts, np.load(sys.argv[4]).astype(np.float32)), "given vectors"
    out = []
    for task in tasks:
        start = time.perf_counter()
        aligner = Bertalign("\n".join(sentences(task["src"])), "\n".join(sentences(task["tgt"])), is_split=True,
                            max_align=MAX_ALIGN, model=encoder)
        beads = aligner.align_sents()
        out.append({"beads": [[list(map(int, s)), list(map(int, t))] for s, t in beads],
                    "seconds": time.perf_counter() - start})
    json.dump(out, open(sys.argv[5], "w", encoding="utf-8"))


if __name__ == "__main__":
    main()
