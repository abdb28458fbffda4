"""Inference in eval mode that leaves every submodule's own train/eval flag as it was.

``module.eval()`` followed by ``module.train(was_training)`` sets every submodule to the
top-level flag: a freshly built HMDE (top level in training mode, its loaded sentence
encoder in eval mode) would come out of one ``encode_documents`` call with the sentence
encoder's dropout switched on, and every later embedding would be noisy.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from torch import nn


@contextlib.contextmanager
def eval_mode(module: nn.Module) -> Iterator[nn.Module]:
    flags = [(m, m.training) for m in module.modules() if m.training]
    if not flags:  # already in eval mode throughout (inference): nothing to set, nothing to restore
        yield module
        return
    module.eval()
    try:
        yield module
    finally:
        for m, training in flags:
            m.training = training
