"""The HMDE contrastive loss (eq. 1) and its memory-independent cached form.

Eq. 1: for pair i, the anchor d_a[i] must pick its translation d_b[i] among all
translations of the batch and the batch's hard negatives, scores being cosine
similarity divided by a temperature. The symmetric form (public code) adds the same
loss from the other side, with the other side's hard negatives.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch
import torch.nn.functional as F

from ..training.distributed import gather_rows


def _local_rows(x: torch.Tensor):
    return x, torch.ones(x.shape[0], dtype=torch.bool, device=x.device), 0


def contrastive_loss(a: torch.Tensor, b: torch.Tensor, neg_a: torch.Tensor | None = None,
                     neg_b: torch.Tensor | None = None, temperature: float = 0.05, symmetric: bool = False,
                     gather: bool = True) -> torch.Tensor:
    """InfoNCE over [positives; hard negatives] of the batch, mean over anchors.

    Under multi-process training (torchrun, ``accelerate launch --multi_gpu``) with
    ``gather`` the candidates are gathered from every process, so each anchor sees the
    whole global batch's positives and hard negatives; the loss is the mean over this
    process's anchors. Without it, this process's rows are the whole contrastive batch.
    """
    a, b = F.normalize(a.float(), dim=-1), F.normalize(b.float(), dim=-1)
    rows = gather_rows if gather else _local_rows

    def one_side(anchor, positives, negatives):
        pos, pos_mask, offset = rows(positives)
        parts, masks = [pos], [pos_mask]
        if negatives is not None:
            neg, neg_mask, _ = rows(F.normalize(negatives.float(), dim=-1))
            parts.append(neg)
            masks.append(neg_mask)
        candidates, mask = torch.cat(parts), torch.cat(masks)
        logits = (anchor @ candidates.T / temperature).masked_fill(~mask, float("-inf"))
        # anchor i's positive: this process's i-th real row among the gathered (padded) rows
        labels = torch.nonzero(pos_mask).squeeze(1)[offset: offset + anchor.shape[0]]
        return F.cross_entropy(logits, labels)

    loss = one_side(a, b, neg_a)
    if symmetric:
        loss = loss + one_side(b, a, neg_b)
    return loss


class RandomState:
    """Captures and restores the CPU (and CUDA) RNG so a re-run reproduces dropout exactly."""

    def __init__(self):
        self.cpu = torch.get_rng_state()
        self.cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None

    def restore(self) -> None:
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state_all(self.cuda)


def cached_backward(encode: Callable[[Sequence], torch.Tensor], groups: Sequence[Sequence], chunk_size: int,
                    loss_fn: Callable[..., torch.Tensor]) -> torch.Tensor:
    """GradCache (Gao et al., 2021): the loss of a large batch with the memory of one chunk.

    ``groups`` are the batch's inputs per role (e.g. anchors, positives, negatives);
    ``encode`` embeds a list of inputs. 1) embed every chunk without a graph, 2) compute
    the loss on the detached embeddings and their gradients, 3) re-embed chunk by chunk
    with the same RNG state and backpropagate the cached gradients. The parameters'
    gradients equal those of the plain loss; returns the loss value.
    """
    reps, states = [], []
    with torch.no_grad():
        for group in groups:
            group_reps, group_states = [], []
            for start in range(0, len(group), chunk_size):
                group_states.append(RandomState())
                group_reps.append(encode(group[start : start + chunk_size]))
            reps.append(torch.cat(group_reps).detach().requires_grad_(True))
            states.append(group_states)
    loss = loss_fn(*reps)
    loss.backward()
    for group, rep, group_states in zip(groups, reps, states):
        if rep.grad is None:  # a role the loss does not use
            continue
        for i, start in enumerate(range(0, len(group), chunk_size)):
            group_states[i].restore()
            chunk = encode(group[start : start + chunk_size])
            chunk.backward(gradient=rep.grad[start : start + chunk_size])
    return loss.detach()
