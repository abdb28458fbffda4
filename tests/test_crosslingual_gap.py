"""The cross-lingual gap table's hub-sentence correction (issue 64; benchmarks/crosslingual_gap.py, measured and not
shipped: docs/defaults.md, "Hub sentences as evidence"), its value checked by hand."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


def test_hubness_is_the_mean_cosine_with_the_k_nearest_sentences_of_other_documents():
    from crosslingual_gap import hubness

    # two documents: sentences 0, 1 of document 0 and 2, 3 of document 1; cosines across them by hand:
    # s0.s2 = 0.6, s0.s3 = -1, s1.s2 = 0.8, s1.s3 = 0 (a sentence's own document never counts)
    sentences = np.array([[1, 0], [0, 1], [0.6, 0.8], [-1, 0]], np.float32)
    owners = np.array([0, 0, 1, 1])
    assert hubness(sentences, owners, 1) == pytest.approx([0.6, 0.8, 0.8, 0.0])
    assert hubness(sentences, owners, 2) == pytest.approx([-0.2, 0.4, 0.7, -0.5])
    # k beyond the other documents' sentences: the missing neighbours count as 0
    assert hubness(sentences, owners, 5) == pytest.approx([-0.4 / 3, 0.8 / 3, 1.4 / 3, -1 / 3])
