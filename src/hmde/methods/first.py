"""``first``: the sentence encoder on the document's beginning, cut at its token limit (the
paper's vanilla "LaBSE" row: 128 tokens)."""

from __future__ import annotations

from .base import DocumentMethod, flat_text


class FirstMethod(DocumentMethod):
    name = "first"
    summary = "the sentence encoder on the first segment (its token limit)"

    def units(self, docs, langs):
        return [[t] if (t := flat_text(d).strip()) else [] for d in docs]
