"""Atomic training checkpoints and JSONL logs, so that ``--resume`` continues exactly.

A checkpoint holds model, optimizer and scheduler state, the step, the run's
configuration and the RNG states; trainers derive every random choice (batch order,
masking, dropout) from (seed, step), so restoring the step restores the data position.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..atomic import atomic_path
from ..errors import HmdeError

STATE_FILE = "trainer_state.pt"


def save_checkpoint(folder: str | Path, state: dict[str, Any]) -> Path:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = dict(state)
    state["rng"] = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}
    with atomic_path(folder / STATE_FILE) as tmp:
        torch.save(state, tmp)
    return folder / STATE_FILE


def load_checkpoint(folder: str | Path) -> dict[str, Any]:
    path = Path(folder) / STATE_FILE
    if not path.exists():
        raise HmdeError(f"--resume: no checkpoint at {path}")
    state = torch.load(path, map_location="cpu", weights_only=False)
    rng = state.get("rng")
    if rng:
        torch.set_rng_state(rng["torch"])
        np.random.set_state(rng["numpy"])
        random.setstate(rng["python"])
    return state


def seed_step(seed: int, step: int) -> None:
    """Seed every generator from (seed, step): dropout and sampling are reproducible per step."""
    value = (seed * 1_000_003 + step) % (2**31 - 1)
    torch.manual_seed(value)
    np.random.seed(value)
    random.seed(value)


class JsonlLog:
    """Append-only JSONL log; a resumed run appends to the same file."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.start = time.time()

    def write(self, **record: Any) -> None:
        record.setdefault("time", round(time.time() - self.start, 3))
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


def bf16_supported(device: torch.device) -> bool:
    """bf16 autocast is worth it on GPUs with bf16 and on CPUs with native bf16 (AVX512-BF16/AMX)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()) and "avx512_bf16" in Path("/proc/cpuinfo").read_text()
    except Exception:
        return False


def resolve_bf16(flag: str, device: torch.device) -> bool:
    if flag == "auto":
        return bf16_supported(device)
    return flag == "on"
