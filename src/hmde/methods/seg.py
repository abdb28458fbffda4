"""``seg``: token windows of the sentence encoder's length overlapping by a third, their vectors
averaged (the paper's "LaBSE-Seg")."""

from __future__ import annotations

from ..text.segmentation import token_windows
from .base import DocumentMethod, flat_text


class SegMethod(DocumentMethod):
    name = "seg"
    summary = "overlapping token windows, their vectors averaged"

    def units(self, docs, langs):
        tok = self.lower.tokenizer
        budget = self.model.config.max_sentence_tokens - tok.num_special_tokens_to_add(pair=False)
        stride = max(1, budget - int(round(budget * self.options.seg_overlap)))
        return [token_windows(flat_text(d), tok, budget, stride) for d in docs]
