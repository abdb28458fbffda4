"""One object that encodes documents and queries for every protocol, with caching.

Protocols encode the same collection several times (every language pair of PUD or
XQuAD contains English); vectors are cached by (language, content). For LAWDR the
statistics must exist before the first document vector: :meth:`prepare` fits them on
everything the protocol will encode (LAWDR is unsupervised and fitted on the corpus it
embeds, as in its paper), unless saved statistics were given.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..methods.lawdr_statistics import LawdrStats
from ..methods.vectorizer import DocumentVectorizer, MethodOptions

if TYPE_CHECKING:
    from ..index.multivector import SentenceMatrix


def _key(texts: Sequence, lang) -> str:
    h = hashlib.sha256(str(lang).encode())
    for t in texts:
        h.update(b"\x00" + (t if isinstance(t, str) else "\x01".join(t)).encode())
    return h.hexdigest()


class EvalEncoder:
    def __init__(self, model, method: str, options: MethodOptions | None = None, lawdr_stats: LawdrStats | None = None):
        self.vectorizer = DocumentVectorizer(model, method, options, lawdr_stats)
        self.method = method
        self._docs: dict[str, np.ndarray] = {}
        self._sents: dict[str, list[np.ndarray]] = {}
        self._matrices: dict[tuple[str, str], "SentenceMatrix"] = {}

    @property
    def model(self):
        return self.vectorizer.model

    def prepare(self, collections: Sequence[tuple[Sequence, str | None]]) -> None:
        """Fit LAWDR on all given collections (no-op for other methods or given statistics)."""
        if not self.vectorizer.document_method.fitted or self.vectorizer.lawdr_stats is not None:
            return
        per_doc, langs = [], []
        for texts, lang in collections:
            key = _key(texts, lang)
            if key not in self._sents:
                self._sents[key] = self.vectorizer.sentence_vectors(list(texts), [lang] * len(texts))
            per_doc.extend(self._sents[key])
            langs.extend([lang] * len(texts))
        self.vectorizer.fit_lawdr_vectors(per_doc, langs)

    def documents(self, texts: Sequence, lang: str | None) -> np.ndarray:
        key = _key(texts, lang)
        if key not in self._docs:
            if self.vectorizer.document_method.fitted:
                if self.vectorizer.lawdr_stats is None:
                    self.prepare([(texts, lang)])
                sents = self._sents.pop(key, None) or self.vectorizer.sentence_vectors(list(texts), [lang] * len(texts))
                self._docs[key] = self.vectorizer.lawdr_stats.document_vectors(sents, [lang] * len(texts))
            else:
                self._docs[key] = self.vectorizer.encode(list(texts), [lang] * len(texts))
        return self._docs[key]

    def queries(self, texts: Sequence[str], lang: str | None = None) -> np.ndarray:
        """Queries and sentences go through the lower encoder alone (the CLIR protocol)."""
        o = self.vectorizer.options
        return self.model.lower.encode(list(texts), batch_size=o.sentence_batch_size, autocast_dtype=o.autocast_dtype,
                                       prompt_name="query")

    def sentence_matrix(self, texts: Sequence, lang: str | None, kind: str):
        """Every document's sentence vectors for multi-vector scoring (:mod:`hmde.index.multivector`):
        ``context``, HMDE's contextualised vectors; ``lower``, the lower encoder's, out of context."""
        from ..errors import HmdeError
        from ..index.multivector import SentenceMatrix

        key = (_key(texts, lang), kind)
        if key not in self._matrices:
            if kind == "context":
                method = self.vectorizer.document_method
                if not method.contextual:
                    raise HmdeError("contextualised sentence vectors need an hmde model (method hmde)")
                # one pass gives the document vectors too, with documents()'s own batching: kept for --doc-weight
                vectors, encoded = method.encode_with_contextual(list(texts), lang)
                self._docs.setdefault(key[0], vectors)
                per_doc = [e.vectors for e in encoded]
            elif kind == "lower":
                per_doc = self.vectorizer.sentences(list(texts), [lang] * len(texts))[1]
            else:
                raise HmdeError(f"unknown sentence vectors '{kind}' (context or lower)")
            self._matrices[key] = SentenceMatrix.from_documents(per_doc)
        return self._matrices[key]
