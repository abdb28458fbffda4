"""Mean reciprocal rank of vectors against candidates, in memory (the languages table's tasks, a route's validation):
each query's right candidate ranked by cosine among all of them."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..align.similarity import normalize


def mean_reciprocal_rank(queries: np.ndarray, candidates: np.ndarray, right: Sequence[int] | None = None,
                         ties_against: bool = True) -> float:
    """MRR of ``queries`` (rows) whose right candidate is row ``right[i]`` of ``candidates`` (None: row i).
    ``ties_against``: a candidate scoring as high as the right one ranks above it (a strict count; False: below it,
    as the languages table has always counted)."""
    sims = normalize(queries) @ normalize(candidates).T
    right = np.arange(len(sims)) if right is None else np.asarray(right, np.int64)
    own = sims[np.arange(len(sims)), right]
    ranks = (sims >= own[:, None]).sum(1) if ties_against else (sims > own[:, None]).sum(1) + 1
    return float((1.0 / ranks).mean())
