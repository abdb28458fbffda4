"""The frozen lower encoder's sentence vectors of a run, kept with its checkpoint.

Why: with ``--freeze-lower`` every document is embedded once and its vectors reused (the
trainer's ``vector_cache``). On 2 CPU cores embedding is almost all of the run: for
hmde-e5's stage 1, a step that meets new documents takes minutes, one that meets only cached
ones a second. Kept only in memory, a resumed run embedded everything again, and in other
batches than the uninterrupted run did, so its vectors (and so its result) differed in the
last bits. Saved beside the checkpoint (safetensors: tensors only, nothing to unpickle),
the cache is restored as it was at the checkpoint's step, and ``--resume`` is exact again.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from ..atomic import atomic_path
from ..errors import HmdeError

FILE = "frozen_vectors.safetensors"


def save_frozen_vectors(folder: Path, cache: dict[str, torch.Tensor]) -> None:
    with atomic_path(Path(folder) / FILE) as tmp:
        save_file({d: v.detach().contiguous().cpu() for d, v in cache.items()}, str(tmp), metadata={"format": "pt"})


def load_frozen_vectors(folder: Path, units_of, device: torch.device) -> dict[str, torch.Tensor]:
    """The saved cache, checked against the run's documents (``units_of(doc_id)``: its units); {} when none."""
    path = Path(folder) / FILE
    if not path.exists():
        return {}
    try:
        saved = load_file(str(path))
    except (OSError, SafetensorError) as exc:
        raise HmdeError(f"{path}: not readable ({exc}); remove it to embed the documents again") from None
    for doc_id, vectors in saved.items():
        if vectors.dim() != 2 or len(vectors) != len(units_of(doc_id)):
            raise HmdeError(f"{path}: the vectors of {doc_id!r} do not match its sentences in the pairs file; "
                            "remove the file to embed the documents again")
    return {d: v.to(device) for d, v in saved.items()}
