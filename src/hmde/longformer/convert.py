"""Turn a BERT-style sentence encoder into a Longformer (Beltagy et al. 2020, "convert").

The recipe of the Longformer authors, as the HMDE paper used it for its mLongformer
baseline: every weight is copied; the 512 learned positions are tiled to 4,096; each
layer gets sliding-window attention (window 512) whose global-attention projections
start as copies of the local ones; the first token gets global attention at encoding
time. On inputs shorter than half the window every token still sees every other, so
the converted model equals the original there (tested).

The result is a sentence-transformers folder: the Longformer as its Transformer
module followed by the original folder's own pooling and heads (LaBSE's CLS -> Dense ->
Normalize), so document vectors are made the way the sentence encoder makes its own.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from ..ground.atomic import atomic_dir
from ..errors import HmdeError

GLOBAL_COPIES = {"query_global": "query", "key_global": "key", "value_global": "value"}


def _longformer_config(bert_config, max_positions: int, window: int):
    from transformers import LongformerConfig

    pad = bert_config.pad_token_id if bert_config.pad_token_id is not None else 0
    return LongformerConfig(
        vocab_size=bert_config.vocab_size, hidden_size=bert_config.hidden_size,
        num_hidden_layers=bert_config.num_hidden_layers, num_attention_heads=bert_config.num_attention_heads,
        intermediate_size=bert_config.intermediate_size, hidden_act=bert_config.hidden_act,
        hidden_dropout_prob=bert_config.hidden_dropout_prob,
        attention_probs_dropout_prob=bert_config.attention_probs_dropout_prob,
        max_position_embeddings=max_positions + pad + 1, type_vocab_size=bert_config.type_vocab_size,
        initializer_range=bert_config.initializer_range, layer_norm_eps=bert_config.layer_norm_eps,
        pad_token_id=pad, attention_window=[window] * bert_config.num_hidden_layers,
    )


def longformer_state_dict(bert, config) -> dict[str, torch.Tensor]:
    """BERT weights renamed for ``LongformerModel``, positions tiled, global projections copied."""
    state = {k: v.clone() for k, v in bert.state_dict().items() if not k.endswith("position_ids")}
    old = state.pop("embeddings.position_embeddings.weight")
    offset = config.pad_token_id + 1  # Longformer numbers positions from padding_idx + 1, BERT from 0
    new = old.new_empty(config.max_position_embeddings, old.shape[1])
    new[:offset] = old[0]
    n = config.max_position_embeddings - offset
    reps = -(-n // old.shape[0])
    new[offset:] = old.repeat(reps, 1)[:n]
    state["embeddings.position_embeddings.weight"] = new
    for key in list(state):
        for glob, local in GLOBAL_COPIES.items():
            marker = f".attention.self.{local}."
            if marker in key:
                state[key.replace(marker, f".attention.self.{glob}.")] = state[key].clone()
    return state


def convert_to_longformer(model_name_or_path: str, output: str | Path, max_positions: int = 4096,
                          window: int = 512) -> Path:
    """Write a Longformer sentence-transformers folder converted from a BERT-style encoder."""
    from transformers import LongformerModel

    from ..encoders.sentence_encoder import _st_modules, load_sentence_transformer

    st = load_sentence_transformer(model_name_or_path, device="cpu")
    bert = st[0].auto_model
    if getattr(bert.config, "model_type", "") not in ("bert",):
        raise HmdeError(f"conversion supports BERT-style encoders (LaBSE, mBERT); this one is "
                        f"'{bert.config.model_type}'")
    if window % 2:
        raise HmdeError("the attention window must be even")
    config = _longformer_config(bert.config, max_positions, window)
    longformer = LongformerModel(config, add_pooling_layer=hasattr(bert, "pooler") and bert.pooler is not None)
    missing, unexpected = longformer.load_state_dict(longformer_state_dict(bert, config), strict=False)
    if unexpected or [m for m in missing if "pooler" not in m]:
        raise HmdeError(f"weights do not map onto the Longformer (missing {missing}, unexpected {unexpected})")
    tokenizer = st.tokenizer
    tokenizer.model_max_length = max_positions
    m = _st_modules()
    with tempfile.TemporaryDirectory() as tmp, atomic_dir(output) as out:
        longformer.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        transformer = m.Transformer(tmp, max_seq_length=max_positions)
        from sentence_transformers import SentenceTransformer

        SentenceTransformer(modules=[transformer, *list(st)[1:]], device="cpu").save(str(out))
    return Path(output)
