"""Multi-process training under torchrun (or accelerate launch), without a wrapper class.

Each process takes its share of every optimizer step's pairs, the contrastive loss
gathers candidates from all processes (:func:`hmde.pretraining.loss.gather_rows`), and
gradients are averaged with one all-reduce per parameter before the optimizer step, so
all processes keep identical weights. Only process 0 writes logs and checkpoints.
"""

from __future__ import annotations

import os

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
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def local_device(device: str) -> str:
    """Under torchrun each process uses its own GPU."""
    if device.startswith("cuda") and "LOCAL_RANK" in os.environ:
        return f"cuda:{os.environ['LOCAL_RANK']}"
    return device


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
        if p.grad is not None:
            dist.all_reduce(p.grad)
            p.grad /= world


def is_main() -> bool:
    return not (dist.is_available() and dist.is_initialized()) or dist.get_rank() == 0
