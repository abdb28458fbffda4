"""Ways of turning one sentence encoder into a document encoder, side by side.

``hmde``  the hierarchical model (needs a trained upper encoder);
``first`` the sentence encoder on the first 128 tokens (the paper's "LaBSE" row);
``seg``   128-token windows overlapping by a third, vectors averaged ("LaBSE-Seg");
``mean``  the mean of the document's sentence vectors;
``lawdr`` LAWDR's weighted sum of language-cleaned sentence vectors (:mod:`hmde.lawdr`);
``longformer`` the whole document (up to 4,096 tokens) through a converted Longformer
           (:mod:`hmde.longformer`), global attention on the first token.

All of them use the same lower encoder, segmentation and token limit, so that a
comparison measures the method and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from .config import DOCUMENT_METHODS, HierarchicalConfig
from .errors import HmdeError
from .eval_mode import eval_mode
from .hierarchical import HierarchicalEncoder, _as_langs
from .lawdr import LawdrStats, fit_lawdr
from .segmentation import token_windows
from .sentence_encoder import SentenceEncoder
from .similarity import normalize

METHODS = DOCUMENT_METHODS


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
        """Keyword arguments of :func:`hmde.lawdr.fit_lawdr` these options select."""
        return {"m": self.lawdr_m, "m_selection": self.lawdr_m_selection, "kde": self.lawdr_kde}


def as_hierarchical(model: HierarchicalEncoder | SentenceEncoder) -> HierarchicalEncoder:
    """A sentence encoder gets an (untrained) upper encoder, used only for its segmentation."""
    if isinstance(model, HierarchicalEncoder):
        return model
    overrides = getattr(model, "length_overrides", None)  # set by hmde.length_settings
    return HierarchicalEncoder(model, HierarchicalConfig().replace(**overrides) if overrides else None)


def flat_text(doc) -> str:
    """A document as one string: a list of sentences is joined with spaces."""
    return doc if isinstance(doc, str) else " ".join(s for s in doc if isinstance(s, str))


def encode_query_texts(model: HierarchicalEncoder | SentenceEncoder, texts: Sequence, batch_size: int | None = None,
                       normalize_embeddings: bool = False, autocast_dtype: torch.dtype | None = None,
                       show_progress_bar: bool = False) -> np.ndarray:
    """CLIR queries: each text through the lower encoder alone (a list of sentences is joined).

    Empty texts get all-zero rows, as empty documents do, so rows and ids always line up.
    """
    from .io.documents import is_empty_text

    lower = model.lower if isinstance(model, HierarchicalEncoder) else model
    vectors = lower.encode([flat_text(t) for t in texts], batch_size=batch_size, show_progress_bar=show_progress_bar,
                           normalize_embeddings=normalize_embeddings, autocast_dtype=autocast_dtype,
                           prompt_name="query")
    vectors[[i for i, t in enumerate(texts) if is_empty_text(t)]] = 0.0
    return vectors


def pack_sentences(units: Sequence[str], tokenizer, max_tokens: int) -> list[str]:
    """Join consecutive sentences while they fit ``max_tokens`` (LAWDR's multi-sentence input)."""
    if not units:
        return []
    budget = max_tokens - tokenizer.num_special_tokens_to_add(pair=False)
    lengths = [len(x) for x in tokenizer(list(units), add_special_tokens=False)["input_ids"]]
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


class DocumentVectorizer:
    """Document vectors by one of :data:`METHODS` on ``model``'s lower encoder."""

    def __init__(self, model: HierarchicalEncoder | SentenceEncoder, method: str,
                 options: MethodOptions | None = None, lawdr_stats: LawdrStats | None = None):
        if method not in METHODS:
            raise HmdeError(f"unknown method '{method}' (choose from {', '.join(METHODS)})")
        self.longformer = None
        if method == "longformer":
            from .longformer import LongformerEncoder

            lower = model.lower if isinstance(model, HierarchicalEncoder) else model
            self.longformer = LongformerEncoder(lower.model)
        if method == "hmde" and not isinstance(model, HierarchicalEncoder):
            raise HmdeError("--method hmde needs a saved hmde model; this is a sentence encoder "
                            "(use first, seg, mean or lawdr)")
        self.model = as_hierarchical(model)
        self.method = method
        self.options = options or MethodOptions()
        self.lawdr_stats = lawdr_stats

    @property
    def lower(self) -> SentenceEncoder:
        return self.model.lower

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
        if self.method == "first":
            return [[t] if (t := flat_text(d).strip()) else [] for d in docs]
        if self.method == "seg":
            tok = self.lower.tokenizer
            budget = self.model.config.max_sentence_tokens - tok.num_special_tokens_to_add(pair=False)
            stride = max(1, budget - int(round(budget * self.options.seg_overlap)))
            return [token_windows(flat_text(d), tok, budget, stride) for d in docs]
        units = [self.model.segment(d, lang) for d, lang in zip(docs, langs)]
        if self.method == "lawdr" and self.options.lawdr_units == "packed":
            units = [pack_sentences(u, self.lower.tokenizer, self.model.config.max_sentence_tokens) for u in units]
        return units

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
        self.lawdr_stats = fit_lawdr(self.sentence_vectors(docs, langs), _as_langs(langs, len(docs)),
                                     **self.options.lawdr_fit_options())
        return self.lawdr_stats

    def encode(self, docs: Sequence, langs=None, normalize_embeddings: bool = False) -> np.ndarray:
        """(len(docs), dim) float32; an empty document gives a zero row."""
        if isinstance(docs, str):
            raise HmdeError("encode takes a list of documents, not one string")
        o = self.options
        if self.method == "hmde":
            vectors = self.model.encode_documents(docs, langs=langs, batch_size=o.batch_size,
                                                  sentence_batch_size=o.sentence_batch_size,
                                                  autocast_dtype=o.autocast_dtype,
                                                  show_progress_bar=o.show_progress_bar)
        elif self.method == "longformer":
            vectors = self.longformer.encode(list(docs)) if len(docs) else np.zeros((0, self.lower.dim), np.float32)
        else:
            langs_ = _as_langs(langs, len(docs))
            vectors = self._combine(self.sentence_vectors(docs, langs_), langs_)
        vectors = np.asarray(vectors, dtype=np.float32)
        return normalize(vectors) if normalize_embeddings else vectors

    def _combine(self, per_doc: list[np.ndarray], langs: Sequence[str | None]) -> np.ndarray:
        """Document vectors from per-document unit vectors: LAWDR's weighted sum, else the mean."""
        if self.method == "lawdr":
            if self.lawdr_stats is None:
                self.lawdr_stats = fit_lawdr(per_doc, list(langs), **self.options.lawdr_fit_options())
            return self.lawdr_stats.document_vectors(per_doc, langs)
        if not per_doc:
            return np.zeros((0, self.lower.dim), np.float32)
        return np.stack([v.mean(0) if len(v) else np.zeros(self.lower.dim, np.float32) for v in per_doc])

    def trainable(self) -> list[torch.nn.Parameter]:
        """What fine-tuning this method updates: the whole hierarchical model for ``hmde``, else
        the lower encoder (or the Longformer) whose vectors the method combines."""
        if self.method == "hmde":
            return list(self.model.parameters())
        if self.method == "longformer":
            return list(self.longformer.model.parameters())
        if self.method == "lawdr":
            raise HmdeError("LAWDR's statistics are fitted, not trained: fine-tune first, seg, mean, longformer "
                            "or hmde, or evaluate lawdr with --protocol frozen")
        return list(self.lower.parameters())

    def document_tensor(self, docs: Sequence, langs=None, max_units: int | None = None) -> torch.Tensor:
        """Document vectors with gradients, for fine-tuning (the paper's softmax-head protocol).

        ``hmde``: the hierarchical model on the documents' units (the first ``max_units``
        when given); ``first``/``seg``/``mean``: the lower encoder on the method's units,
        averaged per document; ``longformer``: the Longformer on the whole document."""
        langs_ = _as_langs(langs, len(docs))
        if self.method == "longformer":
            return self.longformer.forward(list(docs))
        if self.method == "hmde":
            units = [self.model.segment(d, lang) for d, lang in zip(docs, langs_)]
            units = [u[:max_units] for u in units] if max_units else units
            return self.model.encode_units(units).documents
        self.trainable()  # refuses lawdr
        units = self.units(docs, langs_)
        units = [u[:max_units] for u in units] if max_units and self.method == "mean" else units
        flat = [u for doc in units for u in doc]
        vectors = self.lower.embed(flat, batch_size=self.options.sentence_batch_size) if flat else None
        out, start = [], 0
        for doc in units:
            if doc:
                out.append(vectors[start:start + len(doc)].mean(0))
            else:
                out.append(torch.zeros(self.lower.dim, device=self.lower.device))
            start += len(doc)
        return torch.stack(out)

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
        o = self.options
        langs_ = _as_langs(langs, len(docs))
        if contextual:
            if self.method != "hmde":
                raise HmdeError(f"contextualised sentence vectors come from the hierarchical model (method hmde), "
                                f"not {self.method}")
            vectors, encoded = self.model.encode_with_contextual(
                docs, langs_, batch_size=o.batch_size, sentence_batch_size=o.sentence_batch_size,
                autocast_dtype=o.autocast_dtype, show_progress_bar=o.show_progress_bar)
            return vectors, [e.units for e in encoded], [e.vectors for e in encoded]
        if self.method == "hmde":
            return self.model.encode_documents(docs, langs=langs_, batch_size=o.batch_size,
                                               sentence_batch_size=o.sentence_batch_size,
                                               autocast_dtype=o.autocast_dtype,
                                               show_progress_bar=o.show_progress_bar, return_sentences=True)
        units, sents = self.sentences(docs, langs_)
        if self.method == "mean" or (self.method == "lawdr" and o.lawdr_units == "sentences"):
            vectors = self._combine(sents, langs_)
        else:  # first, seg, longformer and packed LAWDR embed other units
            vectors = self.encode(docs, langs_)
        return np.asarray(vectors, dtype=np.float32), units, sents
