"""Margin scoring against a brute-force computation; alignment directions."""

import numpy as np
import pytest

from hmde.errors import HmdeError
from hmde.align.similarity import align, score_candidates


def _brute_margin(x, y, k):
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    y = y / np.linalg.norm(y, axis=1, keepdims=True)
    cos = x @ y.T
    x_nn = np.sort(cos, axis=1)[:, ::-1][:, :k].mean(1)
    y_nn = np.sort(cos.T, axis=1)[:, ::-1][:, :k].mean(1)
    return cos / ((x_nn[:, None] + y_nn[None, :]) / 2)


def test_margin_scores_equal_brute_force():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(30, 8)), rng.normal(size=(25, 8))
    brute = _brute_margin(x, y, 4)
    fwd, bwd = score_candidates(x, y, "margin", k=4, candidates=25)
    for i in range(len(x)):
        np.testing.assert_allclose(fwd.scores[i], brute[i, fwd.ids[i]], rtol=1e-4, atol=1e-6)
        assert fwd.ids[i, 0] == brute[i].argmax()
    for j in range(len(y)):
        np.testing.assert_allclose(bwd.scores[j], brute[bwd.ids[j], j], rtol=1e-4, atol=1e-6)
        assert bwd.ids[j, 0] == brute[:, j].argmax()


def test_alignment_recovers_a_noisy_permutation_and_directions_differ():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(20, 16))
    perm = rng.permutation(20)
    y = x[perm] + 0.05 * rng.normal(size=(20, 16))
    pairs = align(x, y, "margin", direction="max")
    assert sorted((i, j) for i, j, _ in pairs) == sorted((int(perm[j]), j) for j in range(20))
    hub = np.vstack([y, x.mean(0, keepdims=True) * 5])  # a hub near everything
    fwd = align(x, hub, "cosine", direction="forward")
    inter = align(x, hub, "cosine", direction="intersection")
    assert len(fwd) == 20 and len(inter) <= 20
    assert all(s >= 0.9 for _, _, s in align(x, y, "cosine", direction="forward", threshold=0.9))


def test_bad_scoring_and_empty_sides():
    with pytest.raises(HmdeError, match="unknown scoring"):
        score_candidates(np.ones((2, 3)), np.ones((2, 3)), "dot")
    with pytest.raises(HmdeError, match="at least one vector"):
        align(np.ones((0, 3)), np.ones((2, 3)))
