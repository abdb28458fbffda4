"""What a document method is: the contract every way of turning sentence vectors into one
document vector keeps, so that callers (the command line, the index, the Ray engine, the
evaluation protocols) ask a method what it can do instead of testing its name.

A method is bound to a :class:`~hmde.methods.vectorizer.DocumentVectorizer`, which holds what all methods
share: the model (a hierarchical model, or a sentence encoder given an untrained upper encoder for
its segmentation), the :class:`MethodOptions`, and LAWDR's statistics once fitted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Sequence

import numpy as np

if TYPE_CHECKING:  # PyTorch loads with the model, not with the command line's checks
    import torch

@dataclass
class MethodOptions:
    batch_size: int = 64  # documents per chunk (progress and memory)
    sentence_batch_size: int | None = None  # None: 8 on CPUs, 64 on GPUs
    seg_overlap: float = 1 / 3
    lawdr_m: int | None = None
    lawdr_m_selection: str = "svm"  # the paper's linear SVM on an 8:2 split; "logreg-cv": earlier hmde
    lawdr_kde: str = "per-language"  # the paper's; "pooled": one density for all languages (earlier hmde)
    lawdr_units: str = "sentences"  # sentences | packed (as many sentences as fit the token limit)
    autocast_dtype: torch.dtype | None = None
    show_progress_bar: bool = False

    def lawdr_fit_options(self) -> dict:
        """Keyword arguments of :func:`hmde.methods.lawdr_statistics.fit_lawdr` these options select."""
        return {"m": self.lawdr_m, "m_selection": self.lawdr_m_selection, "kde": self.lawdr_kde}


def flat_text(doc) -> str:
    """A document as one string: a list of sentences is joined with spaces."""
    return doc if isinstance(doc, str) else " ".join(s for s in doc if isinstance(s, str))


class DocumentMethod:
    """One way of making document vectors from a lower encoder. Subclasses set the flags and
    override what differs; the defaults are the mean of the model's sentences."""

    name: ClassVar[str]
    summary: ClassVar[str]  # one line for --help and the docs
    needs_hmde_model: ClassVar[bool] = False  # a trained upper encoder (a saved hmde folder)
    fitted: ClassVar[bool] = False  # statistics fitted on the collection it embeds (LAWDR), saved beside the output
    fine_tunable: ClassVar[bool] = True  # the softmax-head protocol can update its parameters
    contextual: ClassVar[bool] = False  # gives contextualised sentence vectors (a multi-vector index)
    torch_only: ClassVar[bool] = False  # runs a PyTorch model of its own (no ONNX export of it)
    # the document vector is the normalised mean of its sentences' own vectors: an index can recompute it
    # exactly from the sentence vectors it stores (an IVF-PQ index keeps the documents compressed)
    mean_of_sentences: ClassVar[bool] = False

    def __init__(self, vectorizer):
        """``vectorizer``: the :class:`~hmde.methods.vectorizer.DocumentVectorizer` that runs this method (not
        imported here: the vectorizer imports the methods)."""
        self.vectorizer = vectorizer

    @property
    def model(self):
        return self.vectorizer.model

    @property
    def lower(self):
        return self.vectorizer.model.lower

    @property
    def options(self) -> MethodOptions:
        return self.vectorizer.options

    # -- what the method embeds --------------------------------------------------------------
    def units(self, docs: Sequence, langs: Sequence[str | None]) -> list[list[str]]:
        """The texts the lower encoder embeds for each document: the model's sentences."""
        return [self.model.segment(d, lang) for d, lang in zip(docs, langs)]

    def combine(self, per_doc: list[np.ndarray], langs: Sequence[str | None]) -> np.ndarray:
        """Document vectors from each document's unit vectors: their mean (a zero row when empty)."""
        dim = self.lower.dim
        if not per_doc:
            return np.zeros((0, dim), np.float32)
        return np.stack([v.mean(0) if len(v) else np.zeros(dim, np.float32) for v in per_doc])

    def encode(self, docs: Sequence, langs: list[str | None], normalize_embeddings: bool) -> np.ndarray:
        """(len(docs), dim) document vectors, normalised with numpy when asked."""
        from ..align.similarity import normalize

        vectors = np.asarray(self.combine(self.vectorizer.sentence_vectors(docs, langs), langs), dtype=np.float32)
        return normalize(vectors) if normalize_embeddings else vectors

    def reuses_sentences(self) -> bool:
        """Whether the document vectors combine exactly the model's sentence vectors, so that an index
        storing those sentences embeds them once."""
        return False

    # -- fine-tuning --------------------------------------------------------------------------
    def trainable(self) -> list[torch.nn.Parameter]:
        """What fine-tuning updates: the lower encoder whose vectors the method combines."""
        return list(self.lower.parameters())

    def document_tensor(self, docs: Sequence, langs: list[str | None], max_units: int | None) -> torch.Tensor:
        """Document vectors with gradients (fine-tuning's softmax head reads them): the lower encoder on
        the method's units, before its final ``Normalize`` (as the paper's LaBSE pooled output;
        :mod:`hmde.encoders.unnormalized`), averaged."""
        import torch

        units = self.tensor_units(docs, langs, max_units)
        flat = [u for doc in units for u in doc]
        vectors = self.lower.embed(flat, batch_size=self.options.sentence_batch_size, normalized=False) if flat else None
        out, start = [], 0
        for doc in units:
            if doc:
                out.append(vectors[start:start + len(doc)].mean(0))
            else:
                out.append(torch.zeros(self.lower.dim, device=self.lower.device))
            start += len(doc)
        return torch.stack(out)

    def tensor_units(self, docs: Sequence, langs: list[str | None], max_units: int | None) -> list[list[str]]:
        """The units fine-tuning embeds (``max_units`` crops only where the method says so)."""
        return self.units(docs, langs)
