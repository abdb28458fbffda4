"""Mining translation pairs across two collections of sentences (issue 79): the classic job of LASER and LaBSE (the
BUCC task; how CCMatrix- and ParaCrawl-style corpora are mined), as Artetxe and Schwenk (2019) describe it.

Two piles of sentences, most without a translation on the other side. Each sentence's ``k`` nearest neighbours on the
other side give the ratio margin of a candidate pair (:func:`hmde.align.similarity.margin_of`: its cosine over the
mean cosine of both sides' neighbourhoods, so that a hub near everything is discounted); each sentence's best
candidate by margin is its pair in that direction. ``max`` (the default, the paper's best) takes the pairs of both
directions, best first, each sentence at most once; ``intersection`` the pairs both directions agree on (mutual
best); ``forward`` and ``backward`` one direction. A pair whose cosine is under ``min_cosine`` is no candidate (an
encoder trained for translation ranking places translations by their cosine itself: its floor, with the margin,
mines better than the margin alone; docs/mining.md). A pair is kept at a margin of at least the threshold, where its two
sides' lengths in characters (:func:`text_length`: Han, kana and Hangul weigh three) are within ``max_length_ratio``
of each other, where it is no copy (the same text on
both sides, ignoring case and spaces), and once (the same two texts mined twice: the better).

The neighbours come from FAISS over the L2-normalised vectors: an exact inner-product index up to ``exact_limit``
vectors a side, an IVF index of 8-bit scalar-quantised codes beyond (its candidates then re-scored exactly from the
vectors, which may lie memory-mapped on disk), the queries searched ``chunk`` at a time, so that memory holds one
chunk's answers and the index, not anything of size n x m.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import HmdeError
from .similarity import DIRECTIONS, margin_of, normalize


@dataclass
class MiningOptions:
    # the ratio margin a pair needs: the best mean F1 of hmde-e5 on the dev table (docs/mining.md); None: the one
    # measured for the model that embeds (hmde.align.mining_threshold), resolved by hmde.mine
    threshold: float | None = 1.025
    k: int = 4  # neighbours of the margin (Artetxe and Schwenk's 4)
    candidates: int = 8  # nearest neighbours re-scored by margin per sentence
    direction: str = "max"
    # the cosine a pair needs (0: the margin alone, hmde-e5's best); None: the one measured for the model, as threshold
    min_cosine: float | None = 0.0
    max_length_ratio: float = 2.0  # the longer side at most this many times the shorter, in characters (0: any)
    keep_copies: bool = False
    exact_limit: int = 50_000  # vectors a side searched exactly; beyond, an IVF index of codes (benchmarks/mining.py)
    chunk: int = 8_192  # queries searched at once

    def check(self) -> "MiningOptions":
        if self.direction not in DIRECTIONS:
            raise HmdeError(f"direction must be one of {', '.join(DIRECTIONS)}, got {self.direction!r}")
        for name in ("k", "candidates", "exact_limit", "chunk"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise HmdeError(f"{name} must be a whole number >= 1, got {value!r}")
        for name, low in (("threshold", None), ("max_length_ratio", 0.0), ("min_cosine", -1.0)):
            value = getattr(self, name)
            if name in ("threshold", "min_cosine") and value is None:  # the model's, resolved when it is known
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or \
                    (low is not None and value < low):
                raise HmdeError(f"{name} must be a finite number{f' >= {low:g}' if low is not None else ''}, got "
                                f"{value!r}")
        if 0 < self.max_length_ratio < 1:
            raise HmdeError(f"max_length_ratio is the longer side over the shorter: >= 1 (0: any), got "
                            f"{self.max_length_ratio}")
        return self


RESCORE_BLOCK = 1_024  # queries whose IVF candidates are re-scored at once


IVF_TRAIN_PER_LIST = 39  # training vectors an IVF list needs at least (FAISS's own warning's bound)


class NearestIndex:
    """The vectors of one side, searched for their nearest neighbours by inner product (cosine of unit vectors):
    exactly up to ``exact_limit`` vectors, else through an IVF index of 8-bit codes whose candidates are re-scored
    exactly."""

    def __init__(self, vectors: np.ndarray, exact_limit: int, chunk: int):
        import faiss

        self.vectors, n, dim = vectors, len(vectors), vectors.shape[1]
        lists = int(min(65_536, max(64, 4 * math.sqrt(n))))
        # too few vectors to train the lists on (FAISS wants 39 a list; 8 sentences with --exact-limit 1 were its
        # RuntimeError, issue 94): searched exactly, which at that size costs nothing
        self.exact = n <= exact_limit or n < IVF_TRAIN_PER_LIST * lists
        if self.exact:
            self.index = faiss.IndexFlatIP(dim)
        else:
            # scalar-quantised codes (a byte a dimension): they train at once, where product quantisation's 256
            # centroids per sub-space took minutes to train; the candidates are re-scored from the vectors anyway
            self.index = faiss.index_factory(dim, f"IVF{lists},SQ8", faiss.METRIC_INNER_PRODUCT)
            rng = np.random.default_rng(0)
            sample = np.sort(rng.choice(n, min(n, max(40 * lists, 50_000)), replace=False))
            self.index.train(normalize(vectors[sample]))
            self.index.nprobe = 16
        for start in range(0, n, chunk):
            self.index.add(normalize(vectors[start:start + chunk]))

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Cosines and rows of each query's ``k`` nearest vectors, best first (rows -1: fewer found)."""
        k = min(k, len(self.vectors))
        if self.exact:
            return self.index.search(queries, k)
        _, found = self.index.search(queries, min(len(self.vectors), 4 * k))  # codes: a wider net, exact cosines
        sims = np.full(found.shape, -np.inf, np.float32)
        for start in range(0, len(queries), RESCORE_BLOCK):  # memory: a block's candidates' vectors
            block = found[start:start + RESCORE_BLOCK]
            valid = block >= 0
            if not valid.any():
                continue
            rows = np.unique(block[valid])  # ascending: a memory map is read in order, each row once
            vectors = normalize(self.vectors[rows])
            at = np.searchsorted(rows, np.where(valid, block, rows[0]))
            cosines = np.einsum("qkd,qd->qk", vectors[at], queries[start:start + RESCORE_BLOCK])
            sims[start:start + RESCORE_BLOCK] = np.where(valid, cosines, -np.inf)
        order = np.argsort(-sims, axis=1, kind="stable")[:, :k]
        sims, rows = np.take_along_axis(sims, order, 1), np.take_along_axis(found, order, 1)
        return sims, np.where(np.isfinite(sims), rows, -1)


def _neighbours(queries: np.ndarray, keys: NearestIndex, k: int, chunk: int, progress) -> tuple:
    sims, rows = [], []
    for start in range(0, len(queries), chunk):
        s, r = keys.search(normalize(queries[start:start + chunk]), k)
        sims.append(s.astype(np.float32))
        rows.append(r.astype(np.int64))
        progress(min(chunk, len(queries) - start))
    return np.concatenate(sims), np.concatenate(rows)


def mine_vectors(x: np.ndarray, y: np.ndarray, options: MiningOptions | None = None,
                 progress: Callable[[int], None] = lambda n: None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pairs of sentence vectors ``x`` and ``y`` (arrays or memory maps, one row a sentence) that translate each
    other, by margin: (rows of x, rows of y, margins), best first, before the thresholds on texts."""
    options = (options or MiningOptions()).check()
    if len(x) == 0 or len(y) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)
    if x.shape[1] != y.shape[1]:
        raise HmdeError(f"the two sides' vectors have dimensions {x.shape[1]} and {y.shape[1]}: embed both with "
                        "one model")
    c = max(options.k, options.candidates)
    x_index = NearestIndex(x, options.exact_limit, options.chunk)
    y_index = NearestIndex(y, options.exact_limit, options.chunk)
    fwd_cos, fwd_rows = _neighbours(x, y_index, c, options.chunk, progress)  # x -> its nearest y
    bwd_cos, bwd_rows = _neighbours(y, x_index, c, options.chunk, progress)
    x_mean = np.where(np.isfinite(fwd_cos[:, :options.k]), fwd_cos[:, :options.k], 0).mean(1)
    y_mean = np.where(np.isfinite(bwd_cos[:, :options.k]), bwd_cos[:, :options.k], 0).mean(1)
    forward = margin_of(fwd_cos, x_mean[:, None], y_mean[np.maximum(fwd_rows, 0)])
    backward = margin_of(bwd_cos, x_mean[np.maximum(bwd_rows, 0)], y_mean[:, None])
    forward[fwd_rows < 0], backward[bwd_rows < 0] = -np.inf, -np.inf
    if options.min_cosine:  # under the floor: no candidate
        forward[fwd_cos < options.min_cosine], backward[bwd_cos < options.min_cosine] = -np.inf, -np.inf
    fi, bi = forward.argmax(1), backward.argmax(1)
    f = (np.arange(len(x)), fwd_rows[np.arange(len(x)), fi], forward[np.arange(len(x)), fi])
    b = (bwd_rows[np.arange(len(y)), bi], np.arange(len(y)), backward[np.arange(len(y)), bi])
    if options.direction == "forward":
        src, tgt, score = f
    elif options.direction == "backward":
        src, tgt, score = b
    elif options.direction == "intersection":
        agree = b[0][f[1]] == f[0]  # x's best y has x as its best
        src, tgt, score = f[0][agree], f[1][agree], np.maximum(f[2][agree], b[2][f[1][agree]])
    else:
        src, tgt, score = (np.concatenate(p) for p in zip(f, b))
    candidate = np.isfinite(score)  # a sentence with every candidate under the floor has none
    src, tgt, score = src[candidate], tgt[candidate], score[candidate]
    order = np.argsort(-score, kind="stable")
    src, tgt, score = src[order], tgt[order], score[order]
    if options.direction == "max":  # each sentence at most once, the better pair first
        used_x, used_y = np.zeros(len(x), bool), np.zeros(len(y), bool)
        keep = np.zeros(len(src), bool)
        for n, (i, j) in enumerate(zip(src, tgt)):
            if not used_x[i] and not used_y[j]:
                keep[n] = used_x[i] = used_y[j] = True
        src, tgt, score = src[keep], tgt[keep], score[keep]
    return src.astype(np.int64), tgt.astype(np.int64), score.astype(np.float32)


# characters of scripts that write a word in one or two of them (Han, kana, Hangul syllables) weigh as three Latin
# letters in a pair's length ratio: "我爱你。" against "I love you." is 12 against 11, not 4 against 11
_DENSE = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")


def text_length(text: str) -> int:
    """A text's length for the length ratio: its characters, those of dense scripts three times."""
    return len(text) + 2 * len(_DENSE.findall(text))


def _comparable(text: str) -> str:
    return " ".join(text.casefold().split())


def select_pairs(src, tgt, score, src_texts, tgt_texts, options: MiningOptions) -> list[tuple[int, int, float]]:
    """The mined pairs kept: margin at least the threshold, lengths within the ratio, no copy, each pair of texts
    once (best first)."""
    kept, seen = [], set()
    for i, j, s in zip(src, tgt, score):
        if s < options.threshold:
            break  # best first: the rest score lower
        a, b = src_texts[i], tgt_texts[j]
        la, lb = text_length(a), text_length(b)
        if options.max_length_ratio and max(la, lb) > options.max_length_ratio * max(1, min(la, lb)):
            continue
        key = (_comparable(a), _comparable(b))
        if (not options.keep_copies and key[0] == key[1]) or key in seen:
            continue
        seen.add(key)
        kept.append((int(i), int(j), float(s)))
    return kept
