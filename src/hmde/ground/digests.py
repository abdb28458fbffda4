"""A file's SHA-256, read a block at a time (the one digest of hmde's files: models' provenance, cached graphs'
checks, USE-m's weights, a synced folder's files)."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_sha256(path: str | Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()
