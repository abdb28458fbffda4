"""Each hit's relevance (hmde.index.relevance), by hand: the z-value of its score among its query's best candidates
through the fitted logistic; the raw score's logistic where there are too few; monotone within a query."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hmde.index import relevance


def logistic(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def test_a_hits_relevance_by_hand():
    pool = [1.30, 1.25, 1.20, 1.20, 1.15, 1.10, 1.10, 1.05, 1.05, 1.00, 1.00, 0.95]  # 12 candidates, best first
    mean, std = float(np.mean(pool)), float(np.std(pool))
    got = relevance.relevances([1.30, 1.20], pool)
    assert got == pytest.approx([logistic(3.15 * (1.30 - mean) / std - 9.77), logistic(3.15 * (1.20 - mean) / std - 9.77)])
    assert got[0] > got[1] and all(0 <= x <= 1 for x in got)
    few = relevance.relevances([1.30], pool[:3])  # under 10 candidates: the raw score's logistic
    assert few == pytest.approx([logistic(83.0 * 1.30 - 107.0)])
    assert relevance.relevances([1.0], [1.0] * 20) == pytest.approx([logistic(83.0 - 107.0)])  # no spread to read


def test_the_fitted_constants_are_pinned():
    """docs/integrations.md: fitted by benchmarks/relevance_calibration.py on the dev XQuAD articles and paragraphs."""
    assert (relevance.POOL, relevance.MIN_POOL, relevance.Z_SLOPE, relevance.Z_OFFSET, relevance.RAW_SLOPE,
            relevance.RAW_OFFSET) == (50, 10, 3.15, -9.77, 83.0, -107.0)


def test_every_search_hit_carries_it(tmp_path):
    from store_contract import DIM, batch, meta_for, world

    from hmde.index.store import DocumentIndex

    with DocumentIndex.write_batches(tmp_path / "idx", meta_for(""), [batch(world(30))]) as index:
        for multi in (True, False):
            hits = index.search(np.ones((1, DIM), np.float32), top_k=5, multi_vector=multi)[0]
            values = [h.relevance for h in hits]
            assert all(0 <= v <= 1 for v in values) and values == sorted(values, reverse=True)
            wide = index.search(np.ones((1, DIM), np.float32), top_k=30, multi_vector=multi)[0]
            assert [h.relevance for h in wide[:5]] == pytest.approx(values)  # read among the same candidates
