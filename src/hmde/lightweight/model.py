"""The lightweight dual encoder: one BERT-architecture encoder shared by both languages.

Saved as a plain sentence-transformers folder (BertModel + fast tokenizer + mean
pooling); the UGT head is training-only and kept in the trainer's checkpoint.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn


@dataclass
class LightweightConfig:
    """Architecture (paper: 2 layers, hidden 512, 8 heads, FFN 1024, dropout 0.1, mean pooling)."""

    vocab_size: int = 32000
    layers: int = 2
    hidden: int = 512
    heads: int = 8
    ffn: int = 1024
    dropout: float = 0.1
    max_length: int = 128
    # UGT head: "untied" (earlier hmde: one Linear(hidden, V)); "tied" (the paper: a fully
    # connected layer, then a softmax over the input embeddings, tied)
    head: str = "untied"


class TiedUgtHead(nn.Module):
    """The paper's generative head: logits = dense(h) . E^T + b, E the input embeddings (tied)."""

    def __init__(self, hidden: int, embeddings: nn.Embedding):
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)
        self.embeddings = [embeddings]  # a list: the tied matrix is the encoder's, not a second parameter
        self.bias = nn.Parameter(torch.zeros(embeddings.num_embeddings))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.dense(h) @ self.embeddings[0].weight.T + self.bias


class LightweightEncoder(nn.Module):
    def __init__(self, config: LightweightConfig, pad_token_id: int = 0):
        super().__init__()
        from transformers import BertConfig, BertModel

        self.config = config
        self.bert = BertModel(
            BertConfig(
                vocab_size=config.vocab_size, hidden_size=config.hidden, num_hidden_layers=config.layers,
                num_attention_heads=config.heads, intermediate_size=config.ffn, hidden_dropout_prob=config.dropout,
                attention_probs_dropout_prob=config.dropout, max_position_embeddings=config.max_length,
                type_vocab_size=1, pad_token_id=pad_token_id,
            ),
            add_pooling_layer=False,
        )
        if config.head == "tied":  # UGT head, training only
            self.head = TiedUgtHead(config.hidden, self.bert.embeddings.word_embeddings)
        elif config.head == "untied":
            self.head = nn.Linear(config.hidden, config.vocab_size)
        else:
            raise ValueError(f"unknown UGT head '{config.head}' (tied or untied)")

    def pool(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp_min(1.0)

    def save_sentence_transformer(self, tokenizer, output: str | Path) -> None:
        """Write a sentence-transformers folder (no head) that loads without hmde."""
        from sentence_transformers import SentenceTransformer

        from ..encoders.sentence_encoder import _st_modules

        m = _st_modules()
        tmp = Path(tempfile.mkdtemp(prefix="hmde-lw-"))
        try:
            self.bert.save_pretrained(str(tmp))
            tokenizer.save_pretrained(str(tmp))
            transformer = m.Transformer(str(tmp), max_seq_length=self.config.max_length)
            pooling = m.Pooling(self.config.hidden, pooling_mode="mean")
            SentenceTransformer(modules=[transformer, pooling], device="cpu").save(str(output))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
