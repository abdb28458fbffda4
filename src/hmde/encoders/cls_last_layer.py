"""CLS-pooled BERT-family sentence encoders: the last layer computed for the first token only.

Why: with CLS pooling (LaBSE's, the paper's lower encoder) nothing reads the last layer's
output at any position but the first. That layer's keys and values still need every
token, but its queries, attention output and feed-forward network need the first token
alone, which saves about five sixths of one layer: 7% of a 12-layer forward pass. The
vectors equal sentence-transformers' full forward pass up to float rounding (tested).

It applies only where that is certain: a sentence-transformers model whose first module
wraps a BERT-style encoder (``encoder.layer[i]`` with ``attention.self.query/key/value``,
``attention.output``, ``intermediate``, ``output``), absolute positions, no decoder, no
feed-forward chunking, right padding, and whose second module pools the CLS token only.
Every other model takes sentence-transformers' own forward pass.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .unnormalized import without_final_normalize


def _is_cls_pooling(module: nn.Module) -> bool:
    mode = getattr(module, "pooling_mode", None)  # sentence-transformers >= 6
    if mode is not None:
        return ((mode,) if isinstance(mode, str) else tuple(mode)) == ("cls",)
    get = getattr(module, "get_pooling_mode_str", None)  # older releases
    return bool(get) and get() == "cls"


def supports_cls_last_layer(st_model: nn.Module, tokenizer) -> bool:
    """True when :func:`forward_cls_last_layer` gives the same vectors as ``st_model(features)``."""
    modules = list(st_model.children()) if isinstance(st_model, nn.Sequential) else []
    if len(modules) < 2 or not _is_cls_pooling(modules[1]):
        return False
    auto = getattr(modules[0], "auto_model", None)
    layers = getattr(getattr(auto, "encoder", None), "layer", None)
    if not isinstance(layers, nn.ModuleList) or len(layers) < 2:
        return False
    last = layers[-1]
    attention = getattr(last, "attention", None)
    shaped = (all(hasattr(last, a) for a in ("attention", "intermediate", "output"))
              and all(hasattr(attention, a) for a in ("self", "output"))
              and all(hasattr(attention.self, a) for a in ("query", "key", "value")))
    config = auto.config
    return (shaped and not getattr(config, "is_decoder", False) and not getattr(config, "add_cross_attention", False)
            and getattr(config, "position_embedding_type", "absolute") in (None, "absolute")
            and not getattr(config, "chunk_size_feed_forward", 0)
            and getattr(tokenizer, "padding_side", "right") == "right")


def forward_cls_last_layer(st_model: nn.Sequential, features: dict[str, torch.Tensor],
                           normalized: bool = True) -> dict[str, torch.Tensor]:
    """``st_model(features)`` with the last encoder layer run for the first token only
    (``normalized=False``: without a final ``Normalize`` module)."""
    modules = list(st_model.children())
    auto = modules[0].auto_model
    layers = auto.encoder.layer
    inputs = {k: features[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in features}
    auto.encoder.layer = layers[:-1]  # every layer but the last, through the model's own forward pass
    try:
        hidden = auto(**inputs, return_dict=True).last_hidden_state
    finally:
        auto.encoder.layer = layers
    last = layers[-1]
    attention = last.attention.self
    batch, length, width = hidden.shape
    heads = auto.config.num_attention_heads

    def split(x: torch.Tensor) -> torch.Tensor:  # (B, T, H) -> (B, heads, T, H / heads)
        return x.view(batch, x.shape[1], heads, width // heads).transpose(1, 2)

    first = hidden[:, :1]
    keep = features["attention_mask"][:, None, None, :].bool()
    context = F.scaled_dot_product_attention(split(attention.query(first)), split(attention.key(hidden)),
                                             split(attention.value(hidden)), attn_mask=keep)
    attended = last.attention.output(context.transpose(1, 2).reshape(batch, 1, width), first)
    cls = last.output(last.intermediate(attended), attended)
    out = dict(features, token_embeddings=cls, cls_token_embeddings=cls[:, 0])
    for module in modules[1:] if normalized else without_final_normalize(modules)[1:]:
        out = module(out)
    return out
