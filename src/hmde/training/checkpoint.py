"""Atomic training checkpoints and JSONL logs, so that ``--resume`` continues exactly.

A checkpoint holds model, optimizer and scheduler state, the step, the run's
configuration and the RNG states; trainers derive every random choice (batch order,
masking, dropout) from (seed, step), so restoring the step restores the data position.

It is read with ``torch.load(weights_only=True)``: tensors and plain containers only, so
a checkpoint folder from elsewhere cannot run code (a full unpickle could). The NumPy and
Python RNG states are therefore stored as tensors and plain numbers.
"""

from __future__ import annotations

import json
import pickle
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..ground.atomic import atomic_path
from ..errors import HmdeError

STATE_FILE = "trainer_state.pt"


def save_checkpoint(folder: str | Path, state: dict[str, Any]) -> Path:
    """Write ``state`` atomically; the temporaries of a writer killed before (``.trainer_state.pt.*.tmp``) go."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob(f".{STATE_FILE}.*.tmp"):
        stale.unlink(missing_ok=True)
    state = dict(state)
    state["rng"] = rng_state()
    with atomic_path(folder / STATE_FILE) as tmp:
        torch.save(state, tmp)
    return folder / STATE_FILE


def load_checkpoint(folder: str | Path) -> dict[str, Any]:
    path = Path(folder) / STATE_FILE
    if not path.exists():
        raise HmdeError(f"--resume: no checkpoint at {path}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise HmdeError(f"{path}: refused: it holds objects other than tensors and plain values, which hmde does "
                        "not unpickle (a checkpoint from an older hmde or from elsewhere; start the run afresh)") from exc
    except (RuntimeError, EOFError, OSError) as exc:
        raise HmdeError(f"{path}: not a readable checkpoint ({exc})") from exc
    if not isinstance(state, dict):
        raise HmdeError(f"{path}: not an hmde checkpoint")
    rng = state.get("rng")
    if rng:
        set_rng_state(rng)
    return state


def rng_state() -> dict[str, Any]:
    """torch, NumPy and Python RNG states as tensors and plain values (loadable with weights_only)."""
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    return {"torch": torch.get_rng_state(),
            "numpy": {"name": name, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                      "has_gauss": int(has_gauss), "gauss": float(gauss)},
            "python": {"version": version, "state": torch.tensor(internal, dtype=torch.int64),
                       "gauss_next": gauss_next}}


def set_rng_state(rng: dict[str, Any]) -> None:
    torch.set_rng_state(rng["torch"])
    n = rng["numpy"]
    np.random.set_state((n["name"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["gauss"]))
    py = rng["python"]
    random.setstate((py["version"], tuple(int(x) for x in py["state"].tolist()), py["gauss_next"]))


def seed_step(seed: int, step: int, part: int | None = None) -> None:
    """Seed every generator from (seed, step): dropout and sampling are reproducible per step.

    ``part`` (a micro-batch's index within the step) gives each micro-batch its own seed, so
    its dropout does not depend on which process computes it."""
    value = (seed * 1_000_003 + step) % (2**31 - 1)
    if part is not None:
        value = int(np.random.SeedSequence([seed, step, part]).generate_state(1)[0]) % (2**31 - 1)
    torch.manual_seed(value)
    np.random.seed(value)
    random.seed(value)


def trim_log(path: str | Path, step: int) -> None:
    """Drop the records of steps after ``step`` (the checkpoint a run resumes from): a run killed after
    logging step 20 but checkpointed at step 10 logs steps 11-20 again when it resumes."""
    from ..ground.atomic import write_text_atomic

    path = Path(path)
    if not path.is_file():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by the kill
        if not (isinstance(record, dict) and isinstance(record.get("step"), int) and record["step"] > step):
            kept.append(line if line.endswith("\n") else line + "\n")
    write_text_atomic(path, "".join(kept))


class JsonlLog:
    """Append-only JSONL log; a resumed run appends to the same file (trimmed to its checkpoint first)."""

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
