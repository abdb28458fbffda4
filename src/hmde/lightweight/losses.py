"""The three training losses of the lightweight encoder (Mao et al., 2021).

Shapes: ``u``, ``v`` are (N, H) pooled vectors of the two sides of N parallel pairs.

* Unified generative task (UGT, eq. 3-4): from a pooled vector, a dense layer
  predicts a distribution over the vocabulary, trained with KL to a target. The side
  with one masked token targets 1/2 on the masked token (single-word MLM) plus 1/2
  spread over the other sentence's tokens (cross-lingual token reconstruction); the
  unmasked side targets the masked side's (original) tokens. Repeated tokens count
  once per occurrence, so every target sums to 1.
* Alignment (eq. 5): in-batch softmax over inner products u_i.v_j, both directions.
* Similarity (eq. 6): -log cos(pi/2 (softmax(U U^T) - softmax(V V^T))), summed over j,
  averaged over i: the two languages' in-batch similarity structures must agree.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def bag_of_tokens(ids: torch.Tensor, keep: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """(N, V) distribution: each kept token occurrence gets 1/(number kept) of the mass."""
    keep = keep.to(torch.float32)
    counts = torch.zeros(ids.shape[0], vocab_size, device=ids.device).scatter_add_(1, ids, keep)
    return counts / keep.sum(1, keepdim=True).clamp_min(1.0)


def ugt_targets(
    masked_token: torch.Tensor, masked_side_ids: torch.Tensor, masked_side_keep: torch.Tensor,
    other_ids: torch.Tensor, other_keep: torch.Tensor, vocab_size: int, smlm_weight: float = 0.5,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Targets of eq. 3 (masked side) and eq. 4 (other side).

    ``masked_token`` (N,) holds the original id of the masked position;
    ``masked_side_ids`` are the original (unmasked) ids of that side.
    """
    one_hot = F.one_hot(masked_token, vocab_size).to(torch.float32)
    other_bag = bag_of_tokens(other_ids, other_keep, vocab_size)
    target_masked = smlm_weight * one_hot + (1.0 - smlm_weight) * other_bag
    target_other = bag_of_tokens(masked_side_ids, masked_side_keep, vocab_size)
    return target_masked, target_other


def kl_to_target(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean over the batch of KL(target || softmax(logits))."""
    return F.kl_div(F.log_softmax(logits.float(), dim=-1), target, reduction="batchmean")


def ugt_loss(logits_masked: torch.Tensor, logits_other: torch.Tensor, target_masked: torch.Tensor,
             target_other: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """UGT: the two sides' KL losses, summed (the paper) or averaged (``mean``, earlier hmde, which
    makes the loss weights effectively 0.5 : 2 : 2)."""
    total = kl_to_target(logits_masked, target_masked) + kl_to_target(logits_other, target_other)
    if reduction == "sum":
        return total
    if reduction != "mean":
        raise ValueError(f"unknown UGT reduction '{reduction}' (sum or mean)")
    return 0.5 * total


def alignment_loss(u: torch.Tensor, v: torch.Tensor, cosine: bool = False, temperature: float = 0.05) -> torch.Tensor:
    """Eq. 5: CE over u_i.v_j rows plus CE over columns (the paper uses inner products).

    ``cosine=True``: the scores are cos(u_i, v_j) / temperature instead.
    """
    if cosine:
        scores = F.normalize(u.float(), dim=-1) @ F.normalize(v.float(), dim=-1).T / temperature
    else:
        scores = u.float() @ v.float().T
    labels = torch.arange(u.shape[0], device=u.device)
    return F.cross_entropy(scores, labels) + F.cross_entropy(scores.T, labels)


def similarity_loss(u: torch.Tensor, v: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Eq. 6: sum_j -log cos(pi/2 (P_ij - Q_ij)), averaged over i; P, Q row softmaxes of U U^T, V V^T."""
    p = torch.softmax(u.float() @ u.float().T, dim=-1)
    q = torch.softmax(v.float() @ v.float().T, dim=-1)
    return -torch.log(torch.cos(math.pi / 2 * (p - q)).clamp_min(eps)).sum(1).mean()
