"""Multi-process training under torchrun, without a wrapper class.

``accelerate launch --multi_gpu`` works as well: it starts the processes through
``torch.distributed.run``. Several CPU processes need torchrun (accelerate's multi-CPU
mode goes through mpirun instead).

Each process takes its share of every optimizer step's pairs, in-batch losses gather
the other processes' rows (:func:`gather_rows`, differentiable), and gradients are
averaged with one all-reduce per parameter before the optimizer step, so all processes
keep identical weights. Only process 0 writes logs and checkpoints.

The rule both trainers follow: with W processes, the per-process losses must sum to W
times the loss of one process holding the whole batch. Averaged gradients then equal
that process's gradients (a loss over gathered rows is computed whole on every process;
a per-row loss is scaled by W * local rows / global rows).
"""

from __future__ import annotations

import os
import warnings

import torch
import torch.distributed as dist


def setup() -> tuple[int, int]:
    """(rank, world size); starts the process group when launched by torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend)
    return rank_and_world()


def local_device(device: str) -> str:
    """Under torchrun each process uses its own GPU."""
    if device.startswith("cuda") and "LOCAL_RANK" in os.environ:
        return f"cuda:{os.environ['LOCAL_RANK']}"
    return device


def rank_and_world() -> tuple[int, int]:
    """(rank, world size) of the running process group, (0, 1) outside one."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def shard(items: list, rank: int, world: int) -> list:
    return items[rank::world] if world > 1 else items


def is_distributed() -> bool:
    """True inside a process group of more than one process."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def average_gradients(params) -> None:
    if not is_distributed():
        return
    world = dist.get_world_size()
    for p in params:
        if p.grad is None:  # a process without a micro-batch this step still joins every all-reduce
            p.grad = torch.zeros_like(p)
        dist.all_reduce(p.grad)
        p.grad /= world


def is_main() -> bool:
    return not (dist.is_available() and dist.is_initialized()) or dist.get_rank() == 0


def gather_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Every process's rows of ``x`` (rows may differ in number), differentiably.

    Returns (all rows, a mask of real rows, the offset of this process's rows among the
    real ones). Rows are padded to the largest count for ``all_gather`` and the padding
    is masked out. Gradients flow back to each process's own rows
    (``torch.distributed.nn.functional.all_gather``), so with gradients averaged over
    processes training equals one process holding the whole batch.
    """
    from torch.distributed.nn.functional import all_gather

    if not is_distributed():
        return x, torch.ones(x.shape[0], dtype=torch.bool, device=x.device), 0
    counts = [torch.zeros(1, dtype=torch.long, device=x.device) for _ in range(dist.get_world_size())]
    dist.all_gather(counts, torch.tensor([x.shape[0]], device=x.device))
    counts = [int(c) for c in counts]
    padded = torch.cat([x, x.new_zeros(max(counts) - x.shape[0], *x.shape[1:])])
    with warnings.catch_warnings():  # deprecated in favour of a private API; still the public one
        warnings.simplefilter("ignore", FutureWarning)
        parts = all_gather(padded)
    mask = torch.cat([torch.arange(max(counts), device=x.device) < c for c in counts])
    return torch.cat(parts), mask, sum(counts[: dist.get_rank()])


def gather_all(x: torch.Tensor) -> torch.Tensor:
    """Every process's rows of ``x`` in rank order, padding dropped; differentiable."""
    rows, mask, _ = gather_rows(x)
    return rows if bool(mask.all()) else rows[mask]


def mean_over_processes(value: torch.Tensor) -> torch.Tensor:
    """The mean of a (detached) tensor over processes; for logging a global loss."""
    if not is_distributed():
        return value
    value = value.detach().clone()
    dist.all_reduce(value)
    return value / dist.get_world_size()


def min_over_processes(value: int) -> int:
    """The smallest of every process's ``value`` (a step count all must agree on)."""
    if not is_distributed():
        return value
    t = torch.tensor([value], dtype=torch.long)
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return int(t)


def barrier() -> None:
    if is_distributed():
        dist.barrier()
