"""Document methods, one class per method, found by name here (the one registry every caller asks).

=============  ==============================================================================
``hmde``       the hierarchical model (needs a trained upper encoder)
``mean``       the mean of the document's sentence vectors
``first``      the sentence encoder on the first segment (the paper's "LaBSE" row)
``seg``        token windows overlapping by a third, averaged ("LaBSE-Seg")
``lawdr``      LAWDR's weighted, language-cleaned sentence vectors (fitted, not trained)
``longformer`` a Longformer converted from the sentence encoder, on the whole document
=============  ==============================================================================
"""

from __future__ import annotations

from .base import DocumentMethod, MethodOptions, flat_text  # noqa: F401
from .first import FirstMethod  # noqa: F401
from .hmde import HmdeMethod  # noqa: F401
from .lawdr import LawdrMethod, pack_sentences  # noqa: F401
from .longformer import LongformerMethod  # noqa: F401
from .mean import MeanMethod  # noqa: F401
from .registry import REGISTRY, method_class, default_method  # noqa: F401
from .seg import SegMethod  # noqa: F401


# ``hmde.methods.DocumentVectorizer`` (what users import) and the other names of the vectorizer module,
# loaded on first use: the registry above stays importable without the deep-learning libraries
_VECTORIZER = ("DocumentVectorizer", "encode_query_texts", "as_hierarchical", "METHODS")


def __getattr__(name: str):
    if name in _VECTORIZER:
        from . import vectorizer

        return getattr(vectorizer, name)
    raise AttributeError(f"module 'hmde.methods' has no attribute {name!r}")
