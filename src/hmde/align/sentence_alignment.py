"""Sentence alignment inside a pair of parallel (or comparable) documents: which sentences translate which.

Written from the published descriptions of Vecalign (Thompson and Koehn, 2019) and Bertalign (Liu and
Zhu, 2022); no code of theirs is used.

- **Beads.** An alignment is a monotone sequence of beads ``(a, b)``: ``a`` consecutive source sentences
  against ``b`` consecutive target sentences, with ``1 <= a + b <= max_merge`` (default 5, Bertalign's:
  1-1, 1-2, 2-1, 1-3, 3-1, 2-2, 1-4, 4-1, 2-3, 3-2) plus the skips 1-0 and 0-1. A merged side is embedded as
  the **concatenated text** of its sentences, not as an average of vectors (:func:`span_texts`).
- **Cost.** A bead's cost is its cosine distance divided by the mean distance of each side to its
  ``k`` nearest sentences of the other document (the ratio margin of :mod:`hmde.align.similarity`, as a cost:
  a pair that is closer than its neighbourhood costs little), times ``a x b`` so that merging is not free
  (Vecalign's penalty), plus a length penalty where the texts are known: ``length_weight`` times how far
  the bead's log ratio of characters strays from the document's (a sentence whose translation was
  deleted makes a merged bead twice too long on one side; a true merge does not). A skip costs
  ``skip_weight`` times the ``skip_quantile`` of the 1-1 costs of the document's unrelated-looking pairs
  (neither sentence the other's nearest), so that leaving a source and a target sentence both unaligned is
  cheaper than aligning two unrelated sentences, and dearer than a true pair in a document of any length.
- **Neighbour scoring** (``scoring="neighbours"``, ``--bead-scoring neighbours``; issue 65): the second
  programme's cost is minus Bertalign's kind of score (:meth:`_Costs.neighbour_cost`, from the paper's text) and a
  skip costs ``skip_score`` x the median score of the source sentences' nearest 1-1 beads. With a weak encoder it
  leaves fewer true pairs out; where sentences are deleted it merges them into a neighbour's bead more often
  (docs/sentence-alignment.md, "Beside Bertalign").
- **Two steps.** A programme over single sentences (1-1 and skips) finds confident 1-1 anchors
  (:mod:`hmde.align.anchors`); the programme with every bead type then runs only between them, and no
  bead crosses an anchor, so a span across one is never embedded (:mod:`hmde.align.sentence_pairs`).
- **Search.** Dynamic programming over the bead costs. Documents whose full matrix exceeds
  ``full_cells`` are aligned coarse-to-fine: blocks of consecutive sentences (their vectors averaged) are
  aligned first, and the fine search runs in a band around that path, so memory grows with ``n + m``,
  not ``n x m``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import HmdeError
from .anchors import Anchors, confident_pairs, locked_anchors
from .similarity import normalize

SKIPS = ((1, 0), (0, 1))
# the largest a + b of a bead: 10 gives 45 bead types (the programme's back-pointers are int8), and each step
# up embeds one more span of every sentence between anchors, i.e. (max_merge - 1) vectors per sentence and side
MAX_MERGE = 10
SCORINGS = ("ratio", "neighbours")


@dataclass
class Bead:
    src: list[int]  # 0-based source sentence indices (empty: a target sentence left unaligned)
    tgt: list[int]
    score: float  # cosine of the two sides (0 for a skip)


@dataclass
class AlignmentOptions:
    max_merge: int = 5  # a + b of a bead (Bertalign's default; Vecalign's is 4)
    knn: int = 4  # neighbours of the margin normalisation
    skip_quantile: float = 0.2  # a skip costs skip_weight x this quantile of the 1-1 costs (Vecalign's 0.2)
    skip_weight: float = 0.5  # two skips cost about one typical unrelated pair
    length_weight: float = 0.25  # the length penalty's weight (0: none; 1.0 before issue 55)
    anchors: bool = True  # two steps: confident 1-1 anchors first, then merges only between them
    anchor_window: int = 8  # an anchor is the cheapest pair of its row and column within this many sentences
    full_cells: int = 4_000_000  # n x m above this: coarse-to-fine
    band: int = 16  # sentences either side of the coarse path searched at the fine level
    scoring: str = "ratio"  # the second programme's bead cost: "ratio" (hmde's) or "neighbours" (Bertalign's kind)
    skip_score: float = 0.5  # "neighbours": a skip costs this x the median score of the sentences' nearest pairs
    # after the search, a skipped sentence joins the aligned bead next to it where the cosine of the joined texts
    # falls by at most this (hmde.align.joins; None: no joins, the aligner before issue 65)
    join_tolerance: float | None = 0.0
    # the joins weigh, beside the cosine's change, this x how much nearer the bead's log character ratio comes to
    # the document's (a deleted sentence's join moves it away, a missing part's brings it back)
    join_length_weight: float = 0.03
    # after the joins, the boundary between two aligned beads moves by a sentence where the sum of the two beads'
    # cosines rises by more than this (hmde.align.boundaries; None: no moves, the aligner of stop 71)
    boundary_gain: float | None = 0.0

    @classmethod
    def complete_translation(cls, **changes) -> "AlignmentOptions":
        """The settings for two texts that translate each other whole (:data:`COMPLETE_TRANSLATION`), with
        ``changes`` on top."""
        return cls(**{**COMPLETE_TRANSLATION, **changes})

    def check(self) -> "AlignmentOptions":
        """Refuse impossible settings in one line, before any work."""
        self.bead_types()
        if self.scoring not in SCORINGS:
            raise HmdeError(f"--bead-scoring must be one of {', '.join(SCORINGS)}, got {self.scoring!r}")
        if not 0 <= self.skip_score <= 10:
            raise HmdeError(f"--skip-score must be between 0 and 10, got {self.skip_score}")
        if self.join_tolerance is not None and not 0 <= self.join_tolerance <= 2:
            raise HmdeError(f"--join-tolerance must be between 0 and 2 (a change of cosine), got {self.join_tolerance}")
        if not 0 <= self.join_length_weight <= 10:
            raise HmdeError(f"--join-length-weight must be between 0 (the cosine alone) and 10, got "
                            f"{self.join_length_weight}")
        if self.boundary_gain is not None and not 0 <= self.boundary_gain <= 2:
            raise HmdeError(f"--boundary-gain must be between 0 and 2 (a change of two cosines), got "
                            f"{self.boundary_gain}")
        if not 0 <= self.length_weight <= 100:
            raise HmdeError(f"--length-weight must be between 0 (no length penalty) and 100, got {self.length_weight}")
        return self

    def bead_types(self) -> list[tuple[int, int]]:
        if not 2 <= self.max_merge <= MAX_MERGE:
            raise HmdeError(f"--max-merge must be between 2 (1-1 beads only) and {MAX_MERGE}, got {self.max_merge}: "
                            f"each step up embeds one more span per sentence ({MAX_MERGE} means {MAX_MERGE - 1} "
                            "vectors per sentence and side)")
        return [(a, b) for a in range(1, self.max_merge) for b in range(1, self.max_merge) if a + b <= self.max_merge]


# Two texts that translate each other whole (a book and its translation, the Bible, subtitles), where a sentence
# left out is far more often part of a merge the encoder misjudged than an omission: a skipped sentence joins its
# neighbour's bead where the joined cosine falls by at most 0.04, and the length penalty weighs 0.5. Measured
# (docs/sentence-alignment.md, "Joins after the search"): with hmde-e5 at or above Bertalign on every dev set, but
# 0.05-0.09 strict F1 below the defaults where sentences were deleted, which is why it is not the default.
COMPLETE_TRANSLATION = {"length_weight": 0.5, "join_tolerance": 0.04}


def span_text(sentences: Sequence[str], start: int, count: int) -> str:
    """The text of a span, as it is embedded: the sentences ``start .. start+count-1`` joined by a space (one
    definition, so that a span's text is the same wherever it is asked for and embedded once)."""
    return " ".join(sentences[start:start + count])


def span_texts(sentences: Sequence[str], longest: int) -> list[list[str]]:
    """``out[k-1][i]``: :func:`span_text` of the sentences ``i .. i+k-1``, for k = 1 .. ``longest``."""
    return [[span_text(sentences, i, k) for i in range(len(sentences) - k + 1)] for k in range(1, longest + 1)]


def log_char_ratio(src_chars, tgt_chars):
    """log(source characters / target characters), each side at least 1: a bead's or a whole document's, a sentence
    counting its characters and one space. The length penalty and the joins compare a bead's with the document's."""
    return np.log(np.maximum(src_chars, 1.0) / np.maximum(tgt_chars, 1.0))


class _Costs:
    """Bead costs on demand: ``cost(a, b, i, j)`` for the bead ending before source sentence ``i`` and
    target sentence ``j`` (vectorised over ``j``)."""

    def __init__(self, src: list[np.ndarray], tgt: list[np.ndarray], knn: int, pool: int = 2000,
                 src_lengths: np.ndarray | None = None, tgt_lengths: np.ndarray | None = None,
                 length_weight: float = 0.0, single_norms: tuple[np.ndarray, np.ndarray] | None = None,
                 scoring: str = "ratio"):
        self.src, self.tgt = src, tgt
        self.length_weight = length_weight if src_lengths is not None and tgt_lengths is not None else 0.0
        self.scoring = scoring
        self.lengths = src_lengths is not None and tgt_lengths is not None  # else no length factor
        if self.length_weight or (scoring == "neighbours" and self.lengths):  # a span's characters in O(1)
            self.src_chars = np.concatenate([[0], np.cumsum(np.asarray(src_lengths, np.float64) + 1)])
            self.tgt_chars = np.concatenate([[0], np.cumsum(np.asarray(tgt_lengths, np.float64) + 1)])
            self.log_ratio = float(log_char_ratio(self.src_chars[-1], self.tgt_chars[-1]))
        s1, t1 = _sample(src[0], pool), _sample(tgt[0], pool)  # neighbours among at most ``pool`` sentences
        k = max(1, min(knn, len(s1), len(t1)))
        self.k = k
        # mean distance of every span to its k nearest single sentences of the other document (``single_norms``:
        # the single sentences' own, computed already by the first step)
        skip = 1 if single_norms is not None else 0
        self.src_norm = list(single_norms[:1] if skip else []) + [self._neighbourhood(v, t1, k) for v in src[skip:]]
        self.tgt_norm = list(single_norms[1:] if skip else []) + [self._neighbourhood(v, s1, k) for v in tgt[skip:]]

    @staticmethod
    def _neighbourhood(vectors: np.ndarray, other: np.ndarray, k: int, chunk: int = 4096) -> np.ndarray:
        out = np.empty(len(vectors), np.float32)
        for start in range(0, len(vectors), chunk):
            d = 1.0 - vectors[start:start + chunk] @ other.T
            out[start:start + chunk] = np.partition(d, k - 1, axis=1)[:, :k].mean(1) if d.shape[1] else 1.0
        return np.maximum(out, 1e-4)

    def cosine(self, a: int, b: int, i: int, j: np.ndarray) -> np.ndarray:
        return self.tgt[b - 1][j - b] @ self.src[a - 1][i - a]

    def _length_penalty(self, a: int, b: int, i, j) -> np.ndarray | float:
        """``length_weight`` x how far the bead's log character ratio strays from the document's."""
        if not self.length_weight:
            return 0.0
        ls = self.src_chars[i] - self.src_chars[i - a]
        lt = self.tgt_chars[j] - self.tgt_chars[j - b]
        return self.length_weight * np.abs(log_char_ratio(ls, lt) - self.log_ratio)

    def pair_costs(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """The 1-1 cost of source sentence ``i`` against target sentence ``j`` (0-based; arrays of one shape):
        :meth:`cost` of a 1-1 bead, for any pairs at once."""
        distance = 1.0 - np.einsum("...d,...d->...", self.src[0][i], self.tgt[0][j])
        return distance / (0.5 * (self.src_norm[0][i] + self.tgt_norm[0][j])) + self._length_penalty(1, 1, i + 1, j + 1)

    def neighbour_cost(self, a: int, b: int, i: int, j: np.ndarray) -> np.ndarray:
        """Minus a bead's score as Bertalign's paper defines it (Liu and Zhu, 2022), written from its text: the
        cosine of the two spans less the mean of (each span's mean cosine with the single sentences just before
        and after the other span), times log2(1 + the shorter side's characters / the longer's), the target's
        characters scaled by the document's ratio."""
        s_vec, t_vecs = self.src[a - 1][i - a], self.tgt[b - 1][j - b]
        n, m = len(self.src[0]), len(self.tgt[0])
        score = t_vecs @ s_vec
        src_around = [self.src[0][k] @ t_vecs.T for k in (i - a - 1, i) if 0 <= k < n]  # src neighbours vs tgt span
        src_mean = np.mean(src_around, axis=0) if src_around else 0.0
        left, right = j - b - 1, j
        t1 = self.tgt[0]
        lv = np.where(left >= 0, t1[np.clip(left, 0, m - 1)] @ s_vec, 0.0)
        rv = np.where(right < m, t1[np.clip(right, 0, m - 1)] @ s_vec, 0.0)
        count = (left >= 0).astype(np.float64) + (right < m)
        tgt_mean = (lv + rv) / np.maximum(count, 1)
        score = score - 0.5 * (src_mean + tgt_mean)
        return -score * self._length_factor(self.src_chars[i] - self.src_chars[i - a],
                                            self.tgt_chars[j] - self.tgt_chars[j - b]) if self.lengths else -score

    def _length_factor(self, ls, lt):
        """log2(1 + the shorter side's characters / the longer's), the target's scaled by the document's ratio:
        1 for a bead as long as the document's sides are, 0.58 for one twice too long on one side."""
        lt = lt * np.exp(self.log_ratio)
        return np.log2(1.0 + np.minimum(ls, lt) / np.maximum(np.maximum(ls, lt), 1e-9))

    def pair_scores(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """:meth:`neighbour_cost`'s score of the 1-1 beads of source sentence ``i`` and target sentence ``j``
        (0-based arrays of one shape)."""
        return np.array([-self.neighbour_cost(1, 1, int(a) + 1, np.array([int(b) + 1]))[0] for a, b in zip(i, j)])

    def cost(self, a: int, b: int, i: int, j: np.ndarray) -> np.ndarray:
        if self.scoring == "neighbours":
            return self.neighbour_cost(a, b, i, j)
        return self.ratio_cost(a, b, i, j)

    def ratio_cost(self, a: int, b: int, i: int, j: np.ndarray) -> np.ndarray:
        distance = 1.0 - self.cosine(a, b, i, j)
        norm = 0.5 * (self.src_norm[a - 1][i - a] + self.tgt_norm[b - 1][j - b])
        return distance / norm * (a * b) + self._length_penalty(a, b, i, j)


def _sample(vectors: np.ndarray, pool: int) -> np.ndarray:
    """At most ``pool`` rows, evenly spread (a long document's neighbourhoods from a sample: O(n) work)."""
    if len(vectors) <= pool:
        return vectors
    return vectors[np.linspace(0, len(vectors) - 1, num=pool).astype(int)]


def _skip_cost(costs: _Costs, quantile: float, weight: float, rows: int = 200) -> float:
    """``weight`` x the ``quantile`` of the 1-1 costs of (a sample of) the sentence pairs that are unrelated
    by the look of it: neither sentence's nearest in the other document. Counting the likely translations
    too made the skip depend on the document's length: in a 2 x 2 document half the pairs are true, the
    quantile fell among them, and two skips cost no more than a true pair (issue 57). Where no such pair
    is left (1 or 2 sentences a side) a skip costs ``weight`` x :data:`UNRELATED_COST`."""
    n, m = len(costs.src[0]), len(costs.tgt[0])
    picked = np.unique(np.linspace(1, n, num=min(n, rows)).astype(int))
    columns = np.unique(np.linspace(1, m, num=min(m, 2000)).astype(int))
    sample = np.stack([costs.cost(1, 1, int(i), columns) for i in picked])
    unrelated = np.ones(sample.shape, bool)
    unrelated[np.arange(len(picked)), sample.argmin(1)] = False  # each source sentence's nearest
    if len(picked) == n:  # every row sampled: each target sentence's nearest too
        unrelated[sample.argmin(0), np.arange(len(columns))] = False
    left = sample[unrelated]
    return weight * (float(np.quantile(left, quantile)) if left.size else UNRELATED_COST)


def _neighbour_skip(costs: _Costs, weight: float, rows: int = 200) -> float:
    """``weight`` x the median score of (a sample of) the source sentences' nearest 1-1 beads: the scale of a true
    pair's score in this document and with this encoder (a weak encoder's margins are small), so that a sentence
    whose translation is missing is left out rather than merged into its neighbour's bead, and a sentence whose
    translation is there is not. (A skip priced per sentence, by its own best bead, measured worse: issue 65.)"""
    n = len(costs.src[0])
    picked = np.unique(np.linspace(0, n - 1, num=min(n, rows)).astype(int))
    nearest = (costs.src[0][picked] @ costs.tgt[0].T).argmax(1)
    return weight * max(float(np.median(costs.pair_scores(picked, nearest))), 0.0)


UNRELATED_COST = 1.5  # a skip's reference cost where a document has no unrelated pair to measure one


def _dp(costs: _Costs, beads: list[tuple[int, int]], skip: float, n: int, m: int,
        band: list[tuple[int, int]] | None = None, anchors: Anchors | None = None) -> list[tuple[int, int]]:
    """The cheapest monotone path from (0, 0) to (n, m); ``band[i]`` bounds the j of row i; no bead crosses a
    point of ``anchors``. Returns the bead types along the path (in order)."""
    src_ok = {a: anchors.crossing_free("src", a) for a in {a for a, _ in beads}} if anchors else None
    tgt_ok = {b: anchors.crossing_free("tgt", b) for b in {b for _, b in beads}} if anchors else None
    lo = [0] * (n + 1) if band is None else [b[0] for b in band]
    hi = [m] * (n + 1) if band is None else [b[1] for b in band]
    kinds = beads + list(SKIPS)
    rows: list[np.ndarray] = []
    back: list[np.ndarray] = []
    for i in range(n + 1):
        width = hi[i] - lo[i] + 1
        js = np.arange(lo[i], hi[i] + 1)
        best = np.full(width, np.inf)
        arg = np.full(width, -1, np.int8)
        if i == 0:
            best[js == 0] = 0.0
        for t, (a, b) in enumerate(kinds):
            if a == 0 or a > i:  # 0-1 stays within the row: taken after the others, below
                continue
            if src_ok is not None and b and not src_ok[a][i]:
                continue
            ok = (js - b >= lo[i - a]) & (js - b <= hi[i - a]) & (js - b >= 0)
            if tgt_ok is not None and b:
                ok &= tgt_ok[b][js]
            if not ok.any():
                continue
            jj = js[ok]
            total = rows[i - a][jj - b - lo[i - a]] + (skip if b == 0 else costs.cost(a, b, i, jj))
            sel = np.flatnonzero(ok)
            better = total < best[sel]
            best[sel[better]] = total[better]
            arg[sel[better]] = t
        # 0-1: best[j] = min(best[j], best[j-1] + skip), a running minimum along the row
        t01 = kinds.index((0, 1))
        shifted = best - skip * np.arange(width)
        running = np.minimum.accumulate(shifted)
        through = running + skip * np.arange(width)
        use = through < best - 1e-12
        best = np.where(use, through, best)
        arg = np.where(use, t01, arg).astype(np.int8)
        rows.append(best)
        back.append(arg)
    if not np.isfinite(rows[n][m - lo[n]]):
        raise HmdeError("no alignment path fits the band (internal); align with a larger band")
    path, i, j = [], n, m
    while i > 0 or j > 0:
        a, b = kinds[back[i][j - lo[i]]]
        path.append((a, b))
        i, j = i - a, j - b
    return path[::-1]


def _blocks(vectors: np.ndarray, size: int) -> np.ndarray:
    n = len(vectors)
    cut = np.arange(0, n, size)
    sums = np.add.reduceat(vectors, cut, axis=0) if n else vectors
    return normalize(sums)


def _band_from(path: list[tuple[int, int]], size_src: int, size_tgt: int, n: int, m: int, width: int):
    """The fine rows' j ranges around a coarse path (block sizes ``size_src`` x ``size_tgt``)."""
    lo, hi = [m] * (n + 1), [0] * (n + 1)
    ci = cj = 0
    for a, b in path + [(0, 0)]:
        i0, j0 = ci * size_src, cj * size_tgt
        i1, j1 = min((ci + a) * size_src, n), min((cj + b) * size_tgt, m)
        for i in range(max(0, i0 - width), min(n, i1 + width) + 1):
            lo[i] = min(lo[i], max(0, j0 - width))
            hi[i] = max(hi[i], min(m, j1 + width))
        ci, cj = ci + a, cj + b
    for i in range(1, n + 1):  # every row reachable from the previous one
        lo[i] = min(lo[i], hi[i - 1])
        lo[i] = max(lo[i], 0)
        hi[i] = max(hi[i], lo[i - 1])
    lo[0], hi[n] = 0, m
    return list(zip(lo, hi))


@dataclass
class Plan:
    """What the first step decides before any merged span is embedded."""

    skip: float
    band: list[tuple[int, int]] | None
    anchors: Anchors
    single_norms: tuple[np.ndarray, np.ndarray]  # the single sentences' neighbourhoods (the margin's denominators)


def first_step(src1: np.ndarray, tgt1: np.ndarray, options: AlignmentOptions, src_lengths, tgt_lengths) -> Plan:
    """The skip cost, the coarse band of a long document and the locked anchors, from single sentences only."""
    n, m = len(src1), len(tgt1)
    costs = _Costs([src1], [tgt1], options.knn, src_lengths=src_lengths, tgt_lengths=tgt_lengths,
                   length_weight=options.length_weight)
    skip = _skip_cost(costs, options.skip_quantile, options.skip_weight)
    band = None
    if n * m > options.full_cells:
        size = int(np.ceil(np.sqrt(n * m / options.full_cells))) + 1
        coarse_src, coarse_tgt = [_blocks(src1, size)], [_blocks(tgt1, size)]
        coarse = _dp(_Costs(coarse_src, coarse_tgt, options.knn), [(1, 1)], skip, len(coarse_src[0]),
                     len(coarse_tgt[0]))
        band = _band_from(coarse, size, size, n, m, options.band + size)
    norms = (costs.src_norm[0], costs.tgt_norm[0])
    if not options.anchors:
        return Plan(skip, band, Anchors.none(n, m), norms)
    path = _dp(costs, [(1, 1)], skip, n, m, band)
    i, j, ones = 0, 0, []
    for a, b in path:
        if (a, b) == (1, 1):
            ones.append((i, j))
        i, j = i + a, j + b
    pairs = np.array(ones, int).reshape(-1, 2)
    confident = confident_pairs(costs, pairs[:, 0], pairs[:, 1], options.anchor_window)
    return Plan(skip, band, locked_anchors(path, confident, n, m), norms)


def _within(band: list[tuple[int, int]] | None, anchors: Anchors) -> list[tuple[int, int]] | None:
    """The coarse band narrowed to the columns between each row's anchors."""
    if not len(anchors.rows):
        return band
    boxes = anchors.band()
    if band is None:
        return boxes
    out = []
    for (lo, hi), (a, b) in zip(band, boxes):
        lo2, hi2 = max(lo, a), min(hi, b)
        out.append((lo2, hi2) if lo2 <= hi2 else (a, b))
    return out


def align_vectors(src: list[np.ndarray], tgt: list[np.ndarray], options: AlignmentOptions | None = None,
                  src_lengths: Sequence[int] | None = None, tgt_lengths: Sequence[int] | None = None,
                  plan: Plan | None = None) -> list[Bead]:
    """Beads from span vectors (``src[k-1]``: unit vectors of every span of k sentences, of the texts
    :func:`span_texts` joins; a span crossing an anchor of ``plan`` may be any vector, it is never read);
    ``*_lengths``: each sentence's characters, for the length penalty."""
    options = options or AlignmentOptions()
    beads = [b for b in options.bead_types() if b[0] <= len(src) and b[1] <= len(tgt)]
    n, m = len(src[0]), len(tgt[0])
    if n == 0 or m == 0:
        return [Bead([i], [], 0.0) for i in range(n)] + [Bead([], [j], 0.0) for j in range(m)]
    plan = plan or first_step(src[0], tgt[0], options, src_lengths, tgt_lengths)
    costs = _Costs(src, tgt, options.knn, src_lengths=src_lengths, tgt_lengths=tgt_lengths,
                   length_weight=options.length_weight, single_norms=plan.single_norms, scoring=options.scoring)
    skip = _neighbour_skip(costs, options.skip_score) if options.scoring == "neighbours" else plan.skip
    path = _dp(costs, beads, skip, n, m, _within(plan.band, plan.anchors), plan.anchors)
    out, i, j = [], 0, 0
    for a, b in path:
        score = float(costs.cosine(a, b, i + a, np.array([j + b]))[0]) if a and b else 0.0
        out.append(Bead(list(range(i, i + a)), list(range(j, j + b)), score))
        i, j = i + a, j + b
    return out


def beads_f1(predicted: Sequence[Bead], gold: Sequence[Bead]) -> dict[str, float]:
    """Strict and lax F1 as Vecalign defines them: precision over the predicted beads (insertions and
    deletions included), recall over the gold beads with both sides non-empty; lax counts a bead right
    when it shares a sentence on each side with a gold bead."""
    def key(b):
        return tuple(b.src), tuple(b.tgt)

    gold_pairs = [b for b in gold if b.src and b.tgt]
    gold_keys = {key(b) for b in gold}
    strict_p = sum(key(b) in gold_keys for b in predicted) / max(1, len(predicted))
    pred_keys = {key(b) for b in predicted}
    strict_r = sum(key(b) in pred_keys for b in gold_pairs) / max(1, len(gold_pairs))

    def overlaps(b, others):
        return any(set(b.src) & set(o.src) and set(b.tgt) & set(o.tgt) for o in others)

    predicted_pairs = [b for b in predicted if b.src and b.tgt]
    lax_p = (sum(overlaps(b, gold_pairs) for b in predicted_pairs) + sum(
        key(b) in gold_keys for b in predicted if not (b.src and b.tgt))) / max(1, len(predicted))
    lax_r = sum(overlaps(b, predicted_pairs) for b in gold_pairs) / max(1, len(gold_pairs))

    def f1(p, r):
        return 2 * p * r / (p + r) if p + r else 0.0

    return {"strict_precision": strict_p, "strict_recall": strict_r, "strict_f1": f1(strict_p, strict_r),
            "lax_precision": lax_p, "lax_recall": lax_r, "lax_f1": f1(lax_p, lax_r)}
