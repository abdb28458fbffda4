"""Cosine and margin scoring of two vector sets, with candidates from FAISS.

The ratio margin (Artetxe & Schwenk 2019, used by LAWDR) divides the cosine of a pair
by the average cosine of each side's ``k`` nearest neighbours in the other set:

    margin(x, y) = cos(x, y) / (sum_{z in NN_k(x)} cos(x, z) / 2k + sum_{z in NN_k(y)} cos(y, z) / 2k)

so a "hub" that is near everything is discounted. Candidates come from an exact
inner-product FAISS search over L2-normalised vectors.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import HmdeError

SCORINGS = ("cosine", "margin")
DIRECTIONS = ("forward", "backward", "max", "intersection")
MATCHINGS = ("greedy", "hungarian", "top1")


def normalize(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)


def knn(queries: np.ndarray, keys: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Cosine similarities and indices of each query's ``k`` nearest keys (exact search)."""
    import faiss

    if queries.shape[1] != keys.shape[1]:
        raise HmdeError(f"dimension mismatch: {queries.shape[1]} vs {keys.shape[1]}")
    k = min(k, len(keys))
    index = faiss.IndexFlatIP(keys.shape[1])
    index.add(normalize(keys))
    sims, ids = index.search(normalize(queries), k)
    return sims, ids


def neighbourhood_means(x: np.ndarray, y: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean cosine of each x to its k nearest y, and of each y to its k nearest x."""
    return knn(x, y, k)[0].mean(axis=1), knn(y, x, k)[0].mean(axis=1)


def margin_of(cos: np.ndarray, x_mean: np.ndarray, y_mean: np.ndarray) -> np.ndarray:
    """Ratio margin for cosines ``cos`` given the two sides' neighbourhood means (broadcasts)."""
    return cos / ((x_mean + y_mean) / 2.0)


@dataclass
class Scored:
    """For each row of one side: candidate indices on the other side and their scores, best first."""

    ids: np.ndarray  # (n, c)
    scores: np.ndarray  # (n, c)


def score_candidates(x: np.ndarray, y: np.ndarray, scoring: str = "margin", k: int = 4,
                     candidates: int = 16) -> tuple[Scored, Scored]:
    """Forward (x -> y) and backward (y -> x) candidates, re-ranked by ``scoring``."""
    if scoring not in SCORINGS:
        raise HmdeError(f"unknown scoring '{scoring}' (cosine or margin)")
    if len(x) == 0 or len(y) == 0:
        raise HmdeError("both sides need at least one vector")
    c = max(1, min(candidates, len(x), len(y)))
    fwd_cos, fwd_ids = knn(x, y, c)
    bwd_cos, bwd_ids = knn(y, x, c)
    if scoring == "margin":
        x_mean, y_mean = neighbourhood_means(x, y, k)
        fwd = margin_of(fwd_cos, x_mean[:, None], y_mean[fwd_ids])
        bwd = margin_of(bwd_cos, x_mean[bwd_ids], y_mean[:, None])
    else:
        fwd, bwd = fwd_cos, bwd_cos
    out = []
    for ids, scores in ((fwd_ids, fwd), (bwd_ids, bwd)):
        order = np.argsort(-scores, axis=1, kind="stable")
        out.append(Scored(np.take_along_axis(ids, order, 1), np.take_along_axis(scores, order, 1)))
    return out[0], out[1]


def align(x: np.ndarray, y: np.ndarray, scoring: str = "margin", k: int = 4, direction: str = "max",
          candidates: int = 16, threshold: float | None = None) -> list[tuple[int, int, float]]:
    """Pairs (i, j, score) of x and y.

    ``forward``: each x with its best y; ``backward``: each y with its best x;
    ``intersection``: pairs both directions agree on; ``max`` (LASER's mining mode):
    both directions' best pairs, highest score first, each item used at most once.
    """
    if direction not in DIRECTIONS:
        raise HmdeError(f"unknown direction '{direction}' ({', '.join(DIRECTIONS)})")
    fwd, bwd = score_candidates(x, y, scoring, k, candidates)
    forward = [(i, int(fwd.ids[i, 0]), float(fwd.scores[i, 0])) for i in range(len(x))]
    backward = [(int(bwd.ids[j, 0]), j, float(bwd.scores[j, 0])) for j in range(len(y))]
    if direction == "forward":
        pairs = forward
    elif direction == "backward":
        pairs = backward
    elif direction == "intersection":
        back = {(i, j) for i, j, _ in backward}
        pairs = [p for p in forward if (p[0], p[1]) in back]
    else:
        pairs, used_x, used_y = [], set(), set()
        for i, j, s in sorted(forward + backward, key=lambda p: -p[2]):
            if i not in used_x and j not in used_y:
                pairs.append((i, j, s))
                used_x.add(i)
                used_y.add(j)
    if threshold is not None:
        pairs = [p for p in pairs if p[2] >= threshold]
    return pairs


def full_scores(x: np.ndarray, y: np.ndarray, scoring: str = "margin", k: int = 4) -> np.ndarray:
    """The whole (len(x), len(y)) score matrix: cosine, or the ratio margin of every pair."""
    if scoring not in SCORINGS:
        raise HmdeError(f"unknown scoring '{scoring}' (cosine or margin)")
    cos = normalize(x) @ normalize(y).T
    if scoring == "cosine":
        return cos
    x_mean, y_mean = neighbourhood_means(x, y, k)
    return margin_of(cos, x_mean[:, None], y_mean[None, :]).astype(np.float32)


def match_one_to_one(scores: np.ndarray, method: str = "greedy") -> list[tuple[int, int, float]]:
    """A one-to-one matching of rows and columns of a score matrix, as (i, j, score).

    ``greedy`` (LAWDR's procedure): every pair of the full matrix, best score first, taken
    when neither side is matched yet; every row is matched while columns remain.
    ``hungarian``: the matching of maximal total score (scipy's linear_sum_assignment).
    The top-1 variant (each side's best candidate only, LASER's ``max`` mode) is
    :func:`align` with ``direction="max"``; it leaves documents unmatched whose best
    candidate was taken by another.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if method == "hungarian":
        from scipy.optimize import linear_sum_assignment

        rows, cols = linear_sum_assignment(scores, maximize=True)
        return [(int(i), int(j), float(scores[i, j])) for i, j in zip(rows, cols)]
    if method != "greedy":
        raise HmdeError(f"unknown matching '{method}' ({', '.join(MATCHINGS)})")
    order = np.argsort(-scores, axis=None, kind="stable")
    used_x, used_y, pairs = np.zeros(scores.shape[0], bool), np.zeros(scores.shape[1], bool), []
    limit = min(scores.shape)
    for flat in order:
        i, j = divmod(int(flat), scores.shape[1])
        if not used_x[i] and not used_y[j]:
            used_x[i] = used_y[j] = True
            pairs.append((i, j, float(scores[i, j])))
            if len(pairs) == limit:
                break
    return pairs
