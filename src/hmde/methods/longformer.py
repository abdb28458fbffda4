"""``longformer``: the whole document (up to 4,096 tokens) through a Longformer converted from the
sentence encoder (:mod:`hmde.longformer`), global attention on the first token."""

from __future__ import annotations

import numpy as np

from .base import DocumentMethod


class LongformerMethod(DocumentMethod):
    name = "longformer"
    summary = "a Longformer converted from the sentence encoder, on the whole document"
    torch_only = True

    def __init__(self, vectorizer):
        from ..longformer import LongformerEncoder

        super().__init__(vectorizer)
        self.longformer = LongformerEncoder(self.lower.model)

    def encode(self, docs, langs, normalize_embeddings):
        from ..align.similarity import normalize

        vectors = self.longformer.encode(list(docs)) if len(docs) else np.zeros((0, self.lower.dim), np.float32)
        vectors = np.asarray(vectors, dtype=np.float32)
        return normalize(vectors) if normalize_embeddings else vectors

    def trainable(self):
        return list(self.longformer.model.parameters())

    def document_tensor(self, docs, langs, max_units):
        return self.longformer.forward(list(docs), normalized=False)  # as the other methods' (base.document_tensor)
