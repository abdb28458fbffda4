"""Vectors must be finite numbers before anything is written.

Why: a model whose weights hold NaN (a diverged training run, a damaged file) gives NaN for
every document, and FAISS and NumPy take NaN without a word: the index or .npy file looks
fine and every search returns arbitrary documents. The writers check each batch and stop
with one line naming the first document affected; the old output stays as it was.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..errors import HmdeError


def require_finite(vectors: np.ndarray, ids: Sequence[str]) -> None:
    vectors = np.asarray(vectors)
    if vectors.size == 0 or np.isfinite(vectors).all():
        return
    bad = np.flatnonzero(~np.isfinite(vectors.reshape(len(vectors), -1)).all(axis=1))
    raise HmdeError(f"the model gave NaN or infinite vectors for {len(bad)} of {len(vectors)} documents (first: "
                    f"{ids[int(bad[0])]!r}); its weights are probably damaged (did its training diverge?); "
                    "nothing was written")
