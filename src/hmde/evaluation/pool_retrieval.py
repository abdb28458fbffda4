"""Sentence retrieval in a large pool: the lightweight-encoder paper's protocol, from the data here.

The paper retrieves each of 2,000 query sentences' translation among 200,000 candidate
sentences, and reports P@1. Here the queries are sentences of one language taken from
the parallel files (``parallel/<source>/<xxx>-<yyy>.tsv.gz``); their translations are
put in a pool of sentences of the other language drawn from every parallel file, so the
distractors are real sentences of many topics and lengths. Exact duplicates are removed
from the pool; a hit counts when the retrieved sentence is the gold translation's text.
Every choice is a function of the seed.
"""

from __future__ import annotations

import gzip
import random
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..errors import HmdeError, InputError
from ..io.documents import open_text


@dataclass
class PoolTask:
    query_lang: str
    pool_lang: str
    queries: list[str]
    gold: list[str]  # the translation of each query (its text; it is in the pool)
    pool: list[str]
    files: list[str]


def _pair_files(folder: Path) -> list[Path]:
    files = sorted(folder.glob("**/*.tsv.gz")) + sorted(folder.glob("**/*.tsv"))
    if not files:
        raise InputError("no <xxx>-<yyy>.tsv(.gz) files", path=str(folder))
    return files


def _sides(path: Path) -> tuple[str, str]:
    stem = path.name.split(".")[0]
    parts = stem.split("-")
    if len(parts) != 2:
        raise InputError("the file name must be <xxx>-<yyy>.tsv(.gz)", path=str(path))
    return parts[0], parts[1]


def read_side_pairs(path: Path, query_lang: str, pool_lang: str) -> list[tuple[str, str]]:
    """(query-language text, pool-language text) pairs of one file, in either column order."""
    a, b = _sides(path)
    flip = (a, b) == (pool_lang, query_lang)
    out = []
    try:  # whole-file decoding: a 200,000-sentence pool reads half a million lines
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        lines = raw.decode("utf-8").split("\n")
    except (OSError, EOFError, UnicodeDecodeError, zlib.error):
        with open_text(path) as f:  # the line-by-line reader names the file and line of the fault
            lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for line_no, line in enumerate(lines, 1):
        cols = line.rstrip("\r").split("\t")
        if len(cols) != 2:
            raise InputError(f"expected 2 tab-separated columns, got {len(cols)}", str(path), line_no)
        x, y = (cols[1], cols[0]) if flip else (cols[0], cols[1])
        if x.strip() and y.strip():
            out.append((x.strip(), y.strip()))
    return out


def build_pool_task(folder: str | Path, query_lang: str, pool_lang: str = "eng", n_queries: int = 2000,
                    pool_size: int = 200_000, seed: int = 0) -> PoolTask:
    """Queries with their translations, and a pool of ``pool_size`` distinct sentences holding them."""
    pairs: list[tuple[str, str]] = []  # (query, translation) of the query-language files
    pool_side: list[str] = []  # every pool-language sentence, in file order
    used = []
    for path in _pair_files(Path(folder)):  # each file read once
        a, b = _sides(path)
        if pool_lang not in (a, b):
            continue
        other = b if a == pool_lang else a
        file_pairs = read_side_pairs(path, other, pool_lang)
        if other == query_lang:
            pairs += file_pairs
        pool_side.extend(t for _, t in file_pairs)
        used.append(str(path))
    if not pairs:
        raise HmdeError(f"{folder}: no {query_lang}-{pool_lang} sentence pairs")
    rng = random.Random(seed)
    by_query: dict[str, str] = {}
    for q, t in pairs:  # a query with several translations is ambiguous: keep the first
        by_query.setdefault(q, t)
    gold_of = {}
    for q, t in sorted(by_query.items()):
        gold_of.setdefault(t, q)  # one query per translation: a gold text must identify its query
    candidates = sorted((q, t) for t, q in gold_of.items())
    if len(candidates) < n_queries:
        raise HmdeError(f"{folder}: {len(candidates)} distinct {query_lang}-{pool_lang} pairs, fewer than "
                        f"--queries {n_queries}")
    chosen = rng.sample(candidates, n_queries)
    gold = [t for _, t in chosen]
    pool = list(dict.fromkeys(gold))
    seen = set(pool)
    distractors = []
    for text in pool_side:
        if text not in seen:
            seen.add(text)
            distractors.append(text)
    need = pool_size - len(pool)
    if len(distractors) < need:
        raise HmdeError(f"{folder}: {len(pool) + len(distractors)} distinct {pool_lang} sentences, fewer than "
                        f"--pool {pool_size}")
    pool += rng.sample(distractors, need)
    rng.shuffle(pool)
    return PoolTask(query_lang, pool_lang, [q for q, _ in chosen], gold, pool, sorted(set(used)))


def pool_p_at_1(encode: Callable[[Sequence[str]], np.ndarray], task: PoolTask) -> dict:
    """P@1 of each query's nearest pool sentence (cosine, exact FAISS search) being its translation."""
    from ..align.similarity import knn

    pool_vectors = np.asarray(encode(task.pool), dtype=np.float32)
    query_vectors = np.asarray(encode(task.queries), dtype=np.float32)
    _, ids = knn(query_vectors, pool_vectors, 1)
    hits = [task.pool[int(i)] == g for i, g in zip(ids[:, 0], task.gold)]
    return {"p@1": float(np.mean(hits)), "queries": len(task.queries), "pool": len(task.pool)}
