"""``lawdr``: LAWDR's document vectors (:mod:`hmde.methods.lawdr_statistics`): each language's dominant directions
removed, sentences weighted by inverse density. Unsupervised: its statistics are fitted on the
collection it embeds (or loaded), never trained."""

from __future__ import annotations

from typing import Sequence

from ..errors import HmdeError
from .base import DocumentMethod


def pack_sentences(units: Sequence[str], tokenizer, max_tokens: int) -> list[str]:
    """Join consecutive sentences while they fit ``max_tokens`` (LAWDR's multi-sentence input)."""
    if not units:
        return []
    budget = max_tokens - tokenizer.num_special_tokens_to_add(pair=False)
    lengths = [len(x) for x in tokenizer(list(units), add_special_tokens=False, verbose=False)["input_ids"]]
    packed, current, used = [], [], 0
    for unit, n in zip(units, lengths):
        if current and used + n > budget:
            packed.append(" ".join(current))
            current, used = [], 0
        current.append(unit)
        used += n
    if current:
        packed.append(" ".join(current))
    return packed


class LawdrMethod(DocumentMethod):
    name = "lawdr"
    summary = "LAWDR: language directions removed, sentences weighted by inverse density"
    fitted = True
    fine_tunable = False

    def units(self, docs, langs):
        units = super().units(docs, langs)
        if self.options.lawdr_units == "packed":
            units = [pack_sentences(u, self.lower.tokenizer, self.model.config.max_sentence_tokens) for u in units]
        return units

    def combine(self, per_doc, langs):
        v = self.vectorizer
        if v.lawdr_stats is None:
            v.fit_lawdr_vectors(per_doc, langs)
        return v.lawdr_stats.document_vectors(per_doc, langs)

    def reuses_sentences(self) -> bool:
        return self.options.lawdr_units == "sentences"

    def trainable(self):
        raise HmdeError("LAWDR's statistics are fitted, not trained: fine-tune first, seg, mean, longformer "
                        "or hmde, or evaluate lawdr with --protocol frozen")

    def document_tensor(self, docs, langs, max_units):
        self.trainable()  # refuses
