"""A persistent cache of sentence vectors, shared by every run on the same lower-encoder weights.

Why: an evaluation compares many document methods on one lower encoder (``mean``, ``lawdr``, HMDE
with that encoder frozen, its Table 3 control...). Each run embeds the same sentences again, and
on CPUs the lower encoder is nearly all of the cost. With ``hmde eval --sentence-cache DIR`` the
second and later runs read the vectors instead (e5 on 2 cores: PUD's 21,000 sentences are about
10 minutes of the 12 a row costs).

Keys are exact: a vector is reused only for the same token ids (the prompt included), the same
weights (a hash of every tensor and of the modules' configuration, so a fine-tuned encoder gets
its own entries), the same device type and the same precision. A cached vector can differ from a
fresh one in the last float bits (sentences are batched with other sentences), never more.

Layout: ``DIR/<weights hash>-<device>-<precision>/shard-*.npy``, each a structured array of
(16-byte key, float32 vector), written to a temporary file and renamed, so concurrent runs and
runs cut off mid-write never leave a half shard; nothing is pickled.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import uuid
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np
import torch

from ..ground.atomic import save_npy_atomic
from ..errors import HmdeError

if TYPE_CHECKING:
    from .sentence_encoder import SentenceEncoder

KEY_BYTES = 16
FLUSH_ROWS = 8192  # new vectors kept in memory before a shard is written


def ids_key(ids: Sequence[int]) -> bytes:
    return hashlib.blake2b(np.asarray(ids, dtype=np.int64).tobytes(), digest_size=KEY_BYTES).digest()


def weights_fingerprint(module: torch.nn.Module) -> str:
    """A hash of the modules' configuration (their repr: pooling mode, normalisation, lengths) and
    of every tensor of their state dict, names, dtypes and shapes included."""
    h = hashlib.blake2b(digest_size=16)
    h.update(repr(module).encode())
    for name, tensor in module.state_dict().items():
        t = tensor.detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def _row_dtype(dim: int) -> np.dtype:
    return np.dtype([("key", f"V{KEY_BYTES}"), ("vector", "<f4", (dim,))])


class _Partition:
    """The vectors of one (weights, device, precision), loaded from its shards on first use."""

    def __init__(self, folder: Path, dim: int):
        self.folder, self.dim = folder, dim
        self.index: dict[bytes, int] = {}
        self.blocks: list[np.ndarray] = []
        self.pending: list[np.ndarray] = []
        self.offset = 0
        for shard in sorted(folder.glob("shard-*.npy")) if folder.is_dir() else []:
            self._add(self._read(shard))

    def _read(self, shard: Path) -> np.ndarray:
        try:
            rows = np.load(shard, allow_pickle=False)
        except (ValueError, OSError) as e:
            raise HmdeError(f"{shard}: not a sentence-cache shard ({e}); delete it or point --sentence-cache "
                            "elsewhere") from e
        if rows.dtype != _row_dtype(self.dim) or rows.ndim != 1:
            raise HmdeError(f"{shard}: rows of {rows.dtype} (ndim {rows.ndim}), expected keys and {self.dim}-d "
                            "float32 vectors; delete it or point --sentence-cache elsewhere")
        return rows

    def _add(self, rows: np.ndarray) -> None:
        for i, key in enumerate(rows["key"].tolist()):
            self.index.setdefault(bytes(key), self.offset + i)
        self.blocks.append(rows["vector"])
        self.offset += len(rows)

    def vectors(self, positions: list[int]) -> np.ndarray:
        if len(self.blocks) > 1:
            self.blocks = [np.concatenate(self.blocks)]
        return self.blocks[0][positions]

    def put(self, keys: list[bytes], vectors: np.ndarray) -> None:
        rows = np.empty(len(keys), dtype=_row_dtype(self.dim))
        rows["key"] = np.frombuffer(b"".join(keys), dtype=f"V{KEY_BYTES}")
        rows["vector"] = vectors
        self._add(rows)
        self.pending.append(rows)
        if sum(len(p) for p in self.pending) >= FLUSH_ROWS:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        rows = np.concatenate(self.pending)
        self.pending = []
        save_npy_atomic(self.folder / f"shard-{os.getpid()}-{uuid.uuid4().hex[:12]}.npy", rows)


class SentenceVectorCache:
    """Sentence vectors by (weights, device, precision, token ids), in ``folder``.

    Attach it with :meth:`hmde.encoders.sentence_encoder.SentenceEncoder.use_vector_cache`; inference
    (no gradients, eval mode) then embeds only ids it has not seen. New vectors are written every
    :data:`FLUSH_ROWS` rows and when the process exits (or on :meth:`flush`).
    """

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        if self.folder.exists() and not self.folder.is_dir():
            raise HmdeError(f"--sentence-cache {self.folder}: exists and is not a folder")
        self._partitions: dict[str, _Partition] = {}
        self._fingerprints: dict[int, tuple[tuple, str]] = {}
        self.hits = self.misses = 0
        ref = weakref.ref(self)
        atexit.register(lambda: (c := ref()) is not None and c.flush())

    def _partition(self, encoder: "SentenceEncoder", autocast_dtype: torch.dtype | None) -> _Partition:
        versions = tuple(p._version for p in encoder.model.parameters())
        known = self._fingerprints.get(id(encoder.model))
        if known is None or known[0] != versions:
            known = (versions, weights_fingerprint(encoder.model))
            self._fingerprints[id(encoder.model)] = known
        precision = str(autocast_dtype).removeprefix("torch.") if autocast_dtype is not None else "float32"
        name = f"{known[1]}-{encoder.device.type}-{precision}"
        if name not in self._partitions:
            self._partitions[name] = _Partition(self.folder / name, encoder.dim)
        return self._partitions[name]

    def embed_ids(self, encoder: "SentenceEncoder", ids: Sequence[Sequence[int]], embed_missing,
                  autocast_dtype: torch.dtype | None) -> torch.Tensor:
        """Vectors of ``ids`` in order: cached ones read, the rest from ``embed_missing(ids)`` and kept."""
        part = self._partition(encoder, autocast_dtype)
        keys = [ids_key(i) for i in ids]
        out = np.empty((len(ids), encoder.dim), dtype=np.float32)
        found = [(k, part.index[key]) for k, key in enumerate(keys) if key in part.index]
        if found:
            out[[k for k, _ in found]] = part.vectors([p for _, p in found])
        todo = sorted({key: k for k, key in enumerate(keys) if key not in part.index}.values())
        if todo:
            fresh = embed_missing([ids[k] for k in todo]).float().cpu().numpy()
            part.put([keys[k] for k in todo], fresh)
            new = {keys[k]: row for k, row in zip(todo, fresh)}
            for k, key in enumerate(keys):
                if key in new:
                    out[k] = new[key]
        self.hits += len(found)
        self.misses += len(todo)
        return torch.from_numpy(out).to(encoder.device)

    def flush(self) -> None:
        for part in self._partitions.values():
            part.flush()


def attach_vector_cache(model, folder: str | os.PathLike | None) -> SentenceVectorCache | None:
    """A cache in ``folder`` attached to ``model``'s lower encoder, or to ``model`` when it is a
    sentence encoder (None: none); encoders that run elsewhere than PyTorch (an ONNX export) embed
    as always."""
    lower = getattr(model, "lower", model)
    if not folder or not hasattr(lower, "use_vector_cache"):
        return None
    cache = SentenceVectorCache(folder)
    lower.use_vector_cache(cache)
    return cache
