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

from ..ground.atomic import atomic_path
from ..errors import HmdeError

FILE = "frozen_vectors.safetensors"


def save_frozen_vectors(folder: Path, cache: dict[str, torch.Tensor]) -> None:
    with atomic_path(Path(folder) / FILE) as tmp:
        save_file({d: v.detach().contiguous().cpu() for d, v in cache.items()}, str(tmp), metadata={"format": "pt"})


def load_frozen_vectors(folder: Path, units_of, device: torch.device, path: Path | None = None) -> dict[str, torch.Tensor]:
    """The saved cache, checked against the run's documents (``units_of(doc_id)``: its units); {} when none.
    ``path``: another run's file instead of ``folder``'s (``hmde train --frozen-vectors``)."""
    path = Path(path) if path is not None else Path(folder) / FILE
    if not path.exists():
        return {}
    try:
        saved = load_file(str(path))
    except (OSError, SafetensorError) as exc:
        raise HmdeError(f"{path}: not readable ({exc}); remove it to embed the documents again") from None
    kept = {}
    for doc_id, vectors in saved.items():
        try:
            units = units_of(doc_id)
        except KeyError:  # another run's document (--frozen-vectors from a run on other pairs): unused
            continue
        if vectors.dim() != 2 or len(vectors) != len(units):
            raise HmdeError(f"{path}: the vectors of {doc_id!r} do not match its sentences in the pairs file; "
                            "remove the file to embed the documents again")
        kept[doc_id] = vectors.to(device)
    return kept


# bf16 autocast (hmde train's default where the device has it: GPUs, CPUs with AVX512-BF16) moves e5's
# sentence-vector components by up to 7.6e-4 between two batchings of the same sentences, and fp32 vectors
# differ from bf16 ones by as much (7.8e-4); another encoder moves them by far more, even e5 after hmde-e5's
# joint stage (60 steps at lr 1e-5: 0.04-0.06). Measured on hmde recipe e5's stage-1 vectors.
SEED_ATOL = 5e-3


def check_seed_vectors(path: Path, cache: dict[str, torch.Tensor], embed, sample: int = 2,
                       atol: float = SEED_ATOL) -> None:
    """Another run's vectors are only this run's if its lower encoder is this one: ``embed(doc_ids)``
    embeds ``sample`` of them again and they must agree to ``atol``: batching and bf16 move the last
    bits (a seed made in bf16 and a run in fp32, or the reverse, use the same encoder), another
    encoder moves far more. The tolerance was 1e-4, which refused every bf16 stage 1's own vectors."""
    ids = sorted(cache)[:sample]
    for doc_id, fresh in zip(ids, embed(ids)):
        gap = float((fresh.float().cpu() - cache[doc_id].float().cpu()).abs().max())
        if gap > atol:
            raise HmdeError(f"{path}: the vectors of {doc_id!r} differ from this lower encoder's by {gap:.2g}: they "
                            "were made by another encoder (or other lengths); drop --frozen-vectors")
