"""Embed documents for an index: document vectors by any method, plus sentence vectors for snippets."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..io.documents import DocumentRecord
from ..methods import DocumentVectorizer, MethodOptions


def embed_for_index(model, records: Sequence[DocumentRecord], method: str, options: MethodOptions | None = None,
                    lawdr_stats=None) -> tuple[np.ndarray, list[list[str]], list[np.ndarray]]:
    """(document vectors, sentences per document, their lower-encoder vectors)."""
    vectorizer = DocumentVectorizer(model, method, options, lawdr_stats)
    texts = [r.text for r in records]
    langs = [r.lang for r in records]
    o = vectorizer.options
    if method == "hmde":
        docs, units, sents = vectorizer.model.encode_documents(
            texts, langs=langs, batch_size=o.batch_size, sentence_batch_size=o.sentence_batch_size,
            autocast_dtype=o.autocast_dtype, show_progress_bar=o.show_progress_bar, return_sentences=True)
        return docs, units, sents
    units = [vectorizer.model.segment(t, lang) for t, lang in zip(texts, langs)]
    sents = vectorizer._grouped(units)
    return vectorizer.encode(texts, langs), units, sents
