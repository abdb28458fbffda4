"""The vectors a sentence-transformers folder gives before its final ``Normalize``: what a softmax
head is trained on when a model is fine-tuned for classification."""

from __future__ import annotations


def without_final_normalize(modules: list) -> list:
    """A sentence-transformers pipeline without its last module when that is ``Normalize``.

    Why: fine-tuning puts a softmax head on the document vector (the HMDE paper's eq. 2), and the
    paper's baselines gave it LaBSE's pooled output, which is not unit length. Most hub folders
    (LaBSE's, multilingual-e5's) end in ``Normalize``; on unit vectors a freshly initialised head at
    lr 2e-5 reaches logits of a few hundredths, so a baseline could barely learn (e5 ``mean`` on
    MasakhaNEWS: English dev loss 1.61 after an epoch, against hmde-e5's 0.41)."""
    from sentence_transformers.base.modules.normalize import Normalize

    return modules[:-1] if modules and isinstance(modules[-1], Normalize) else modules
