"""Token-embedding gradients accumulated sparsely within a step, made dense once before the optimizer.

Why: a trained lower encoder runs several forward passes per optimizer step (every
micro-batch, role and token batch). With dense embedding gradients each backward pass
allocates and zero-fills a full vocabulary x hidden matrix (LaBSE: 501,153 x 768 floats,
1.5 GB) and adds it into ``.grad``, although a pass touches only a few hundred rows. On
2 CPU cores that was 18% of hmde-mini's joint training step (profiled: 52 fills of
16,000 x 256 per step, 18 ms each between the step's large activations). Sparse gradients
keep only the touched rows; :func:`densify` sums them into one dense gradient per step,
so AdamW, clipping and the all-reduce see exactly what they saw before (the same sum, in
another order of additions: equal to float rounding, tested).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

import torch
from torch import nn


@contextlib.contextmanager
def sparse_embedding_gradients(modules: nn.Module | Iterable[nn.Module], trained: Iterable[torch.Tensor] | None = None,
                               enabled: bool = True) -> Iterator[list[nn.Embedding]]:
    """Within the block, every ``nn.Embedding`` of ``modules`` whose weight is trained returns sparse
    gradients. ``trained``: the optimizer's parameters (default: every weight that requires a
    gradient); an embedding outside them keeps dense gradients, since nothing would densify and
    reset its sparse ones. The earlier setting comes back afterwards (it is not saved, but a later
    fine-tuning run with another optimizer must not inherit it)."""
    changed = []
    modules = [modules] if isinstance(modules, nn.Module) else list(modules)
    chosen = None if trained is None else {id(p) for p in trained}
    if enabled:
        for m in (sub for module in modules for sub in module.modules()):
            if isinstance(m, nn.Embedding) and m.weight.requires_grad and not m.sparse \
                    and (chosen is None or id(m.weight) in chosen):
                m.sparse = True
                changed.append(m)
    try:
        yield changed
    finally:
        for m in changed:
            m.sparse = False


def densify(params: Iterable[torch.Tensor]) -> None:
    """Replace each sparse ``.grad`` by its dense sum (duplicated rows added up)."""
    for p in params:
        if p.grad is not None and p.grad.is_sparse:
            p.grad = p.grad.coalesce().to_dense()
