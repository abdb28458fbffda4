"""ONNX Runtime graphs of a model, made once into hmde's cache and trusted only after a check against PyTorch.

The fast default on CPUs (:mod:`hmde.encoders.backends`): the first load of a bundled model exports it
(:func:`hmde.export.onnx.export_onnx`) into ``$HMDE_CACHE/onnx-NAME-HASH-ortX.Y-vN`` and embeds a fixed set of
check texts (six languages of hmde's demo collection and nine other scripts) with both the PyTorch model and the
graphs. The folder is used only where every sentence vector and every document vector keeps a cosine of at
least :data:`MIN_COSINE` to PyTorch's; ``check.json`` records the measured minima. The folder's name holds
the model's content hash (:func:`hmde.evaluation.provenance.model_hash`) and ONNX Runtime's version, so a
changed model or runtime gets a new export, never a stale one. Written atomically under a lock: several
processes starting at once export once.

The int8 graph (``--backend onnx-int8``) is made from the fp32 one on first use: per-channel int8 weights with
int8 activations in every matrix product except the feed-forward down-projections, which stay float32, and, for a
model whose calibration ranges hmde ships (:mod:`hmde.export.smoothing`), the activations smoothed first (the
measured choice, docs/speed.md: min cosine 0.9994 against 0.995 unsmoothed and 0.982 for the whole graph, about
1.5x fp32's speed). It is checked against PyTorch on the same texts; where it keeps :data:`INT8_MIN_COSINE` and
was smoothed, ``auto`` runs it (:func:`trusted`).

Every file of the folder is recorded in ``check.json`` when it is made (its size and SHA-256) and checked against
that record before it is used (issue 94: a planted 7-node ``lower.int8.onnx``, or a check file cut to
``{"passed": true}``, was trusted; a truncated or deleted graph ended every later run): a file that differs, is
missing, or has no record is said in one line and the graphs are made again. Temporaries of a killed run are
removed under the folder's writer lock.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

from ..errors import ModelLoadError
from . import smoothing
from ..ground.digests import file_sha256

VERSION = 3  # the export's layout and check; a new one gets new folders (2: the encoder's languages recorded; 3: every
# file's size and SHA-256 recorded, and checked before use)
MIN_COSINE = 0.9999  # fp32 graphs against PyTorch, every check text (measured on hmde-e5: 0.99999958)
INT8_MIN_COSINE = 0.999  # the smoothed int8 graph against PyTorch, every check text (hmde-e5: see check.json)
CHECK_NAME = "check.json"

# Scripts the demo collection lacks: one sentence each, so that the check covers more than Latin and Cyrillic.
CHECK_SENTENCES = (
    "北京是中华人民共和国的首都。", "東京は日本の首都です。", "서울은 대한민국의 수도이다.",
    "القاهرة هي عاصمة مصر وأكبر مدنها.", "नई दिल्ली भारत की राजधानी है।", "ירושלים היא עיר הבירה של ישראל.",
    "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας.", "กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย",
    "Addis Ababa ni mji mkuu wa Ethiopia. አዲስ አበባ የኢትዮጵያ ዋና ከተማ ናት።",
)


INT8_GRAPH = "lower.int8.onnx"
_VERIFIED: dict = {}  # (file, size, mtime) -> its SHA-256 as this process read it (each file hashed once a process)


def ensure_export(name: str, int8: bool = False) -> tuple[Path, dict]:
    """The checked export of model ``name`` (a bundled name or an hmde folder) in hmde's cache, made on first
    use, and made again where its files differ from their record: ``(folder, check record)``. ``int8`` also makes
    (once) and checks its quantised lower graph."""
    folder = export_folder(name)
    record = _read_check(folder)
    problem = None if record is None else damage(folder, record.get("files"), skip=() if not int8 else ("lower.onnx",))
    if record is None or problem:
        if problem:
            _say_damaged(name, folder, problem)
        record = _make(name, folder)
    problem = _int8_problem(folder, record) if int8 else None
    if problem:
        if problem != "not made":
            _say_damaged(name, folder, problem)
        record = _make_int8(name, folder)
    return folder, record


# seconds to export, check and quantise a model's graphs on two idle cores: a fixed part and one per million parameters
# (measured: hmde-mini 8.4M 15.5 s, hmde-e5 122M 63.2 s with its folder built; docs/speed.md); said before a make
# starts, scaled by the cores there are
MAKE_FIXED_SECONDS, MAKE_SECONDS_PER_MPARAM = 10.0, 0.45
LOW_SPACE = 1 << 30  # bytes free under which a failed make is a full disk (hmde-e5's graphs: about 0.9 GB)


def _refuse_full_disk(name: str, folder: Path, exc: BaseException) -> None:
    """A make that failed on a disk with less than :data:`LOW_SPACE` free is said to be what it is (issue 94: ONNX read
    its own half-written graph back as "Wire format was corrupt")."""
    import shutil

    where = Path(folder)
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        free = shutil.disk_usage(where).free
    except OSError:
        return
    if free < LOW_SPACE:
        raise ModelLoadError(f"cannot write the ONNX graphs of {name} in hmde's cache folder {folder}: the disk is "
                             f"full ({free / 2 ** 20:,.0f} MB free; the graphs need about 1 GB): free space there, or "
                             "set HMDE_CACHE to a folder on another disk") from exc


def _say_damaged(name: str, folder: Path, problem: str) -> None:
    logging.getLogger(__name__).warning("hmde: the cached ONNX graphs of %s in %s do not match their record (%s): "
                                        "making them again", name, folder, problem)


def files_record(folder: Path, names) -> dict:
    """``{name: {"size", "sha256"}}`` of files of ``folder`` (names relative to it), as they are now."""
    return {n: {"size": (folder / n).stat().st_size, "sha256": file_sha256(folder / n)} for n in sorted(names)}


def _all_files(folder: Path) -> list[str]:
    return [str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.name != CHECK_NAME
            and not p.name.startswith(".") and not p.name.endswith("-inferred.onnx")]  # temporaries: not made files


def damage(folder: Path, files, skip=(), complete: bool = True) -> str | None:
    """What differs between ``folder`` and its record ``files`` (a file missing, of another size or digest, a file
    the record does not name where it names the ``complete`` folder, no record at all), or None; ``skip``: files not
    used this time."""
    if not isinstance(files, dict) or not files:
        return "no record of its files"
    for name in sorted(set(_all_files(folder)) - set(files) - {INT8_GRAPH}) if complete else ():
        return f"{name} is not one of the files made"
    for name, want in sorted(files.items()):
        if name in skip:
            continue
        path = folder / name
        try:
            st = path.stat()
        except OSError:
            return f"{name} is missing"
        if not isinstance(want, dict) or st.st_size != want.get("size"):
            return f"{name} has {st.st_size:,} bytes, {want.get('size') if isinstance(want, dict) else '?'} made"
        key = (str(path), st.st_size, st.st_mtime_ns, st.st_ino)
        if key not in _VERIFIED:
            _VERIFIED[key] = file_sha256(path)
        if _VERIFIED[key] != want.get("sha256"):
            return f"{name}'s SHA-256 differs from the one recorded when it was made"
    return None


def _int8_problem(folder: Path, record: dict) -> str | None:
    part = record.get("int8") or {}
    if part.get("form") != int8_form(folder):
        return "not made"
    return damage(folder, part.get("files"), complete=False)


def remove_dead_temporaries(folder: Path) -> None:
    """Call with the folder's writer lock held: every temporary in it is then a killed run's (the int8 graph's 150 MB,
    the smoothed graph's 470 MB, ONNX Runtime's ``-inferred`` copy, a check file's)."""
    for pattern in (".lower.int8.*.onnx.tmp", ".lower.smoothed.*.onnx", "*-inferred.onnx", ".check.*.json.tmp"):
        for path in folder.glob(pattern):
            path.unlink(missing_ok=True)


def export_folder(name: str) -> Path:
    """Where the export of ``name`` lives in hmde's cache (named by the model's content hash)."""
    import onnxruntime

    from ..encoders.registry import resolve_model_path
    from ..evaluation.provenance import model_hash
    from ..ground.cache import cache_root

    path = resolve_model_path(name)
    digest = model_hash(path) or "unhashed"
    runtime = ".".join(onnxruntime.__version__.split(".")[:2])
    return cache_root() / f"onnx-{path.name}-{digest[:16]}-ort{runtime}-v{VERSION}"


def trusted(record: dict, int8: bool = False) -> bool:
    """Whether a check record lets the graph stand in for PyTorch: the fp32 graphs where they passed; the int8
    one where it was smoothed and kept :data:`INT8_MIN_COSINE` (its vectors are a family of their own)."""
    if not int8:
        return bool(record.get("passed"))
    part = record.get("int8") or {}
    return bool(part.get("passed")) and part.get("form") == smoothing.FORM


def _digest(folder: Path) -> str:
    """The model's content hash (16 digits) that names its export ``folder`` (:func:`export_folder`)."""
    return folder.name.split("-")[-3]


def int8_ranges(folder: Path):
    """The calibration ranges hmde ships for the model exported to ``folder``, or None."""
    return smoothing.load_ranges(_digest(folder))


def int8_form(folder: Path) -> str:
    """The recipe of the int8 graph in ``folder``: smoothed where hmde ships the model's ranges, else plain."""
    return smoothing.FORM if smoothing.ranges_file(_digest(folder)).is_file() else "plain-v1"


def _read_check(folder: Path) -> dict | None:
    try:
        record = json.loads((folder / CHECK_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("version") == VERSION else None


def _make(name: str, folder: Path) -> dict:
    from ..encoders.hierarchical import HierarchicalEncoder
    from ..ground.atomic import atomic_dir
    from ..ground.locks import exclusive_writer
    from .onnx import OnnxHierarchicalEncoder, export_onnx

    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        with exclusive_writer(folder):
            record = _read_check(folder)  # another process made it while this one waited
            if record is not None and not damage(folder, record.get("files")):
                return record
            model = HierarchicalEncoder.from_pretrained(name, device="cpu")
            logging.getLogger(__name__).warning("making the ONNX graphs of %s in %s (once, about %s)", name, folder,
                                                make_estimate(model))
            began = time.monotonic()
            with atomic_dir(folder, lock=False) as tmp:
                export_onnx(model, tmp, lock=False)  # a temporary already: no locks beside it (they stayed for ever)
                record = {"version": VERSION, "model": str(name), **check_graphs(model, OnnxHierarchicalEncoder(tmp)),
                          "files": files_record(tmp, _all_files(tmp)), "made_s": round(time.monotonic() - began, 1)}
                (tmp / CHECK_NAME).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    except Exception as exc:  # noqa: BLE001 - a full disk comes back from ONNX as "Wire format was corrupt"
        _refuse_full_disk(name, folder.parent, exc)
        if not isinstance(exc, OSError):
            raise
        raise ModelLoadError(f"cannot write the ONNX graphs of {name} in hmde's cache folder {folder.parent}: {exc} "
                             "(set HMDE_CACHE to a writable folder; --backend torch needs no graphs, for every job "
                             "but one on an index of onnx-int8 vectors, which these graphs alone give)") from exc
    return record


def make_estimate(model) -> str:
    """About how long making ``model``'s graphs (fp32 and int8, checked) takes on an idle machine here: two cores'
    measured time for its parameters, scaled by the cores this process may use."""
    parameters = sum(p.numel() for p in model.parameters()) / 1e6
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 2)
    seconds = (MAKE_FIXED_SECONDS + MAKE_SECONDS_PER_MPARAM * parameters) * 2 / max(1, min(cores, 8))
    return (f"{seconds:,.0f} s" if seconds < 120 else f"{seconds / 60:,.0f} min") + " on an idle machine"


def _make_int8(name: str, folder: Path) -> dict:
    try:
        return _int8_made(name, folder)
    except Exception as exc:  # noqa: BLE001 - the only graphs that give an int8 index's vectors (PyTorch: fp32's)
        _refuse_full_disk(name, folder, exc)
        if not isinstance(exc, OSError):
            raise
        raise ModelLoadError(f"cannot write the int8 graph of {name} in hmde's cache folder {folder}: {exc} (set "
                             "HMDE_CACHE to a writable folder; an index of onnx-int8 vectors is searched and added "
                             "to with this graph alone)") from exc


def _int8_made(name: str, folder: Path) -> dict:
    import tempfile

    from ..encoders.hierarchical import HierarchicalEncoder
    from ..ground.locks import exclusive_writer
    from .onnx import OnnxHierarchicalEncoder, quantize_lower

    with exclusive_writer(folder):
        remove_dead_temporaries(folder)
        record = _read_check(folder) or {}
        form = int8_form(folder)
        if not _int8_problem(folder, record):
            return record
        graph = folder / INT8_GRAPH
        fd, tmp = tempfile.mkstemp(prefix=".lower.int8.", suffix=".onnx.tmp", dir=folder)
        os.close(fd)
        try:
            quantize_lower(folder / "lower.onnx", Path(tmp), int8_ranges(folder))
            os.replace(tmp, graph)
        finally:
            Path(tmp).unlink(missing_ok=True)
        model = HierarchicalEncoder.from_pretrained(name, device="cpu")
        record["int8"] = {**check_graphs(model, OnnxHierarchicalEncoder(folder, int8=True), INT8_MIN_COSINE),
                          "form": form, "files": files_record(folder, [INT8_GRAPH])}
        fd, tmp = tempfile.mkstemp(prefix=".check.", suffix=".json.tmp", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(record, indent=2) + "\n")
        os.replace(tmp, folder / CHECK_NAME)
    return record


def check_texts() -> tuple[list[str], list[str], list[str]]:
    """The check's documents, their languages (the demo collection's six) and single sentences of nine scripts."""
    demo = Path(__file__).resolve().parent.parent / "demo" / "collection.jsonl"
    rows = [json.loads(line) for line in demo.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r["text"] for r in rows], [r["lang"] for r in rows], list(CHECK_SENTENCES)


def check_vectors(model) -> dict:
    """The check texts' vectors under ``model``: as queries, as document sentences, and documents (the upper encoder,
    method hmde)."""
    import torch

    from ..text.segmentation import split_sentences

    documents, langs, extra = check_texts()
    sentences = [s for text, lang in zip(documents, langs) for s in split_sentences(text, lang)] + extra
    with torch.inference_mode():
        return {"queries": model.lower.encode(sentences, prompt_name="query"),
                "sentences": model.lower.encode(sentences),
                "documents": model.encode_documents(documents, langs=langs)}


def lowest_cosines(reference: dict, other: dict) -> dict:
    """The lowest cosine per kind between two :func:`check_vectors`, rounded to 7 places."""
    import numpy as np

    def lowest(a, b) -> float:
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        a /= np.linalg.norm(a, axis=1, keepdims=True)
        b /= np.linalg.norm(b, axis=1, keepdims=True)
        return float((a * b).sum(1).min())

    return {k: round(lowest(reference[k], other[k]), 7) for k in reference}


def check_graphs(model, graphs, threshold: float = MIN_COSINE) -> dict:
    """The lowest cosines between PyTorch's vectors and the graphs': queries, document sentences, documents
    (the upper encoder, method hmde), and whether they all reach ``threshold``."""
    import onnxruntime
    import torch

    cosines = lowest_cosines(check_vectors(model), check_vectors(graphs))
    return {"min_cosine": cosines, "threshold": threshold, "passed": min(cosines.values()) >= threshold,
            "texts": check_text_count(), "onnxruntime": onnxruntime.__version__,
            "torch": torch.__version__.split("+")[0]}


def check_text_count() -> int:
    """How many texts :func:`check_vectors` embeds (each sentence once per kind counted once, and the documents)."""
    from ..text.segmentation import split_sentences

    documents, langs, extra = check_texts()
    return sum(len(split_sentences(t, lang)) for t, lang in zip(documents, langs)) + len(extra) + len(documents)


def describe(record: dict, int8: bool = False) -> str:
    """One line on a check: the lowest cosine and the threshold."""
    part = record.get("int8", {}) if int8 else record
    low = min((part.get("min_cosine") or {"?": float("nan")}).values())
    threshold = part.get("threshold", INT8_MIN_COSINE if int8 else MIN_COSINE)
    return f"min cosine {low:.5f} to PyTorch over {part.get('texts', '?')} check texts (threshold {threshold})"
