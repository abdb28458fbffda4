"""What a result JSON records so that its number can be traced and reproduced.

Every result names the model (path and a hash of its weight files), the document
method, each data file with its SHA-256, the seed, the hmde version and the time.
"""

from __future__ import annotations

import hashlib
import json
import platform
import time
from pathlib import Path
from typing import Iterable

from ..version import __version__
from ..ground.atomic import write_text_atomic
from ..encoders.model_folder import is_hmde_folder
from ..ground.digests import file_sha256

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".json", ".txt", ".model", ".npz", ".onnx")
# what hmde.st_router writes at an hmde folder's root: derived from the other files, so a folder keeps
# the hash it had before they existed (indexes built with it still accept --add)
ROUTER_FILES = ("modules.json", "router_config.json", "config_sentence_transformers.json")


def model_hash(path: str | Path | None) -> str | None:
    """One SHA-256 over the model folder's weight, config and vocabulary files (names included)."""
    if path is None or not Path(path).exists():
        return None
    path = Path(path)
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in WEIGHT_SUFFIXES
                                                 and not any(part.startswith(".") for part in p.relative_to(path).parts))
    if path.is_dir() and is_hmde_folder(path):  # its sentence-transformers files are derived from the rest
        files = [p for p in files if p.parent != path or p.name not in ROUTER_FILES]
    h = hashlib.sha256()
    for p in files:
        h.update(str(p.relative_to(path) if path.is_dir() else p.name).encode())
        h.update(file_sha256(p).encode())
    return h.hexdigest()


def data_record(paths: Iterable[str | Path]) -> list[dict]:
    return [{"path": str(p), "sha256": file_sha256(p)} for p in sorted({str(p) for p in paths})]


def result_record(protocol: str, model: str, model_path: str | None, method: str, data_files: Iterable[str | Path],
                  metrics: dict, seed: int | None = None, settings: dict | None = None) -> dict:
    return {
        "protocol": protocol,
        "model": model,
        "model_path": model_path,
        "model_sha256": model_hash(model_path),
        "method": method,
        "data": data_record(data_files),
        "seed": seed,
        "settings": settings or {},
        "hmde_version": __version__,
        "python": platform.python_version(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "metrics": metrics,
    }


def write_result(path: str | Path, record: dict) -> None:
    write_text_atomic(path, json.dumps(record, indent=2, ensure_ascii=False) + "\n")
