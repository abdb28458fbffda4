"""HMDE: a sentence encoder below, a shallow document transformer above.

Documents are split into sentences, every sentence of a batch of documents is
embedded by the lower encoder in one deduplicated, length-sorted pass, the upper
encoder contextualises each document's sentence vectors, and their mean is the
document vector. Queries (the CLIR protocol) go through the lower encoder alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, Union

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from ..ground.atomic import atomic_dir
from .config import HierarchicalConfig
from .document_encoder import DocumentEncoder
from ..errors import HmdeError, ModelLoadError
from .eval_mode import eval_mode
from .model_folder import (CONFIG_NAME, LOWER_DIR, MODEL_TYPE, ROUTER_CONFIG, WEIGHTS_NAME,  # noqa: F401
                           declare_float32, is_hmde_folder, load_upper_state, parse_model_config, read_model_config,
                           router_routes, write_sentence_transformers_files, write_upper)
from .registry import resolve_model_path
from ..text.segmentation import segment_document, window_ranges
from .sentence_encoder import SentenceEncoder

Document = Union[str, Sequence[str]]


@dataclass
class EncodedBatch:
    """Document vectors plus what they were made from (used by search and LAWDR)."""

    documents: torch.Tensor  # (B, H)
    units: list[list[str]]  # the lower-encoder inputs of each document
    sentences: list[torch.Tensor]  # (n_i, H) lower-encoder vectors of each document
    contextual: list[torch.Tensor] | None = None  # (n_i, H) contextualised sentence vectors, when asked for


@dataclass
class DocumentSentences:
    """One document's units and their contextualised vectors (``encode_documents(output="sentences")``).

    ``vectors[i]`` is unit i read in the context of its document (its window of
    ``max_sentences``): the upper encoder's output at its position, in the space of the
    lower encoder's query vectors; the document vector is their mean. Units outside every
    window (``long_documents="truncate"``) keep their lower-encoder vector."""

    units: list[str]
    vectors: np.ndarray  # (len(units), dim) float32


OUTPUTS = ("documents", "sentences")
UPPER_WINDOW_GROUP = 256  # windows of 32 sentences the upper encoder runs at once at inference (memory)
# a document string longer than this is segmented without keeping its units' token ids (they are
# made again group by group): ids held as Python lists cost ~1 kB a sentence, 0.5 GB for 50 MB of text
STREAM_TEXT_CHARS = 1_000_000


def _huge(document) -> bool:
    return isinstance(document, str) and len(document) > STREAM_TEXT_CHARS


def _as_langs(langs, n: int) -> list[str | None]:
    if langs is None or isinstance(langs, str):
        return [langs] * n
    langs = list(langs)
    if len(langs) != n:
        raise HmdeError(f"got {n} documents but {len(langs)} languages")
    return langs


class HierarchicalEncoder(nn.Module):
    """The hierarchical multilingual document encoder (HMDE).

    Example:
        >>> model = HierarchicalEncoder.from_sentence_encoder("sentence-transformers/LaBSE")  # doctest: +SKIP
        >>> vectors = model.encode_documents(["First sentence. Second one.", ["Already", "split"]])  # doctest: +SKIP
    """

    def __init__(self, lower: SentenceEncoder, config: HierarchicalConfig | None = None):
        super().__init__()
        self.config = config or HierarchicalConfig()
        self.lower = lower
        self.lower.max_tokens = self.config.max_sentence_tokens
        self.upper = DocumentEncoder(self.config, lower.dim)

    # -- construction -----------------------------------------------------------------
    @classmethod
    def from_sentence_encoder(
        cls,
        name_or_path: str,
        config: HierarchicalConfig | None = None,
        pooling: str | None = None,
        device: str | None = None,
        **overrides,
    ) -> "HierarchicalEncoder":
        """A new HMDE on top of a sentence encoder; the upper encoder is untrained."""
        config = (config or HierarchicalConfig()).replace(**overrides) if overrides else (config or HierarchicalConfig())
        lower = SentenceEncoder.load(name_or_path, pooling=pooling, device=device, max_tokens=config.max_sentence_tokens)
        model = cls(lower, config)
        return model.to(lower.device)

    @classmethod
    def from_pretrained(cls, name_or_path: str | os.PathLike, device: str | None = None) -> "HierarchicalEncoder":
        """Load a saved HMDE folder, a bundled model (``hmde-mini``) or a hub id.

        A folder written by ``SentenceTransformer.save`` from an hmde model (a Router whose
        document route is hmde's module) loads too."""
        path = resolve_model_path(str(name_or_path))
        if not (path / CONFIG_NAME).exists() and (path / ROUTER_CONFIG).exists():
            return cls._from_router_folder(path, device)
        meta = read_model_config(path)
        if meta.get("lower_encoder", LOWER_DIR) is None:
            raise ModelLoadError(f"'{path}' is the document module of a sentence-transformers folder: load the "
                                 "folder that holds it")
        lower = SentenceEncoder.load(str(path / meta.get("lower_encoder", LOWER_DIR)), device=device)
        return cls._assemble(lower, HierarchicalConfig.from_dict(meta["config"]), path / WEIGHTS_NAME, path)

    @classmethod
    def _from_router_folder(cls, path: Path, device: str | None) -> "HierarchicalEncoder":
        """A folder ``SentenceTransformer.save`` wrote from an hmde model: the Router's query route is
        the lower encoder, its document route hmde's module (config.json and the upper weights)."""
        from .sentence_encoder import sentence_transformer_from_entries

        query, document_id = router_routes(path)
        document = path / document_id
        config = HierarchicalConfig.from_dict(parse_model_config(document / CONFIG_NAME)["config"])
        lower = SentenceEncoder(sentence_transformer_from_entries(path, query, device, path / ROUTER_CONFIG))
        return cls._assemble(lower, config, document / WEIGHTS_NAME, path)

    @classmethod
    def _assemble(cls, lower: SentenceEncoder, config: HierarchicalConfig, weights: Path,
                  source: Path) -> "HierarchicalEncoder":
        """A loaded lower encoder (computed in float32) and the upper weights saved beside it, for inference."""
        lower.model.float()  # integer buffers (USE-m's 8-bit table) stay as they are
        model = cls(lower, config)  # sets the lower encoder's token limit from the config
        load_upper_state(model.upper, weights)
        model.source = str(source)
        return model.to(lower.device).eval()

    def save_pretrained(self, path: str | os.PathLike, dtype: torch.dtype | None = None) -> None:
        """Save as a folder: config.json, model.safetensors (upper) and lower/ (sentence-transformers).

        The folder is also a sentence-transformers folder (:mod:`hmde.st_router`): modules.json,
        router_config.json and config_sentence_transformers.json name the lower encoder's
        modules as the query route and the root as hmde's document module.
        Each part is written to a temporary file and moved into place (config.json
        last), so an interrupted save never leaves a half-written model; other files
        in the folder (logs, checkpoints) are kept. ``dtype=torch.float16``
        stores half-precision weights (loading converts back to float32).
        """
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        with atomic_dir(path / LOWER_DIR, lock=False) as lower_dir:
            if dtype is not None:
                original = {k: v.clone() for k, v in self.lower.model.state_dict().items()}
                self.lower.model.to(dtype)
                try:
                    self.lower.save(lower_dir)
                finally:
                    self.lower.model.float()
                    self.lower.model.load_state_dict(original)
                declare_float32(lower_dir)
            else:
                self.lower.save(lower_dir)
        write_sentence_transformers_files(path)
        write_upper(path, self.upper, self.config, self.lower.dim, LOWER_DIR, dtype)

    @property
    def device(self) -> torch.device:
        return self.lower.device

    @property
    def dim(self) -> int:
        return self.lower.dim

    # -- segmentation -----------------------------------------------------------------
    def segment(self, document: Document, lang: str | None = None, ids_out: list | None = None) -> list[str]:
        """The lower-encoder inputs of one document, each within the token limit.

        A string is split into sentences (or 128-token chunks); a list of strings is
        taken as already split. Over-long sentences are split or truncated according to
        ``config.long_sentences``. Empty pieces are dropped.

        ``ids_out`` receives the token ids the segmentation's length check made, for the lower encoder
        to reuse, or None per unit to tokenize. A lower encoder with a document prompt (such as
        ``passage: ``) gets None throughout: those ids are of the bare sentence, and reusing them
        embedded such documents without their prompt while ``mean`` and the queries had theirs. The
        length check still counts the bare sentence, as ``mean`` does, so a sentence that fits only
        without the prompt is cut at the token limit rather than split.
        """
        if ids_out is None or not self.lower.document_prompt:
            return segment_document(document, lang, self.config, self.lower.tokenizer, ids_out)
        units = segment_document(document, lang, self.config, self.lower.tokenizer)
        ids_out.extend([None] * len(units))
        return units

    def windows(self, n_units: int) -> list[tuple[int, int]]:
        """Sentence ranges the upper encoder sees for a document of ``n_units`` units."""
        return window_ranges(n_units, self.config.max_sentences, self.config.long_documents)

    # -- the differentiable path --------------------------------------------------------
    def encode_units(
        self,
        units: Sequence[Sequence[str]],
        sentence_batch_size: int | None = None,
        autocast_dtype: torch.dtype | None = None,
        show_progress_bar: bool = False,
        unit_ids: Sequence[Sequence[list[int] | None]] | None = None,
        with_contextual: bool = False,
        plan=None,
    ) -> EncodedBatch:
        """Document vectors for already segmented documents (gradients flow).

        ``unit_ids`` (from :meth:`segment`'s ``ids_out``) reuses the token ids of the
        segmentation's length check; units given None are tokenized here. ``with_contextual``
        also returns every unit's contextualised vector (:class:`DocumentSentences`). ``plan``: the
        flattened units' lower-encoder batches, already padded and bucketed
        (:func:`hmde.encoders.sentence_encoder.plan_batches`, e.g. by a training DataLoader worker).
        """
        if plan is not None:
            vectors = self.lower.embed_plan(plan, autocast_dtype=autocast_dtype)
        else:
            flat = [u for doc in units for u in doc]
            if unit_ids is None:
                ids = self.lower.token_ids(flat)
            else:
                ids = self._complete_ids(flat, [i for doc in unit_ids for i in doc])
            vectors = self.lower.embed_ids(
                ids, batch_size=sentence_batch_size, autocast_dtype=autocast_dtype, show_progress_bar=show_progress_bar
            )
        per_doc = list(torch.split(vectors, [len(doc) for doc in units]))
        if with_contextual:
            documents, contextual = self.contextualize(per_doc, return_sentences=True)
            return EncodedBatch(documents, [list(d) for d in units], per_doc, contextual)
        return EncodedBatch(self.contextualize(per_doc), [list(d) for d in units], per_doc)

    def _complete_ids(self, units: Sequence[str], ids: list) -> list:
        """``ids`` (one entry per unit, from segmentation) with every missing (None) or over-long entry
        tokenised now; in place, and returned."""
        todo = [k for k, i in enumerate(ids) if i is None or len(i) > self.lower.max_tokens]
        for k, i in zip(todo, self.lower.token_ids([units[k] for k in todo])):
            ids[k] = i
        return ids

    def contextualize(self, per_doc: Sequence[torch.Tensor], return_sentences: bool = False):
        """Run the upper encoder over each document's sentence vectors -> (B, H); with
        ``return_sentences`` also each document's (n_i, H) contextualised sentence vectors."""
        hidden = self.dim
        rows, owners, weights, spans = [], [], [], []
        for d, sents in enumerate(per_doc):
            for start, end in self.windows(len(sents)):
                rows.append(sents[start:end])
                owners.append(d)
                weights.append(float(end - start))
                spans.append((start, end))
        out = torch.zeros(len(per_doc), hidden, device=self.device)
        contextual = [s.float().clone() for s in per_doc] if return_sentences else None
        if not rows:
            return (out, contextual) if return_sentences else out
        parts = []
        for group in self._window_groups(len(rows)):
            group_vectors, per_position = self._upper_on_windows([rows[i] for i in group], return_sentences)
            parts.append(group_vectors)
            if return_sentences:
                self._place_windows(contextual, per_position, [(owners[i], spans[i]) for i in group])
        window_vectors = parts[0] if len(parts) == 1 else torch.cat(parts)
        window_vectors = window_vectors.float()
        w = torch.tensor(weights, device=self.device).unsqueeze(-1)
        index = torch.tensor(owners, device=self.device)
        summed = out.index_add(0, index, window_vectors * w)
        total = torch.zeros(len(per_doc), 1, device=self.device).index_add(0, index, w)
        documents = summed / total.clamp_min(1.0)
        return (documents, contextual) if return_sentences else documents

    def _window_groups(self, n_rows: int) -> list[range]:
        """The windows the upper encoder runs at once: all of them while training (one batch, as
        trained), else at most :data:`UPPER_WINDOW_GROUP`, so a huge document's activations are bounded
        by the group, not by its length. Batches of ordinary documents stay one group (same vectors)."""
        if torch.is_grad_enabled() or n_rows <= UPPER_WINDOW_GROUP:
            return [range(n_rows)]
        return [range(s, min(s + UPPER_WINDOW_GROUP, n_rows)) for s in range(0, n_rows, UPPER_WINDOW_GROUP)]

    def _upper_on_windows(self, rows: list[torch.Tensor], return_sentences: bool):
        """The upper encoder on windows of sentence vectors, padded to the longest: (window vectors,
        per-position vectors or None)."""
        hidden = self.dim
        length = max(r.shape[0] for r in rows)
        padded = torch.zeros(len(rows), length, hidden, device=self.device, dtype=rows[0].dtype)
        mask = torch.zeros(len(rows), length, dtype=torch.bool, device=self.device)
        for i, r in enumerate(rows):
            padded[i, : r.shape[0]] = r
            mask[i, : r.shape[0]] = True
        if return_sentences:
            return self.upper(padded, mask, return_sentences=True)
        return self.upper(padded, mask), None

    @staticmethod
    def _place_windows(contextual: list[torch.Tensor], per_position: torch.Tensor,
                       places: list[tuple[int, tuple[int, int]]]) -> None:
        """Each window's contextualised vectors into its document's rows (each unit lies in one
        window). Without gradients in place: a document of n units costs O(n), not O(n x windows)."""
        for k, (d, (start, end)) in enumerate(places):
            window = per_position[k, : end - start].float()
            if torch.is_grad_enabled():
                contextual[d] = torch.cat([contextual[d][:start], window, contextual[d][end:]])
            else:
                contextual[d][start:end] = window

    def forward(self, units: Sequence[Sequence[str]], **kwargs) -> torch.Tensor:
        return self.encode_units(units, **kwargs).documents

    # -- inference ----------------------------------------------------------------------
    @torch.inference_mode()
    def encode_documents(
        self,
        docs: Sequence[Document],
        langs: str | Sequence[str | None] | None = None,
        batch_size: int = 32,
        show_progress_bar: bool = False,
        normalize_embeddings: bool = False,
        sentence_batch_size: int | None = None,
        autocast_dtype: torch.dtype | None = None,
        return_sentences: bool = False,
        output: str = "documents",
    ):
        """Document vectors as a float32 array of shape (len(docs), dim), in input order.

        ``batch_size`` documents are segmented and all their sentences embedded together.
        A document with no text gets an all-zero vector. With ``return_sentences`` the
        units and lower-encoder vectors of each document are returned as well.
        ``output="sentences"`` returns instead one :class:`DocumentSentences` per document:
        its units and their contextualised vectors (``normalize_embeddings`` normalises each).
        """
        if isinstance(docs, str):
            raise HmdeError("encode_documents takes a list of documents, not one string")
        if output not in OUTPUTS:
            raise HmdeError(f"output must be one of {OUTPUTS}, got {output!r}")
        if output == "sentences":
            return self.encode_with_contextual(docs, langs, batch_size, show_progress_bar, normalize_embeddings,
                                               sentence_batch_size, autocast_dtype)[1]
        vectors, all_units, all_sents = [], [], []
        for enc in self._encoded_chunks(docs, langs, batch_size, show_progress_bar, sentence_batch_size,
                                        autocast_dtype, with_contextual=False, stream=not return_sentences):
            vectors.append(enc.documents.float().cpu())
            if return_sentences:
                all_units.extend(enc.units)
                all_sents.extend(s.float().cpu().numpy() for s in enc.sentences)
        out = torch.cat(vectors) if vectors else torch.zeros(0, self.dim)
        if normalize_embeddings:
            out = torch.nn.functional.normalize(out, dim=-1)
        array = out.numpy().astype(np.float32)
        if return_sentences:
            return array, all_units, all_sents
        return array

    def _encoded_chunks(self, docs, langs, batch_size, show_progress_bar, sentence_batch_size, autocast_dtype,
                        with_contextual: bool, stream: bool = False):
        """``batch_size`` documents at a time: segmented, all their sentences embedded together, in eval mode.
        ``stream`` (document vectors only): a document of more units than one group of windows is
        encoded group by group (:meth:`_encode_streamed`), so memory is bounded by the group."""
        langs_ = _as_langs(langs, len(docs))
        with eval_mode(self):
            steps = range(0, len(docs), max(1, batch_size))
            for start in tqdm(steps, desc="documents", unit="batch", disable=not show_progress_bar):
                chunk = docs[start : start + batch_size]
                ids: list[list] = [[] for _ in chunk]
                units = [self.segment(d, l, ids_out=None if stream and _huge(d) else i)
                         for d, l, i in zip(chunk, langs_[start : start + batch_size], ids)]
                ids = [i if len(i) == len(u) else [None] * len(u) for i, u in zip(ids, units)]  # None: tokenise later
                long = [k for k, u in enumerate(units) if stream and len(u) > self._stream_units()]
                if not long:
                    yield self.encode_units(units, sentence_batch_size=sentence_batch_size,
                                            autocast_dtype=autocast_dtype, unit_ids=ids, with_contextual=with_contextual)
                    continue
                vectors = torch.zeros(len(chunk), self.dim, device=self.device)
                short = [k for k in range(len(chunk)) if k not in long]
                if short:
                    vectors[short] = self.encode_units([units[k] for k in short], sentence_batch_size=sentence_batch_size,
                                                       autocast_dtype=autocast_dtype,
                                                       unit_ids=[ids[k] for k in short]).documents.float()
                for k in long:
                    vectors[k] = self._encode_streamed(units[k], ids[k], sentence_batch_size, autocast_dtype)
                yield EncodedBatch(vectors, [list(u) for u in units], [])

    def _stream_units(self) -> int:
        return UPPER_WINDOW_GROUP * self.config.max_sentences

    def _encode_streamed(self, units: Sequence[str], ids: list, sentence_batch_size, autocast_dtype) -> torch.Tensor:
        """One long document's vector, :data:`UPPER_WINDOW_GROUP` windows at a time: their units
        tokenised (where ``ids`` holds None) and embedded, the upper encoder run on them, their
        weighted window vectors summed; nothing of a finished group is kept. The same vector as
        :meth:`contextualize` up to float summation order (the lower encoder batches other sentences)."""
        windows = self.windows(len(units))
        summed = torch.zeros(self.dim, device=self.device)
        total = 0.0
        for g in range(0, len(windows), UPPER_WINDOW_GROUP):
            group = windows[g : g + UPPER_WINDOW_GROUP]
            first, last = group[0][0], group[-1][1]
            group_ids = self._complete_ids(units[first:last], ids[first:last])
            vectors = self.lower.embed_ids(group_ids, batch_size=sentence_batch_size, autocast_dtype=autocast_dtype)
            window_vectors, _ = self._upper_on_windows([vectors[s - first : e - first] for s, e in group], False)
            weights = torch.tensor([float(e - s) for s, e in group], device=self.device).unsqueeze(-1)
            summed += (window_vectors.float() * weights).sum(0)
            total += float(weights.sum())
        return summed / max(total, 1.0)

    @torch.inference_mode()
    def encode_with_contextual(self, docs, langs=None, batch_size: int = 32, show_progress_bar: bool = False,
                               normalize_embeddings: bool = False, sentence_batch_size: int | None = None,
                               autocast_dtype: torch.dtype | None = None):
        """(document vectors, one :class:`DocumentSentences` per document) from one pass: what a
        multi-vector index stores. ``normalize_embeddings`` normalises the sentence vectors only."""
        documents, out = [], []
        for enc in self._encoded_chunks(docs, langs, batch_size, show_progress_bar, sentence_batch_size,
                                        autocast_dtype, with_contextual=True):
            documents.append(enc.documents.float().cpu())
            for u, v in zip(enc.units, enc.contextual):
                v = torch.nn.functional.normalize(v, dim=-1) if normalize_embeddings else v
                out.append(DocumentSentences(u, v.float().cpu().numpy().astype(np.float32)))
        vectors = torch.cat(documents).numpy().astype(np.float32) if documents else np.zeros((0, self.dim), np.float32)
        return vectors, out

    def encode_queries(
        self,
        texts: Sequence[str],
        batch_size: int = 64,
        show_progress_bar: bool = False,
        normalize_embeddings: bool = False,
        autocast_dtype: torch.dtype | None = None,
    ) -> np.ndarray:
        """Query vectors from the lower encoder alone (the paper's CLIR protocol).

        Queries are truncated to ``config.max_sentence_tokens`` tokens.
        """
        if isinstance(texts, str):
            raise HmdeError("encode_queries takes a list of texts, not one string")
        return self.lower.encode(
            texts,
            batch_size=batch_size,
            show_progress_bar=show_progress_bar,
            normalize_embeddings=normalize_embeddings,
            autocast_dtype=autocast_dtype,
            prompt_name="query",
        )
