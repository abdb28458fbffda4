"""Read the JSON file that names a saved folder's format (LAWDR statistics, ONNX exports)."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import ModelLoadError


def read_tagged_json(path: str | Path, expected_format: str | tuple[str, ...], missing: str) -> dict:
    """The JSON at ``path``, whose ``format`` must be ``expected_format`` (or one of them).

    ``missing`` says what the folder should have held, for the error when the file is absent.
    """
    path = Path(path)
    if not path.exists():
        raise ModelLoadError(f"'{path.parent}' holds no {missing} (no {path.name})")
    meta = json.loads(path.read_text(encoding="utf-8"))
    accepted = (expected_format,) if isinstance(expected_format, str) else expected_format
    if meta.get("format") not in accepted:
        raise ModelLoadError(f"{path}: format {meta.get('format')!r}, expected {accepted[0]!r}")
    return meta
