"""The bundled models' document vectors, pinned for every method on a fixed sample (issue 28).

Why: the redesign (one class per document method, one protocol per lower encoder) must not change
a vector. The references in tests/data/pinned_vectors/ were written before it, by this file with
HMDE_WRITE_PINNED=1; on a CPU of the same kind (the capability torch reports) they must be equal
bit for bit, elsewhere within float32 rounding (other SIMD paths round differently).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

PINNED = Path(__file__).parent / "data" / "pinned_vectors"
SAMPLE = Path(__file__).parents[1] / "src" / "hmde" / "demo" / "collection.jsonl"
CASES = [(model, method) for model in ("hmde-mini", "hmde-use") for method in ("hmde", "mean", "first", "seg", "lawdr")]


def _capability() -> str:
    return f"{torch.backends.cpu.get_cpu_capability()} torch {torch.__version__.split('+')[0]}"


def _vectors(model_name: str, method: str) -> np.ndarray:
    from hmde import HierarchicalEncoder
    from hmde.methods.vectorizer import DocumentVectorizer, MethodOptions

    rows = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    model = HierarchicalEncoder.from_pretrained(model_name, device="cpu")
    options = MethodOptions(lawdr_m=8) if method == "lawdr" else MethodOptions()  # 36 documents: m fixed
    vectorizer = DocumentVectorizer(model, method, options)
    texts, langs = [r["text"] for r in rows], [r["lang"] for r in rows]
    if method == "lawdr":
        vectorizer.fit_lawdr(texts, langs)
    return vectorizer.encode(texts, langs)


@pytest.mark.parametrize("model_name, method", CASES)
def test_bundled_vectors_are_the_pinned_ones(model_name, method):
    path = PINNED / f"{model_name}.{method}.npy"
    vectors = _vectors(model_name, method)
    if os.environ.get("HMDE_WRITE_PINNED") == "1":
        PINNED.mkdir(parents=True, exist_ok=True)
        np.save(path, vectors)
        (PINNED / "machine.txt").write_text(_capability() + "\n")
    expected = np.load(path)
    if (PINNED / "machine.txt").read_text().strip() == _capability():
        assert np.array_equal(vectors, expected), np.abs(vectors - expected).max()
    else:
        np.testing.assert_allclose(vectors, expected, atol=2e-5)
