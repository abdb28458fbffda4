"""Mixed precision: one place that turns "bf16 or not" into an autocast context."""

from __future__ import annotations

import contextlib

import torch


def autocast_context(device_type: str, dtype: torch.dtype | None):
    """``torch.autocast`` for ``dtype`` on ``device_type``, or a no-op context when ``dtype`` is None."""
    return torch.autocast(device_type, dtype=dtype) if dtype is not None else contextlib.nullcontext()
