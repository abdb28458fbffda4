"""What marks a folder as an hmde ONNX export, readable without importing PyTorch or ONNX Runtime (the
command line asks it before any model loads)."""

from __future__ import annotations

import json
from pathlib import Path

FORMAT = "hmde-onnx/1"


def is_onnx_export(path: str | Path) -> bool:
    """True for a folder written by :func:`hmde.export.onnx.export_onnx` (its config.json says so)."""
    config = Path(path) / "config.json"
    try:
        return json.loads(config.read_text(encoding="utf-8")).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False
