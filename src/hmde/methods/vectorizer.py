"""Ways of turning one sentence encoder into a document encoder, side by side.

:class:`DocumentVectorizer` holds what every method shares (the model, the options, LAWDR's
statistics) and runs the method found by name in :mod:`hmde.methods`, where each
method is one small class: ``hmde``, ``first``, ``seg``, ``mean``, ``lawdr``, ``longformer``.
All of them use the same lower encoder, segmentation and token limit, so that a comparison
measures the method and nothing else.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from ..encoders.config import DOCUMENT_METHODS, HierarchicalConfig
from .base import DocumentMethod, MethodOptions, flat_text  # noqa: F401
from .lawdr import pack_sentences  # noqa: F401
from .registry import method_class
from ..errors import HmdeError
from ..encoders.eval_mode import eval_mode
from ..encoders.hierarchical import HierarchicalEncoder, _as_langs
from .lawdr_statistics import LawdrStats, fit_lawdr
from ..encoders.sentence_encoder import SentenceEncoder

METHODS = DOCUMENT_METHODS


def as_hierarchical(model: HierarchicalEncoder | SentenceEncoder) -> HierarchicalEncoder:
    """A sentence encoder gets an (untrained) upper encoder, used only for its segmentation."""
    if isinstance(model, HierarchicalEncoder):
        return model
    overrides = getattr(model, "length_overrides", None)  # set by hmde.encoders.length_settings
    return HierarchicalEncoder(model, HierarchicalConfig().replace(**overrides) if overrides else None)


def encode_query_texts(model: HierarchicalEncoder | SentenceEncoder, texts: Sequence, batch_size: int | None = None,
                       normalize_embeddings: bool = False, autocast_dtype: torch.dtype | None = None,
                       show_progress_bar: bool = False) -> np.ndarray:
    """CLIR queries: each text through the lower encoder alone (a list of sentences is joined).

    Empty texts get all-zero rows, as empty documents do, so rows and ids always line up.
    """
    from ..io.documents import is_empty_text

    lower = model.lower if isinstance(model, HierarchicalEncoder) else model
    vectors = lower.encode([flat_text(t) for t in texts], batch_size=batch_size, show_progress_bar=show_progress_bar,
                           normalize_embeddings=normalize_embeddings, autocast_dtype=autocast_dtype,
                           prompt_name="query")
    vectors[[i for i, t in enumerate(texts) if is_empty_text(t)]] = 0.0
    return vectors


class DocumentVectorizer:
    """Document vectors by one of :data:`METHODS` on ``model``'s lower encoder."""

    def __init__(self, model: HierarchicalEncoder | SentenceEncoder, method: str,
                 options: MethodOptions | None = None, lawdr_stats: LawdrStats | None = None):
        cls = method_class(method)
        if cls.needs_hmde_model and not isinstance(model, HierarchicalEncoder):
            raise HmdeError(f"--method {method} needs a saved hmde model; this is a sentence encoder "
                            "(use first, seg, mean or lawdr)")
        self.model = as_hierarchical(model)
        self.method = method
        self.options = options or MethodOptions()
        self.lawdr_stats = lawdr_stats
        self.document_method: DocumentMethod = cls(self)

    @property
    def lower(self) -> SentenceEncoder:
        return self.model.lower

    @property
    def longformer(self):
        """The converted Longformer of method ``longformer`` (None for the others)."""
        return getattr(self.document_method, "longformer", None)

    def _embed(self, texts: list[str]) -> np.ndarray:
        o = self.options
        with torch.inference_mode(), eval_mode(self.lower):
            return self.lower.embed(texts, batch_size=o.sentence_batch_size,
                                    autocast_dtype=o.autocast_dtype).float().cpu().numpy()

    def _grouped(self, pieces: list[list[str]]) -> list[np.ndarray]:
        flat = [p for doc in pieces for p in doc]
        vectors = self._embed(flat) if flat else np.zeros((0, self.lower.dim), np.float32)
        return np.split(vectors, np.cumsum([len(p) for p in pieces])[:-1]) if pieces else []

    def units(self, docs: Sequence, langs: Sequence[str | None]) -> list[list[str]]:
        return self.document_method.units(docs, langs)

    def sentence_vectors(self, docs: Sequence, langs=None) -> list[np.ndarray]:
        """The per-document unit vectors the method combines."""
        langs_ = _as_langs(langs, len(docs))
        out: list[np.ndarray] = []
        step = max(1, self.options.batch_size)
        for start in tqdm(range(0, len(docs), step), desc=f"documents ({self.method})", unit="batch",
                          disable=not self.options.show_progress_bar):
            out.extend(self._grouped(self.units(docs[start:start + step], langs_[start:start + step])))
        return out

    def fit_lawdr(self, docs: Sequence, langs) -> LawdrStats:
        return self.fit_lawdr_vectors(self.sentence_vectors(docs, langs), _as_langs(langs, len(docs)))

    def fit_lawdr_vectors(self, per_doc: list[np.ndarray], langs: Sequence[str | None]) -> LawdrStats:
        """LAWDR's statistics, with these options, from each document's unit vectors; kept for encoding."""
        self.lawdr_stats = fit_lawdr(per_doc, list(langs), **self.options.lawdr_fit_options())
        return self.lawdr_stats

    def encode(self, docs: Sequence, langs=None, normalize_embeddings: bool = False) -> np.ndarray:
        """(len(docs), dim) float32; an empty document gives a zero row."""
        if isinstance(docs, str):
            raise HmdeError("encode takes a list of documents, not one string")
        return self.document_method.encode(docs, _as_langs(langs, len(docs)), normalize_embeddings)

    def trainable(self) -> list[torch.nn.Parameter]:
        """What fine-tuning this method updates: the whole hierarchical model for ``hmde``, else
        the lower encoder (or the Longformer) whose vectors the method combines."""
        return self.document_method.trainable()

    def document_tensor(self, docs: Sequence, langs=None, max_units: int | None = None) -> torch.Tensor:
        """Document vectors with gradients, for fine-tuning (the paper's softmax-head protocol).

        ``hmde``: the hierarchical model on the documents' units (the first ``max_units``
        when given); ``first``/``seg``/``mean``: the lower encoder on the method's units,
        averaged per document; ``longformer``: the Longformer on the whole document."""
        return self.document_method.document_tensor(docs, _as_langs(langs, len(docs)), max_units)

    def sentences(self, docs: Sequence, langs=None) -> tuple[list[list[str]], list[np.ndarray]]:
        """Each document's sentences (the model's segmentation) and their lower-encoder vectors."""
        units = [self.model.segment(d, lang) for d, lang in zip(docs, _as_langs(langs, len(docs)))]
        return units, self._grouped(units)

    def encode_with_sentences(self, docs: Sequence, langs=None, contextual: bool = False
                              ) -> tuple[np.ndarray, list[list[str]], list[np.ndarray]]:
        """(document vectors, each document's sentences, their lower-encoder vectors), e.g. for an index.

        The sentence vectors are computed once: ``hmde`` returns them with its documents,
        and ``mean`` and sentence-level ``lawdr`` combine exactly these vectors.
        ``contextual`` (method hmde): the sentences' contextualised vectors instead, for a
        multi-vector index.
        """
        langs_ = _as_langs(langs, len(docs))
        method = self.document_method
        if contextual:
            if not method.contextual:
                raise HmdeError(f"contextualised sentence vectors come from the hierarchical model (method hmde), "
                                f"not {self.method}")
            vectors, encoded = method.encode_with_contextual(docs, langs_)
            return vectors, [e.units for e in encoded], [e.vectors for e in encoded]
        if hasattr(method, "encode_with_sentences"):
            return method.encode_with_sentences(docs, langs_)
        units, sents = self.sentences(docs, langs_)
        if method.reuses_sentences():
            vectors = method.combine(sents, langs_)
        else:  # first, seg, longformer and packed LAWDR embed other units
            vectors = self.encode(docs, langs_)
        return np.asarray(vectors, dtype=np.float32), units, sents
