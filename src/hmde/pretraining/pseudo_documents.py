"""Parallel pseudo-documents from document-ordered parallel sentences (e.g. WMT newstest).

newstest files keep their articles' sentence order, so N consecutive pairs are a short
parallel news document on each side: the same concept in two languages, the document
level training signal that sentence pairs alone do not give. The output is in the
shape ``build-pairs`` reads (``doc_id``, ``concept``, ``lang``, ``text``, ``categories``, and
``sentences``: the lines, aligned one to one across the two languages);
the category of a chunk is its block of neighbouring chunks, so a hard negative is a
nearby passage of the same file (often the same article): same topic, other content.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Sequence

import numpy as np

from ..ground.atomic import atomic_path
from ..errors import InputError
from ..io.documents import open_text
from ..lightweight.parallel_data import languages_from_name


def chunk_file(path: str | Path, lines: int = 5, block: int = 8, max_documents: int | None = None,
               seed: int = 0) -> list[dict]:
    """Documents of both languages of one ``xxx-yyy.tsv(.gz)`` file."""
    path = Path(path)
    src_lang, tgt_lang = languages_from_name(path)
    pairs = []
    with open_text(path) as f:
        for line_no, line in enumerate(f, 1):
            cols = line.rstrip("\n").split("\t")
            if len(cols) != 2:
                raise InputError(f"expected 2 tab-separated fields, got {len(cols)}", str(path), line_no)
            pairs.append(cols)
    source = f"{path.parent.name}/{path.name.split('.')[0]}"
    chunks = list(range(len(pairs) // lines))
    if max_documents is not None and len(chunks) > max_documents:
        # whole blocks are kept, so every kept chunk still has its neighbours as negatives
        blocks = sorted({c // block for c in chunks})
        keep = set(np.random.default_rng(seed).permutation(blocks)[: max(1, max_documents // block)].tolist())
        chunks = [c for c in chunks if c // block in keep]
    docs = []
    for c in chunks:
        part = pairs[c * lines:(c + 1) * lines]
        concept = f"{source}:{c}"
        category = [f"{source}:block{c // block}"]
        for side, lang in enumerate((src_lang, tgt_lang)):
            sentences = [p[side].strip() for p in part]  # line i of each side translates the other's line i
            docs.append({"doc_id": f"{lang}/{concept}", "concept": concept, "lang": lang,
                         "text": " ".join(sentences), "sentences": sentences, "categories": category})
    return docs


def write_pseudo_documents(files: Sequence[str | Path], output: str | Path, lines: int = 5, block: int = 8,
                           max_documents: int | None = None, seed: int = 0) -> dict[str, int]:
    """Write ``output`` (.jsonl.gz) with the documents of every file; returns documents per file."""
    if lines < 1 or block < 2:
        raise InputError("--lines must be >= 1 and --block >= 2")
    counts = {}
    with atomic_path(output, suffix=".jsonl.gz") as tmp, gzip.open(tmp, "wt", encoding="utf-8") as f:
        for path in files:
            docs = chunk_file(path, lines, block, max_documents, seed)
            counts[str(path)] = len(docs) // 2
            for d in docs:
                f.write(json.dumps(d, ensure_ascii=False) + "\n")
    return counts
