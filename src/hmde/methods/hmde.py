"""``hmde``: the hierarchical model: the lower encoder on every sentence, the trained upper encoder
over them, the mean of its contextualised vectors (:class:`~hmde.encoders.hierarchical.HierarchicalEncoder`)."""

from __future__ import annotations

import numpy as np

from .base import DocumentMethod


class HmdeMethod(DocumentMethod):
    name = "hmde"
    summary = "the hierarchical model (a trained upper encoder over the sentence vectors)"
    needs_hmde_model = True
    contextual = True

    def _document_options(self) -> dict:
        o = self.options
        return {"batch_size": o.batch_size, "sentence_batch_size": o.sentence_batch_size,
                "autocast_dtype": o.autocast_dtype, "show_progress_bar": o.show_progress_bar}

    def encode(self, docs, langs, normalize_embeddings):
        """The model's own batching and normalisation (torch's), as ``hmde encode`` has always given."""
        return np.asarray(self.model.encode_documents(docs, langs=langs, normalize_embeddings=normalize_embeddings,
                                                      **self._document_options()), dtype=np.float32)

    def encode_with_sentences(self, docs, langs):
        return self.model.encode_documents(docs, langs=langs, return_sentences=True, **self._document_options())

    def encode_with_contextual(self, docs, langs):
        """Document vectors and each document's contextualised sentences (a multi-vector index)."""
        return self.model.encode_with_contextual(docs, langs, **self._document_options())

    def trainable(self):
        return list(self.model.parameters())

    def document_tensor(self, docs, langs, max_units):
        units = [self.model.segment(d, lang) for d, lang in zip(docs, langs)]
        units = [u[:max_units] for u in units] if max_units else units
        return self.model.encode_units(units).documents
