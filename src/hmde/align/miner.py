"""``hmde mine`` and :func:`hmde.mine`: two collections of sentences in, their translation pairs out (issue 79).

Inputs, each side: plain text (one sentence a line; a pair names its 0-based line), JSONL (one object a line with
``text`` and an optional ``id``), or an hmde representation Parquet file (``hmde encode -o FILE.parquet``: every
document's sentences with their vectors, so that nothing is embedded twice; a sentence's id is ``doc_id#k``). Bad
input is one line naming the file, line and field, before any model loads. The sentences are embedded by the model's
sentence encoder a batch at a time into a memory-mapped file beside the output (removed at the end), mined
(:mod:`hmde.align.mining`), and the pairs written in one go, through a temporary file (a kill leaves no partial
output): JSONL (one object a pair: ``src`` and ``tgt`` line numbers, ``score``, both texts, and both ids where the
input had them), a two-column TSV bitext, Moses' two files, or TMX (:mod:`hmde.io.alignments`).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import HmdeError, InputError
from .mining import MiningOptions, mine_vectors, select_pairs

FORMATS = ("jsonl", "tsv", "moses", "tmx")


@dataclass
class Side:
    """One side's sentences: their line numbers (0-based), ids where the input names them, texts, and vectors where
    the input holds them."""

    path: str
    lines: list[int]
    ids: list[str] | None
    texts: list[str]
    vectors: np.ndarray | None = None
    backend: str = "torch"  # the family of the vectors held (hmde.encoders.backends.recorded)
    model: str | None = None  # the model that made the vectors held



MINE_FOLDER = ".hmde-mine-"  # the vectors' working folder beside the output: .hmde-mine-XXXXXXXX.HOST-PID.tmp

def read_side(path: str | Path) -> Side:
    """A side's sentences, checked (one line naming the file, line and field)."""
    from ..io.documents import open_text, surrogate_at
    from ..io.representation_parquet import read_batches, read_info

    path = str(path)
    if not Path(path).is_file():
        raise InputError("no such file", path)
    name = path.lower().removesuffix(".gz")
    if name.endswith(".parquet"):
        info = read_info(path)
        if info is None:
            raise InputError("not an hmde representation file (hmde encode -o FILE.parquet writes one); give the "
                             "sentences as .txt or .jsonl", path)
        ids, texts, vectors = [], [], []
        for doc_ids, _, _, _, sentences, sentence_vectors, _ in read_batches(path, info):
            for doc_id, units, unit_vectors in zip(doc_ids, sentences, sentence_vectors):
                for k, (unit, vector) in enumerate(zip(units, unit_vectors)):
                    ids.append(f"{doc_id}#{k}")
                    texts.append(unit)
                    vectors.append(vector)
        if not texts:
            raise InputError("holds no sentence", path)
        return Side(path, list(range(len(texts))), ids, texts, np.asarray(vectors, np.float32).reshape(len(texts), -1),
                    info.backend, info.model or None)
    lines, ids, texts, jsonl = [], [], [], name.endswith(".jsonl") or name.endswith(".json")
    with open_text(path) as f:
        for n, raw in enumerate(f):
            raw = raw.rstrip("\n").rstrip("\r")
            if jsonl:
                if not raw.strip():
                    continue
                try:
                    obj = json.loads(raw)
                except json.JSONDecodeError as exc:
                    raise InputError(f"not JSON ({exc.msg})", path, n + 1) from None
                if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
                    raise InputError("needs a string 'text'", path, n + 1, "text")
                text = obj["text"]
                ids.append(str(obj.get("id", obj.get("doc_id", n))))
            else:
                text = raw
            bad = surrogate_at(text)
            if bad is not None:
                raise InputError(f"holds a lone surrogate (U+{ord(text[bad]):04X}): not text", path, n + 1, "text")
            if text.strip():
                lines.append(n)
                texts.append(text.strip())
    if not texts:
        raise InputError("holds no sentence", path)
    return Side(path, lines, ids if jsonl else None, texts)


def embed_side(side: Side, encode: Callable, folder: Path, name: str, batch_size: int, progress) -> np.ndarray:
    """The side's vectors: the input's own, or embedded ``batch_size`` at a time into ``folder/name.npy`` (memory
    mapped: memory holds one batch)."""
    from ..io.growing_npy import GrowingNpy

    if side.vectors is not None:
        return side.vectors
    first = np.asarray(encode(side.texts[:batch_size]), np.float32)
    with GrowingNpy(folder / f"{name}.npy", first.shape[1]) as out:
        out.append(first)
        progress(len(first))
        for start in range(batch_size, len(side.texts), batch_size):
            part = np.asarray(encode(side.texts[start:start + batch_size]), np.float32)
            out.append(part)
            progress(len(part))
    return np.load(folder / f"{name}.npy", mmap_mode="r")


def in_their_languages(kept: list, sides, src_lang: str | None, tgt_lang: str | None) -> list:
    """The pairs whose sides hmde's language identifier does not read as another language than the one given (a
    side it is unsure of is kept)."""
    from ..text.coverage import language_code
    from ..text.language_id import detect_languages

    for side, lang in enumerate((src_lang, tgt_lang)):
        if lang and kept:
            found = detect_languages([sides[side].texts[p[side]] for p in kept])
            kept = [p for p, got in zip(kept, found) if got is None or got == language_code(lang)]
    return kept


def pair_record(src: Side, tgt: Side, i: int, j: int, score: float) -> dict:
    record = {"src": src.lines[i], "tgt": tgt.lines[j], "score": round(score, 6), "src_text": src.texts[i],
              "tgt_text": tgt.texts[j]}
    if src.ids is not None:
        record["src_id"] = src.ids[i]
    if tgt.ids is not None:
        record["tgt_id"] = tgt.ids[j]
    return record


def write_pairs(path: str | Path, fmt: str, pairs: list[dict], src_lang: str | None, tgt_lang: str | None) -> list:
    """The pairs in ``fmt`` at ``path`` (Moses: its two files), each file through a temporary one."""
    from ..io.alignments import write_alignment_files

    if fmt == "jsonl":
        records = [json.dumps(p, ensure_ascii=False) + "\n" for p in pairs]
    elif fmt == "tsv":
        records = [f"{' '.join(p['src_text'].split())}\t{' '.join(p['tgt_text'].split())}\n" for p in pairs]
    else:
        records = [(" ".join(p["src_text"].split()), " ".join(p["tgt_text"].split()), p["score"]) for p in pairs]
    return write_alignment_files(path, fmt, records, src_lang, tgt_lang)


class MinedPairs(list):
    """What :func:`mine` returns: its pairs (a list of dicts, best first), and what mined them: ``model``, the
    model that embedded (or made a Parquet side's vectors), and ``options``, the :class:`MiningOptions` used (a
    threshold or cosine floor left None filled in with the model's recorded one)."""

    def __init__(self, pairs, model: str, options: MiningOptions):
        super().__init__(pairs)
        self.model, self.options = model, options


def mining_model(model: str | None, sides) -> str:
    """The model that embeds: ``model``, else the one that made a Parquet side's vectors, else
    :data:`~hmde.encoders.registry.MINING_MODEL`. Vectors of two models are two spaces: a side made by another model
    than the one named (or than the other side's) is refused in one line."""
    from ..encoders.registry import MINING_MODEL

    for side in sides:
        if side.model is None:
            continue
        if model is None:
            model = side.model
        elif not _same_model(model, side.model):
            raise InputError(f"its vectors were made by {side.model}, not {model}: vectors of two models are not "
                             f"comparable (name {side.model}, or give the sentences as text)", side.path)
    return model or MINING_MODEL


def _same_model(a: str, b: str) -> bool:
    return a == b or Path(a).expanduser().resolve() == Path(b).expanduser().resolve()


def mine(src, tgt, output: str | Path | None = None, model: str | None = None, format: str = "jsonl",
         src_lang: str | None = None, tgt_lang: str | None = None, device: str = "auto", batch_size: int = 64,
         options: MiningOptions | None = None, progress: bool = False, loaded=None) -> MinedPairs:
    """The translation pairs of two collections of sentences (paths of .txt, .jsonl or hmde representation .parquet
    files), best first, each ``{"src", "tgt", "score", "src_text", "tgt_text"}`` (and the ids where the inputs have
    them), with the model and options that mined them (:class:`MinedPairs`); written to ``output`` in ``format``
    where given. ``model``: the sentence encoder (None:
    :func:`mining_model`); ``loaded``: ``(kind, model)`` of ``model`` loaded already. ``options`` None, or its
    threshold or min_cosine None: the ones recorded for the model (:mod:`hmde.align.mining_threshold`)."""
    from tqdm.auto import tqdm

    from ..encoders.devices import pick_device
    from ..encoders.backends import FP32, same_vectors
    from ..encoders.model_loading import load_model

    if format not in FORMATS:
        raise HmdeError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
    options = (options or MiningOptions(threshold=None, min_cosine=None)).check()
    if loaded is not None and model is None:
        raise HmdeError("a model passed loaded needs its name too (model=...): the threshold and cosine floor are "
                        "the ones measured for it")
    sides = read_side(src), read_side(tgt)
    held = [s for s in sides if s.vectors is not None]
    if len(held) == 2 and not same_vectors(held[0].backend, held[1].backend):  # mined together without a word
        raise HmdeError(f"{held[0].path} holds {held[0].backend} vectors and {held[1].path} {held[1].backend} ones: "
                        "int8 and fp32 vectors are two families whose cosines do not compare; encode both sides with "
                        "one backend")
    model = mining_model(model, sides)
    from .mining_threshold import resolve

    options = resolve(options, model)  # a threshold or floor left None: the model's measured one
    if loaded is None and any(s.vectors is None for s in sides):
        # fp32 vectors (the mining table, docs/mining.md, was measured with them), or the family of the vectors
        # one side holds, so that both sides are alike
        held = {s.backend for s in sides if s.vectors is not None}
        loaded = load_model(model, pick_device(device),
                            backend="onnx-int8" if held == {"onnx-int8"} else FP32)
    lower = None if loaded is None else (loaded[1].lower if loaded[0] == "hmde" else loaded[1])
    from ..ground.stale_files import remove_dead_writers_folders, writer_tag

    parent = Path(output).absolute().parent if output else Path(tempfile.gettempdir())
    remove_dead_writers_folders(parent, MINE_FOLDER)  # what a killed run left (it names its process)
    folder = Path(tempfile.mkdtemp(prefix=MINE_FOLDER, suffix=f"{writer_tag()}.tmp", dir=parent))
    try:
        total = sum(len(s.texts) for s in sides if s.vectors is None) + sum(len(s.texts) for s in sides)
        with tqdm(total=total, desc="mining", unit="sentence", disable=not progress) as bar:
            vectors = [embed_side(s, lambda texts: lower.encode(list(texts)), folder, name, batch_size, bar.update)
                       for s, name in zip(sides, ("src", "tgt"))]
            found = mine_vectors(vectors[0], vectors[1], options, bar.update)
        kept = in_their_languages(select_pairs(*found, sides[0].texts, sides[1].texts, options), sides, src_lang,
                                  tgt_lang)
        del vectors  # the memory maps close before their folder goes
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    pairs = [pair_record(sides[0], sides[1], i, j, s) for i, j, s in kept]
    if output is not None:
        write_pairs(output, format, pairs, src_lang, tgt_lang)
    return MinedPairs(pairs, model, options)
