"""Encode whole documents with a converted Longformer, global attention on the first token."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch


class LongformerEncoder:
    """Documents (up to ``max_tokens``) through the Longformer and the folder's own pooling/heads."""

    def __init__(self, model, device: str | None = None, max_tokens: int = 4096):
        """``model``: a folder/hub id, or an already loaded SentenceTransformer."""
        from ..errors import HmdeError
        from ..encoders.sentence_encoder import load_sentence_transformer

        self.model = load_sentence_transformer(model, device=device) if isinstance(model, str) else model
        if getattr(self.model[0].auto_model.config, "model_type", "") != "longformer":
            raise HmdeError("--method longformer needs a Longformer folder (make one with `hmde longformer convert`)")
        self.model.eval()
        self.max_tokens = max_tokens

    @property
    def tokenizer(self):
        return self.model.tokenizer

    def forward(self, texts: Sequence, normalized: bool = True) -> torch.Tensor:
        """Document vectors of one batch, with gradients (fine-tuning); texts or sentence lists.
        ``normalized=False``: before the folder's final ``Normalize`` (:mod:`hmde.encoders.unnormalized`)."""
        from ..encoders.unnormalized import without_final_normalize

        auto = self.model[0].auto_model
        device = next(auto.parameters()).device
        flat = [t if isinstance(t, str) else " ".join(t) for t in texts]
        enc = self.tokenizer(flat, padding=True, truncation=True, max_length=self.max_tokens,
                             return_tensors="pt").to(device)
        glob = torch.zeros_like(enc["attention_mask"])
        glob[:, 0] = 1
        hidden = auto(**enc, global_attention_mask=glob).last_hidden_state
        features = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"], "token_embeddings": hidden}
        for module in (list(self.model) if normalized else without_final_normalize(list(self.model)))[1:]:
            features = module(features)
        return features["sentence_embedding"].float()

    @torch.inference_mode()
    def encode(self, texts: Sequence, batch_size: int = 2) -> np.ndarray:
        was = self.model.training
        self.model.eval()
        try:
            out = [self.forward(texts[i:i + batch_size]).cpu().numpy() for i in range(0, len(texts), batch_size)]
        finally:
            self.model.train(was)
        dim = self.model.get_embedding_dimension() if hasattr(self.model, "get_embedding_dimension") else 0
        return np.concatenate(out) if out else np.zeros((0, dim), np.float32)
