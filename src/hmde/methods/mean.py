"""``mean``: the mean of the document's sentence vectors (the baseline hmde must beat)."""

from __future__ import annotations

from .base import DocumentMethod


class MeanMethod(DocumentMethod):
    name = "mean"
    summary = "the mean of the document's sentence vectors"
    mean_of_sentences = True

    def reuses_sentences(self) -> bool:
        return True

    def tensor_units(self, docs, langs, max_units):
        units = self.units(docs, langs)
        return [u[:max_units] for u in units] if max_units else units
