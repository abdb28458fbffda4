"""The upper encoder: a shallow transformer over a document's sentence vectors.

A learned document-start token is prepended, learned sentence positions are added,
and (as in BERT's embedding layer) the sum is layer-normalised before the
transformer layers, because sentence vectors from encoders such as LaBSE are
unit-length and would otherwise be dwarfed by the position embeddings. The document
vector is the mean of the contextualised sentence vectors.
"""

from __future__ import annotations

import torch
from torch import nn

from .config import HierarchicalConfig


class DocumentEncoder(nn.Module):
    """Contextualises up to ``config.max_sentences`` sentence vectors per document.

    Inputs: ``sentences`` (B, S, H) padded sentence vectors and ``mask`` (B, S), True
    for real sentences. Output: (B, H) document vectors.
    """

    def __init__(self, config: HierarchicalConfig, hidden_size: int):
        super().__init__()
        self.config = config
        self.hidden_size = hidden_size
        if hidden_size % config.num_heads:
            raise ValueError(f"hidden size {hidden_size} is not divisible by {config.num_heads} heads")
        self.doc_token = nn.Parameter(torch.empty(hidden_size))
        self.positions = nn.Embedding(config.max_sentences + 1, hidden_size) if config.position_embeddings else None
        self.norm = nn.LayerNorm(hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)
        layer = nn.TransformerEncoderLayer(
            d_model=hidden_size,
            nhead=config.num_heads,
            dim_feedforward=config.ffn_size,
            dropout=config.dropout,
            activation=config.activation,
            layer_norm_eps=config.layer_norm_eps,
            batch_first=True,
            norm_first=False,
        )
        self.layers = nn.TransformerEncoder(layer, num_layers=config.num_layers, enable_nested_tensor=False)
        # residual_sentences (not in the paper): c_i = s_i + gate * h_i, the gate starting at 0
        self.gate = nn.Parameter(torch.zeros(())) if config.residual_sentences else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.doc_token, std=0.02)
        if self.positions is not None:
            nn.init.normal_(self.positions.weight, std=0.02)

    def forward(self, sentences: torch.Tensor, mask: torch.Tensor, return_sentences: bool = False):
        """(B, H) document vectors; with ``return_sentences`` also the (B, S, H) contextualised
        sentence vectors whose masked mean they are: the upper encoder's output at each sentence's
        position (with ``residual_sentences``: the sentence vector plus the gated output)."""
        batch, length, _ = sentences.shape
        if length > self.config.max_sentences:
            raise ValueError(f"{length} sentences exceed max_sentences={self.config.max_sentences}")
        doc = self.doc_token.to(sentences.dtype).expand(batch, 1, -1)
        x = torch.cat([doc, sentences], dim=1)
        full_mask = torch.cat([torch.ones(batch, 1, dtype=torch.bool, device=mask.device), mask.bool()], dim=1)
        if self.positions is not None:
            x = x + self.positions(torch.arange(length + 1, device=x.device))[None]
        x = self.dropout(self.norm(x))
        hidden = self.layers(x, src_key_padding_mask=~full_mask)
        weights = full_mask.clone()
        if not self.config.mean_includes_doc_token:
            weights[:, 0] = False
        weights = weights.to(hidden.dtype).unsqueeze(-1)
        pooled = (hidden * weights).sum(1) / weights.sum(1).clamp_min(1.0)
        contextual = hidden[:, 1:]
        if self.gate is not None:
            sent_weights = mask.to(hidden.dtype).unsqueeze(-1)
            mean = (sentences.to(hidden.dtype) * sent_weights).sum(1) / sent_weights.sum(1).clamp_min(1.0)
            pooled = mean + self.gate.to(hidden.dtype) * pooled
            contextual = sentences.to(hidden.dtype) + self.gate.to(hidden.dtype) * contextual
        return (pooled, contextual) if return_sentences else pooled
