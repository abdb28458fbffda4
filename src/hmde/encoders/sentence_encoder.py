"""The lower encoder: any sentence encoder, kept in sentence-transformers form.

A :class:`SentenceEncoder` holds a ``SentenceTransformer`` so that a folder's own
pooling and heads are applied exactly as sentence-transformers applies them (for
LaBSE: CLS -> Dense(768, tanh) -> Normalize, the paper's "transformed BOS
representation"). A plain Hugging Face encoder gets a pooling layer (``mean`` unless
told otherwise). Embedding is done here on token ids, so that all sentences of many
documents can be deduplicated, sorted by length and packed into batches by a token
budget, with or without gradients.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from .cls_last_layer import forward_cls_last_layer, supports_cls_last_layer
from .unnormalized import without_final_normalize
from .eval_mode import eval_mode
from .precision import POLICY_VARIABLE, autocast_context, cast_copy, low_precision_forced, low_precision_is_faster
from ..errors import ModelLoadError, unreachable_model_message

logger = logging.getLogger(__name__)

POOLING_MODES = ("mean", "cls", "max", "lasttoken")


def _st_modules():
    """sentence-transformers' module classes (their import path moved in v6)."""
    try:
        from sentence_transformers.sentence_transformer import modules as m  # v6+
    except ImportError:  # pragma: no cover - older releases
        from sentence_transformers import models as m
    return m


def hmde_module_classes() -> dict[str, type]:
    """The modules.json types that hmde itself provides (loaded without ``trust_remote_code``)."""
    from ..e5.module import MODULE_TYPE as E5_TYPE
    from ..e5.module import E5Transformer
    from ..usem.module import MODULE_TYPE, UseMultilingual

    return {MODULE_TYPE: UseMultilingual, E5_TYPE: E5Transformer}


def sentence_transformer_from_entries(path: Path, entries: list, device: str | None, entries_path: Path | None = None):
    """A folder whose modules.json (``entries_path``) names hmde's own modules (e.g. USE-m), built module by module.

    sentence-transformers >= 6 imports classes outside its own namespace only with
    ``trust_remote_code=True``, which would also run any code a foreign folder names.
    Here only hmde's classes and sentence-transformers' own are accepted.
    """
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.util import import_from_string

    entries_path = entries_path or path / "modules.json"
    known = hmde_module_classes()
    modules = []
    for i, entry in enumerate(entries):
        kind = entry.get("type", "") if isinstance(entry, dict) else ""
        if kind in known:
            cls = known[kind]
        elif kind.startswith("sentence_transformers."):
            cls = import_from_string(kind)
        else:
            raise ModelLoadError(f"{entries_path}, entry {i}: module type {kind!r} is neither hmde's nor "
                                 "sentence-transformers'; hmde does not import other code from a model folder")
        modules.append(cls.load(str(path), subfolder=entry.get("path", "")))
    return SentenceTransformer(modules=modules, device=device, **saved_prompts(path))


def saved_prompts(path: Path) -> dict:
    """The prompts and default prompt name a folder's config_sentence_transformers.json records (e5's
    ``query: `` / ``passage: ``), which a model built from its modules would otherwise lose: a trained
    hmde-e5 embedded its documents without ``passage: `` until this was read."""
    config_path = path / "config_sentence_transformers.json"
    if not config_path.exists():
        return {}
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelLoadError(f"{config_path}: not readable JSON ({exc})") from exc
    prompts = config.get("prompts") if isinstance(config, dict) else None
    if prompts is None:
        return {}
    if not isinstance(prompts, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in prompts.items()):
        raise ModelLoadError(f"{config_path}: field 'prompts' must map names to strings")
    default = config.get("default_prompt_name")
    if default is not None and default not in prompts:
        raise ModelLoadError(f"{config_path}: field 'default_prompt_name' is {default!r}, not one of its prompts")
    return {"prompts": prompts, "default_prompt_name": default}


def _hmde_module_entries(path: Path) -> list | None:
    """modules.json's entries when it names one of hmde's own modules, else None (read once)."""
    entries_path = path / "modules.json"
    try:
        text = entries_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if not any(kind in text for kind in hmde_module_classes()):
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelLoadError(f"{entries_path}: invalid JSON ({exc})") from exc


def load_failure_message(folder: Path, exc: Exception) -> str:
    """One line for a local folder that would not load. A pickled checkpoint that torch's weights-only
    loader refuses is named as refused, with the way to a safetensors file, instead of torch's
    advice to retry with ``weights_only=False`` (which would run whatever the file holds)."""
    import pickle

    text = str(exc).strip()
    if isinstance(exc, pickle.UnpicklingError) or "Weights only load failed" in text:
        return (f"{folder}: its pytorch_model.bin holds Python objects besides tensors; hmde never unpickles those "
                "(they can run code). If you trust its source, convert it to model.safetensors (transformers: "
                "AutoModel.from_pretrained(DIR).save_pretrained(DIR, safe_serialization=True)) and remove the .bin")
    first = text.splitlines()[0] if text else ""
    if isinstance(exc, KeyError):
        first = f"unknown value {first} in its config.json"
    return f"cannot load the sentence encoder in '{folder}': {first or type(exc).__name__}"


def load_sentence_transformer(name_or_path: str, pooling: str | None = None, device: str | None = None):
    """Load a sentence encoder from a hub id, a local folder or a name hmde bundles.

    A folder with ``modules.json`` is loaded with all its modules (hmde's own, such as
    USE-m, included). A plain Hugging Face model (``config.json`` only) gets a pooling
    layer: ``pooling`` or ``mean``.
    """
    from sentence_transformers import SentenceTransformer

    from .registry import bundled_folder, refuse_near_miss

    path = Path(name_or_path)
    if not path.is_dir() and (bundled := bundled_folder(str(name_or_path))) is not None:
        path = bundled
    is_local = path.is_dir()
    if not is_local:
        refuse_near_miss(str(name_or_path))
    if not is_local and (path.exists() or str(name_or_path).startswith((".", "/", "~"))):
        raise ModelLoadError(f"model folder '{name_or_path}' does not exist or is not a folder")
    if pooling is not None and pooling not in POOLING_MODES:
        raise ModelLoadError(f"unknown pooling '{pooling}'; choose one of {POOLING_MODES}")
    try:
        if is_local and (entries := _hmde_module_entries(path)) is not None:
            model = sentence_transformer_from_entries(path, entries, device)
            if pooling is not None:
                logger.warning("pooling=%r ignored: '%s' defines its own pooling in modules.json", pooling, name_or_path)
            return model
        if is_local and not (path / "modules.json").exists():
            if not (path / "config.json").exists():
                raise ModelLoadError(
                    f"'{name_or_path}' is neither a sentence-transformers folder (modules.json) "
                    "nor a Hugging Face model folder (config.json)"
                )
            m = _st_modules()
            transformer = m.Transformer(str(path))
            pool = m.Pooling(transformer.get_embedding_dimension(), pooling_mode=pooling or "mean")
            return SentenceTransformer(modules=[transformer, pool], device=device)
        # float32 weights, as hmde computes (bf16 is autocast); loading an fp16 folder as saved would
        # also make sentence-transformers warn that CPU inference in float16 is slow
        model = SentenceTransformer(str(path if is_local else name_or_path), device=device,
                                    model_kwargs={"dtype": torch.float32})
    except ModelLoadError:
        raise
    except Exception as exc:  # noqa: BLE001 - transformers reports a bad config.json as TypeError, KeyError, ...
        if is_local:
            raise ModelLoadError(load_failure_message(path, exc)) from exc
        raise ModelLoadError(unreachable_model_message(str(name_or_path))) from exc
    if pooling is not None:
        logger.warning("pooling=%r ignored: '%s' defines its own pooling in modules.json", pooling, name_or_path)
    return model


@dataclass(frozen=True)
class Padding:
    pad_id: int
    left: bool
    token_types: bool


def pad_ids(batch: Sequence[Sequence[int]], padding: Padding) -> dict[str, torch.Tensor]:
    """Token id lists -> padded ``input_ids``/``attention_mask`` (and zero ``token_type_ids``) on the CPU."""
    length = max(len(x) for x in batch)
    ids = torch.full((len(batch), length), padding.pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), length), dtype=torch.long)
    for i, x in enumerate(batch):
        span = slice(length - len(x), length) if padding.left else slice(0, len(x))
        ids[i, span] = torch.as_tensor(x, dtype=torch.long)
        mask[i, span] = 1
    features = {"input_ids": ids, "attention_mask": mask}
    if padding.token_types:
        features["token_type_ids"] = torch.zeros_like(ids)
    return features


@dataclass
class BatchPlan:
    """Padded lower-encoder batches for a list of inputs, and how to put their outputs back in order."""

    batches: list[dict[str, torch.Tensor]]
    gather: torch.Tensor  # row of the concatenated outputs for each input, in input order

    def pin_memory(self) -> "BatchPlan":
        return BatchPlan([{k: v.pin_memory() for k, v in b.items()} for b in self.batches], self.gather)


def plan_batches(ids: Sequence[Sequence[int]], token_budget: int, padding: Padding) -> BatchPlan:
    """Length bucketing: identical inputs once, sorted by length (longest first) and packed into
    batches of at most ``token_budget`` padded tokens, so short sentences share batches and padding
    stays minimal. Pure CPU work on token ids: DataLoader workers run it ahead of the step."""
    unique: dict[tuple[int, ...], int] = {}
    inverse = [unique.setdefault(tuple(x), len(unique)) for x in ids]
    keys = list(unique)
    order = sorted(range(len(keys)), key=lambda i: -len(keys[i]))
    groups: list[list[int]] = []
    current: list[int] = []
    for i in order:
        longest = len(keys[current[0]]) if current else len(keys[i])
        if current and (len(current) + 1) * longest > max(1, token_budget):
            groups.append(current)
            current = []
        current.append(i)
    if current:
        groups.append(current)
    position = torch.empty(len(keys), dtype=torch.long)
    if groups:
        position[torch.tensor([i for g in groups for i in g])] = torch.arange(len(keys))
    return BatchPlan([pad_ids([keys[i] for i in g], padding) for g in groups],
                     position[torch.tensor(inverse, dtype=torch.long)] if inverse else torch.zeros(0, dtype=torch.long))


CPU_BATCH_SIZE = 8  # default token budgets of embed_ids, in sentences of max_tokens (see default_batch_size)
GPU_BATCH_SIZE = 64
ALONE_LIMIT = 64  # queries of one bf16 call embedded one at a time at most (the model thread's and the server's batch)


class SentenceEncoder(nn.Module):
    """Embeds sentences with a sentence-transformers model, fast and differentiably.

    Args:
        model: a loaded ``SentenceTransformer``.
        max_tokens: token limit per input, special tokens included (paper: 128).
    """

    def __init__(self, model, max_tokens: int = 128):
        super().__init__()
        self.model = model
        self.max_tokens = max_tokens
        self.cls_last_layer = supports_cls_last_layer(model, model.tokenizer)  # see hmde.encoders.cls_last_layer

    def forward_features(self, features: dict[str, torch.Tensor], model=None, normalized: bool = True) -> torch.Tensor:
        """Sentence vectors of padded features; CLS-pooled BERT encoders skip most of their last
        layer (:mod:`hmde.encoders.cls_last_layer`) unless training (dropout) or told not to.
        ``model``: another copy of the modules to run (the low-precision one). ``normalized=False``
        stops before a final ``Normalize`` module (:func:`without_final_normalize`)."""
        model = model if model is not None else self.model
        if self.cls_last_layer and not model.training:
            return forward_cls_last_layer(model, features, normalized)["sentence_embedding"]
        if normalized:
            return model(features)["sentence_embedding"]
        for module in without_final_normalize(list(model)):
            features = module(features)
        return features["sentence_embedding"]

    def low_precision_pays(self, dtype: torch.dtype) -> bool:
        """Whether a ``dtype`` copy of the weights is faster than float32 here; if not, inference
        stays float32 and says why, once. Two reasons to keep float32: the first module names the
        device types where its copy pays (``low_precision_devices``; the USE-m port: GPUs only, its
        bf16 convolutions ran at 0.53-0.67x float32 on CPUs), or this machine's ``dtype`` matrix
        products are slower than float32's (:func:`hmde.encoders.precision.low_precision_is_faster`).
        ``HMDE_LOW_PRECISION=always`` runs the copy regardless."""
        if low_precision_forced():
            return True
        devices = getattr(self.model[0], "low_precision_devices", None)
        if devices is not None and self.device.type not in devices:
            why = f"{type(self.model[0]).__name__}'s low-precision copy is slower on {self.device.type}"
        else:
            faster, why = low_precision_is_faster(self.device, dtype)
            if faster:
                return True
        if not self.__dict__.get("_said_float32"):
            logger.warning("--bf16: inference stays float32 (%s; %s=always overrides)", why, POLICY_VARIABLE)
            object.__setattr__(self, "_said_float32", True)
        return False

    def low_precision_copy(self, dtype: torch.dtype):
        """The modules with ``dtype`` weights, for inference: autocast alone re-casts every fp32
        weight at every call, which on CPUs cost more than bf16 saved (0.74 vs 4.08 documents/s
        measured). The copy is made once and remade only when the fp32 weights changed
        (training, fine-tuning); it is not a submodule, so it is never saved or trained."""
        versions = tuple(p._version for p in self.model.parameters())
        cached = self.__dict__.get("_low_precision")
        if cached is None or cached[0] != (dtype, versions, self.model.training):
            low = cast_copy(self.model, dtype).eval()
            object.__setattr__(self, "_low_precision", ((dtype, versions, self.model.training), low))
            cached = self.__dict__["_low_precision"]
        return cached[1]

    @classmethod
    def load(cls, name_or_path: str, pooling: str | None = None, device: str | None = None, max_tokens: int = 128):
        return cls(load_sentence_transformer(name_or_path, pooling=pooling, device=device), max_tokens=max_tokens)

    @property
    def tokenizer(self):
        return self.model.tokenizer

    @property
    def dim(self) -> int:
        get = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        return int(get())

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def save(self, path: str | os.PathLike) -> None:
        self.model.save(str(path))

    # -- prompts ------------------------------------------------------------------------
    @property
    def prompts(self) -> dict[str, str]:
        """The folder's prompts (``config_sentence_transformers.json``), e.g. multilingual-e5-small's
        ``{"query": "query: ", "document": "passage: "}``; empty for most encoders."""
        return dict(getattr(self.model, "prompts", None) or {})

    @property
    def document_prompt(self) -> str:
        """The prefix of every sentence, window and segment of a document: the folder's default prompt
        (as plain ``SentenceTransformer.encode`` applies it), else its ``document`` prompt, else none."""
        prompts = self.prompts
        default = getattr(self.model, "default_prompt_name", None)
        if default is not None and default in prompts:
            return prompts[default]
        return prompts.get("document", "")

    def prompt_for(self, prompt_name: str | None) -> str:
        """The prefix for ``prompt_name`` (``query`` for CLIR queries); the document prompt when the
        folder has no such prompt or the name is None."""
        if prompt_name is not None and prompt_name in self.prompts:
            return self.prompts[prompt_name]
        return self.document_prompt

    # -- tokenization -----------------------------------------------------------------
    def token_ids(self, texts: Sequence[str], prompt: str | None = None) -> list[list[int]]:
        """Token ids with special tokens, truncated to ``max_tokens`` (prefix included). ``prompt``:
        a prefix for every text; None takes :attr:`document_prompt`."""
        if not texts:
            return []
        prompt = self.document_prompt if prompt is None else prompt
        texts = [prompt + t for t in texts] if prompt else list(texts)
        from ..text.segmentation import BLOCK_CHARS, groups_of_chars

        out: list[list[int]] = []
        for group in groups_of_chars(texts, BLOCK_CHARS):  # the tokenizer's encodings live one group at a time
            enc = self.tokenizer(group, add_special_tokens=True, truncation=True, max_length=self.max_tokens)
            out.extend(list(ids) for ids in enc["input_ids"])
        return out

    def _features(self, batch: list[list[int]]) -> dict[str, torch.Tensor]:
        """Pad token ids into tensors directly (``tokenizer.pad`` walks Python dicts per row)."""
        return {k: v.to(self.device) for k, v in pad_ids(batch, self.padding()).items()}

    def padding(self) -> "Padding":
        """How this encoder's inputs are padded (picklable: DataLoader workers pad with it)."""
        tok = self.tokenizer
        return Padding(tok.pad_token_id if tok.pad_token_id is not None else 0,
                       getattr(tok, "padding_side", "right") == "left",
                       "token_type_ids" in getattr(tok, "model_input_names", []))

    # -- embedding --------------------------------------------------------------------
    # the precision inference runs in when a caller names none (None: float32); set where auto chose bf16 on a CPU
    # with AMX (hmde.encoders.cpu_bf16); never used with gradients or in training
    inference_dtype: torch.dtype | None = None

    def default_batch_size(self) -> int:
        """The token budget, in maximal-length sentences, when none is given: it depends on the device.

        Measured with ``benchmarks/encode_speed.py`` (BERT-base shape): on CPUs, batches of
        8 x 128 tokens ran at 1.23-1.24x sentence-transformers and 32 x 128 at 0.89-1.06x
        (caches); on an H100, 64 x 128 ran 1.6x faster than 8 x 128.
        """
        return GPU_BATCH_SIZE if self.device.type == "cuda" else CPU_BATCH_SIZE

    def embed_ids(
        self,
        ids: Sequence[Sequence[int]],
        batch_size: int | None = None,
        show_progress_bar: bool = False,
        autocast_dtype: torch.dtype | None = None,
        normalized: bool = True,
        alone: bool = False,
    ) -> torch.Tensor:
        """Embed tokenized inputs; returns a (len(ids), dim) float32 tensor in input order.

        Identical inputs are embedded once. Inputs are sorted by length and grouped by
        a token budget of ``batch_size * max_tokens`` padded tokens, so batches of short
        sentences hold more sentences and padding stays minimal (None: the device's
        :meth:`default_batch_size`). Gradients flow unless the caller runs under
        ``torch.inference_mode``. ``normalized=False``: the vectors before a final ``Normalize``
        module (what fine-tuning's softmax head reads, :mod:`hmde.evaluation.classification`).
        ``alone``: under :attr:`inference_dtype` (bf16), each input in a batch of its own (queries), so that its
        vector is the one every door gives it: bf16 vectors move with their batch (a cosine of about 2e-5; 27% of
        600 WMT sentences differed between two batchings), float32's by at most 2e-7; and on one OpenMP thread
        (:func:`hmde.encoders.devices.one_thread`: faster for one short input). Only calls of up to
        :data:`ALONE_LIMIT` inputs (every search door's, concurrent searches gathered
        included): a bulk call (an evaluation's thousand queries) is batched, its vectors within a cosine of about
        2e-5 of the one-at-a-time ones.
        """
        if len(ids) == 0:
            return torch.zeros(0, self.dim, device=self.device)
        budget = (batch_size or self.default_batch_size()) * self.max_tokens
        threads = contextlib.nullcontext
        if autocast_dtype is None and self.inference_dtype is not None and not torch.is_grad_enabled() \
                and not self.model.training:
            autocast_dtype = self.inference_dtype  # auto's bf16 on a CPU with AMX (hmde.encoders.cpu_bf16)
            if alone and len(ids) <= ALONE_LIMIT and self.device.type == "cpu":
                from .devices import one_thread

                budget, threads = 1, one_thread

        def embed(batch_ids):
            plan = plan_batches(batch_ids, budget, self.padding())
            with threads():
                return self.embed_plan(plan, show_progress_bar=show_progress_bar, autocast_dtype=autocast_dtype,
                                       normalized=normalized)

        cache = self.__dict__.get("_vector_cache")
        if cache is not None and normalized and not torch.is_grad_enabled() and not self.model.training:
            return cache.embed_ids(self, ids, embed, autocast_dtype)
        return embed(ids)

    def use_vector_cache(self, cache) -> None:
        """Read and keep inference vectors in ``cache`` (:class:`hmde.encoders.sentence_cache.SentenceVectorCache`,
        None to stop); training and anything with gradients always embeds. Not a submodule: never saved."""
        object.__setattr__(self, "_vector_cache", cache)

    def embed_plan(self, plan: "BatchPlan", show_progress_bar: bool = False,
                   autocast_dtype: torch.dtype | None = None, normalized: bool = True) -> torch.Tensor:
        """Run a :func:`plan_batches` plan (made here or in a DataLoader worker); input order restored."""
        if not plan.batches:
            return torch.zeros(0, self.dim, device=self.device)
        outputs: list[torch.Tensor] = []
        # inference in bf16/fp16 runs a copy with low-precision weights (autocast still casts the
        # activations between them); with gradients, autocast over the fp32 weights, as training needs
        low = autocast_dtype in (torch.bfloat16, torch.float16) and not torch.is_grad_enabled()
        if low and not self.low_precision_pays(autocast_dtype):
            low, autocast_dtype = False, None
        low = low and not self.model.training
        model = self.low_precision_copy(autocast_dtype) if low else None
        with autocast_context(self.device.type, autocast_dtype):
            for features in tqdm(plan.batches, desc="sentences", unit="batch", disable=not show_progress_bar):
                features = {k: v.to(self.device, non_blocking=True) for k, v in features.items()}
                # normalized only when asked for: subclasses (ONNX) and wrappers of forward_features keep working
                out = self.forward_features(features, model) if normalized else \
                    self.forward_features(features, model, normalized=False)
                outputs.append(out.float())
        embedded = torch.cat(outputs)
        return embedded[plan.gather.to(embedded.device)]

    def embed(self, texts: Sequence[str], prompt: str | None = None, **kwargs) -> torch.Tensor:
        return self.embed_ids(self.token_ids(texts, prompt=prompt), **kwargs)

    @torch.inference_mode()
    def encode(
        self,
        texts: Iterable[str],
        batch_size: int | None = None,
        show_progress_bar: bool = False,
        normalize_embeddings: bool = False,
        autocast_dtype: torch.dtype | None = None,
        prompt_name: str | None = None,
    ) -> np.ndarray:
        """Embed texts (truncated to ``max_tokens``) and return a float32 numpy array.
        ``prompt_name``: ``query`` for queries; None embeds them as document sentences are embedded."""
        with eval_mode(self):
            vectors = self.embed(
                list(texts), prompt=self.prompt_for(prompt_name), batch_size=batch_size,
                show_progress_bar=show_progress_bar, autocast_dtype=autocast_dtype, alone=prompt_name == "query"
            )
        if normalize_embeddings:
            vectors = torch.nn.functional.normalize(vectors, dim=-1)
        return vectors.cpu().numpy().astype(np.float32)
