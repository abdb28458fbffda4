"""The first step of sentence alignment: confident 1-1 anchors, the points the final path must pass through.

A cheap programme over single sentences only (1-1 beads and skips) gives a first path. A 1-1 bead of that
path is *confident* where its pair is the cheapest in its row and in its column within ``window`` sentences
either way (a mutual nearest neighbour near the diagonal). A confident bead whose two neighbours on the path
are confident 1-1 beads too (or a document's edge) is *locked*: the final path passes through both of its
corners, so no bead may merge its sentences with another's. Between locked beads a windowed programme with
every merge size runs (:func:`hmde.align.sentence_alignment.align_vectors`), and a span that would cross a
locked corner is never embedded (:meth:`Anchors.span_starts`): on translated prose most sentences are locked
and only the stretches around merges, splits and omissions cost spans.

A lone confident pair is not locked: a sentence translated by two is usually nearest to the longer of them,
and a lock there would forbid the 1-2 bead that is right.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Anchors:
    """Points ``(row, column)`` of the grid (row ``i``: after ``i`` source sentences) every path visits."""

    rows: np.ndarray  # the pinned rows, increasing
    columns: np.ndarray  # their columns, increasing
    n: int
    m: int

    @classmethod
    def none(cls, n: int, m: int) -> "Anchors":
        return cls(np.zeros(0, int), np.zeros(0, int), n, m)

    def pinned(self, side: str) -> np.ndarray:
        """Booleans over the grid points of one side (0 .. n or 0 .. m): pinned or not."""
        out = np.zeros((self.n if side == "src" else self.m) + 1, bool)
        out[self.rows if side == "src" else self.columns] = True
        return out

    def crossing_free(self, side: str, k: int) -> np.ndarray:
        """``ok[e]`` over end points e (0 .. n): a span of ``k`` sentences ending at ``e`` crosses no pinned
        point (the points ``e-k+1 .. e-1`` are free). Spans that do are never needed."""
        pinned = self.pinned(side)
        count = np.concatenate([[0], np.cumsum(pinned)])  # count[p]: pinned points before p
        ends = np.arange(len(pinned))
        starts = ends - k
        ok = starts >= 0
        inner = np.zeros(len(pinned), int)
        inner[ok] = count[ends[ok]] - count[starts[ok] + 1]  # pinned points starts+1 .. ends-1
        return ok & (inner == 0)

    def span_starts(self, side: str, k: int) -> np.ndarray:
        """The first sentences of the ``k``-sentence spans a search can reach (for ``k`` >= 2)."""
        return np.flatnonzero(self.crossing_free(side, k)) - k

    def band(self) -> list[tuple[int, int]]:
        """Each row's column range: between the pinned points before and after it."""
        lo = np.zeros(self.n + 1, int)
        hi = np.full(self.n + 1, self.m)
        if len(self.rows):
            before = np.searchsorted(self.rows, np.arange(self.n + 1), side="right") - 1
            after = np.searchsorted(self.rows, np.arange(self.n + 1), side="left")
            has_before, has_after = before >= 0, after < len(self.rows)
            lo[has_before] = self.columns[before[has_before]]
            hi[has_after] = self.columns[after[has_after]]
        return list(zip(lo.tolist(), hi.tolist()))


def confident_pairs(costs, i: np.ndarray, j: np.ndarray, window: int, chunk: int = 2048) -> np.ndarray:
    """Whether each 1-1 pair (sentence ``i[k]``, sentence ``j[k]``) is the cheapest of its row and of its
    column among the ``window`` sentences either side (``costs``: a :class:`~hmde.align.sentence_alignment._Costs`)."""
    n, m = len(costs.src[0]), len(costs.tgt[0])
    offsets = np.arange(-window, window + 1)
    out = np.zeros(len(i), bool)
    for s in range(0, len(i), chunk):
        ii, jj = i[s:s + chunk, None], j[s:s + chunk, None]
        cols = jj + offsets
        rows = ii + offsets
        col_ok, row_ok = (cols >= 0) & (cols < m), (rows >= 0) & (rows < n)
        across = np.where(col_ok, costs.pair_costs(np.broadcast_to(ii, cols.shape), np.clip(cols, 0, m - 1)), np.inf)
        down = np.where(row_ok, costs.pair_costs(np.clip(rows, 0, n - 1), np.broadcast_to(jj, rows.shape)), np.inf)
        own = across[:, window].copy()  # the pair itself, at offset 0 of its row
        across[:, window] = down[:, window] = np.inf
        out[s:s + chunk] = (own < across.min(1)) & (own < down.min(1))
    return out


def locked_anchors(path: list[tuple[int, int]], confident: np.ndarray, n: int, m: int) -> Anchors:
    """The corners of the locked beads of a first ``path`` (bead types in order); ``confident[k]``: whether
    the path's k-th 1-1 bead is confident."""
    starts, i, j = [], 0, 0
    kinds = []
    for a, b in path:
        starts.append((i, j))
        kinds.append((a, b))
        i, j = i + a, j + b
    sure = np.zeros(len(path), bool)
    ones = [k for k, t in enumerate(kinds) if t == (1, 1)]
    sure[ones] = confident
    rows, columns = set(), {}
    for k in ones:
        left = sure[k - 1] if k > 0 else True  # a document's edge counts as a confident neighbour
        right = sure[k + 1] if k + 1 < len(path) else True
        if sure[k] and left and right:
            (i, j) = starts[k]
            for r, c in ((i, j), (i + 1, j + 1)):
                rows.add(r)
                columns[r] = c
    ordered = sorted(rows)
    return Anchors(np.array(ordered, int), np.array([columns[r] for r in ordered], int), n, m)
