"""Typed configuration of the hierarchical encoder, with the paper's settings as defaults.

Every field is saved in the model folder's ``config.json`` so that a model loads back
exactly as it was trained. Where the paper and its public code differ, the paper is the
default and the code's choice is an option (see docs/paper-settings.md in this repo).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..errors import HmdeError

SEGMENTATION_MODES = ("sentences", "chunks")
LONG_SENTENCE_MODES = ("split", "truncate")
LONG_DOCUMENT_MODES = ("windows", "truncate")


ACTIVATIONS = ("gelu", "relu")  # what torch.nn.TransformerEncoderLayer takes by name


def _is_type(value: Any, kind: type) -> bool:
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value  # NaN refused
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


_TYPE_WORDS = {int: "an integer", float: "a number", bool: "true or false", str: "a string", dict: "an object"}


@dataclass
class HierarchicalConfig:
    """Settings of the upper (document-level) encoder and of document segmentation.

    Attributes:
        num_layers: transformer layers of the upper encoder (paper: 2).
        num_heads: attention heads (public code: 8).
        ffn_size: feed-forward width (paper: 2048).
        dropout: dropout in the upper encoder (paper: 0.1).
        layer_norm_eps: LayerNorm epsilon (paper: 1e-12).
        activation: feed-forward activation (paper: GELU).
        max_sentences: sentences the upper encoder sees at once (paper: 32; the public
            code counts the document token among its 32 positions, i.e. 31 sentences).
        position_embeddings: learned absolute sentence positions (public code: on).
        mean_includes_doc_token: whether the document token's output is part of the
            mean (paper: no, "mean of contextualized sentence vectors"; public code: yes).
        long_documents: what happens to documents with more than ``max_sentences``
            sentences: ``windows`` (default) encodes consecutive windows of
            ``max_sentences`` and averages their vectors weighted by sentence count;
            ``truncate`` keeps the first ``max_sentences`` (the paper's behaviour).
        segmentation: ``sentences`` (paper) or ``chunks`` of ``max_sentence_tokens``
            consecutive tokens (the paper's ablation).
        max_sentence_tokens: token limit of one lower-encoder input incl. special tokens
            (paper: 128).
        long_sentences: sentences over the limit are ``split`` into consecutive pieces
            that each fit (default, nothing is lost) or ``truncate``d (LaBSE's own
            behaviour and the public code's).
        default_language: ISO 639 code used for sentence splitting when a document has
            no language.
        residual_sentences: not in the paper (default off). Each contextualised sentence
            vector is its lower-encoder vector plus a learned scalar gate (initialised to 0)
            times the upper encoder's output, so a new model starts as the mean of the
            sentence vectors and training adds document context to that space. With a
            frozen, strong lower encoder and little training data, the paper's design
            leaves the lower encoder's space (measured with USE-m: see docs/hmde-use.md).
    """

    num_layers: int = 2
    num_heads: int = 8
    ffn_size: int = 2048
    dropout: float = 0.1
    layer_norm_eps: float = 1e-12
    activation: str = "gelu"
    max_sentences: int = 32
    position_embeddings: bool = True
    mean_includes_doc_token: bool = False
    long_documents: str = "windows"
    segmentation: str = "sentences"
    max_sentence_tokens: int = 128
    long_sentences: str = "split"
    default_language: str = "en"
    residual_sentences: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        for f in dataclasses.fields(self):  # types first: config.json may hold a string or null anywhere
            value, kind = getattr(self, f.name), _FIELD_TYPES.get(f.name)
            if kind is not None and not _is_type(value, kind):
                raise HmdeError(f"invalid hmde configuration: field '{f.name}' must be {_TYPE_WORDS[kind]}, "
                                f"got {value!r}")
        checks = [
            (self.segmentation in SEGMENTATION_MODES, f"segmentation must be one of {SEGMENTATION_MODES}"),
            (self.long_sentences in LONG_SENTENCE_MODES, f"long_sentences must be one of {LONG_SENTENCE_MODES}"),
            (self.long_documents in LONG_DOCUMENT_MODES, f"long_documents must be one of {LONG_DOCUMENT_MODES}"),
            (self.max_sentences >= 1, "max_sentences must be >= 1"),
            (self.max_sentence_tokens >= 4, "max_sentence_tokens must be >= 4"),
            (self.num_layers >= 0, "num_layers must be >= 0"),
            (self.num_heads >= 1, "num_heads must be >= 1"),
            (self.ffn_size >= 1, "ffn_size must be >= 1"),
            (self.layer_norm_eps > 0, "layer_norm_eps must be > 0"),
            (self.activation in ACTIVATIONS, f"activation must be one of {ACTIVATIONS}"),
            (0.0 <= self.dropout < 1.0, "dropout must be in [0, 1)"),
        ]
        for ok, message in checks:
            if not ok:
                raise HmdeError(f"invalid hmde configuration: {message}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "HierarchicalConfig":
        if not isinstance(data, dict):
            raise HmdeError(f"invalid hmde configuration: 'config' must be an object, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise HmdeError(f"unknown hmde configuration keys {unknown}: was this model saved by a newer hmde?")
        return cls(**data)

    def replace(self, **changes: Any) -> "HierarchicalConfig":
        return dataclasses.replace(self, **changes)


# ways of turning the lower encoder into a document encoder (see hmde.methods.vectorizer)
DOCUMENT_METHODS = ("hmde", "first", "seg", "mean", "lawdr", "longformer")


_FIELD_TYPES = {"num_layers": int, "num_heads": int, "ffn_size": int, "dropout": float, "layer_norm_eps": float,
                "activation": str, "max_sentences": int, "position_embeddings": bool, "mean_includes_doc_token": bool,
                "long_documents": str, "segmentation": str, "max_sentence_tokens": int, "long_sentences": str,
                "default_language": str, "residual_sentences": bool, "extra": dict}
