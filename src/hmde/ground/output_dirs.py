"""Checks on a folder that hmde is about to replace, made before any expensive work.

hmde writes an index or an export into a temporary folder and swaps it in whole
(:func:`hmde.ground.atomic.atomic_dir`), which replaces what was there. So a folder may only be
replaced when it is empty, or when it is what hmde writes there and the user said
``--overwrite``; a folder holding anything else is never touched.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import HmdeError


def _json_field(path: Path, field: str):
    try:
        return json.loads(path.read_text(encoding="utf-8")).get(field)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        return None


def is_hmde_index(path: Path) -> bool:
    """An index of hmde's own files, or hmde's record of an index stored in Milvus (``store``)."""
    return (path / "index.json").is_file() and ((path / "vectors.faiss").exists()
                                                 or _json_field(path / "index.json", "store") == "milvus")


def is_longformer_folder(path: Path) -> bool:
    """A folder written by ``hmde longformer convert`` or ``mlm``: a Longformer (sentence-transformers) folder."""
    return _json_field(path / "config.json", "model_type") == "longformer"


def is_onnx_export(path: Path) -> bool:
    from ..export.folder import FORMAT

    return _json_field(path / "config.json", "format") == FORMAT


def is_hmde_vector_file(path: Path) -> bool:
    """A file ``hmde encode`` writes: ``OUT.npy`` beside its ``OUT.ids.txt``, or a Parquet file with hmde's
    representation metadata."""
    if path.suffix == ".npy":
        return path.with_suffix(".ids.txt").is_file()
    if path.suffix == ".parquet":
        from ..io.representation_parquet import read_info

        return read_info(path) is not None
    return False


def check_replaceable_file(path: str | os.PathLike, overwrite: bool) -> None:
    """An output file is replaced when it is absent, hmde's own output (a rerun refreshes it), or with
    ``--overwrite``; a file of anyone else's (a ``.npy`` without ids, a Parquet file of another program) is never
    replaced silently."""
    path = Path(path)
    if overwrite or not path.exists() or is_hmde_vector_file(path):
        return
    raise HmdeError(f"{path}: the file exists and is not an output of hmde encode; pass --overwrite to replace it "
                    "(or name a new file)")


def check_replaceable(path: str | os.PathLike, what: str, is_ours, overwrite: bool, flag: str = "--overwrite") -> None:
    """Raise unless ``path`` may be replaced by a new ``what``: absent, empty, or ours and ``overwrite``."""
    folder = Path(path)
    resolved = folder.resolve()
    if resolved == Path.cwd().resolve() or resolved in Path.cwd().resolve().parents or resolved.parent == resolved:
        raise HmdeError(f"{path}: the output must be a new folder, not the current folder or one that contains it")
    if not folder.exists():
        return
    if not folder.is_dir():
        raise HmdeError(f"{path}: exists and is not a folder; choose a new output folder")
    if not any(folder.iterdir()):
        return
    if not is_ours(folder):
        raise HmdeError(f"{path}: the folder exists and is not an {what}; hmde will not replace it "
                        "(choose a new output folder)")
    if not overwrite:
        raise HmdeError(f"{path}: an {what} is already there; pass {flag} to replace it")


def check_writable_parent(path: str | os.PathLike) -> None:
    """The output's parent folder must exist (or be creatable) and be writable."""
    parent = Path(path).resolve().parent
    while not parent.exists():
        parent = parent.parent
    if not os.access(parent, os.W_OK | os.X_OK):
        raise HmdeError(f"{path}: cannot write there (no permission to write in {parent})")


def same_or_inside(path: Path, given: Path) -> bool:
    """``path`` is the file or folder ``given``, or lies inside the folder ``given``."""
    try:
        if path.exists() and given.exists() and path.samefile(given):
            return True
        return given.is_dir() and path.resolve().is_relative_to(given.resolve())
    except OSError:
        return False


def check_not_an_input(outputs: dict[str, list[Path]], inputs: dict[str, Path]) -> None:
    """The one rule every writer's output obeys: no file it writes (``outputs``: the option -> the files
    written for it, sidecars included) may be one of the command's inputs (``inputs``: the option -> the
    path given) or an existing file inside an input folder (``search IDX q --run IDX/index.json`` would
    replace the index's own file). A new file inside an input folder is allowed."""
    for out_flag, paths in outputs.items():
        for path in paths:
            for in_flag, given in inputs.items():
                if not given.exists():
                    continue
                same = path.exists() and path.samefile(given)
                inside = path.exists() and not path.is_dir() and same_or_inside(path, given)
                if same or inside:
                    what = "is" if same else "lies inside"
                    raise HmdeError(f"{path}: the output ({out_flag}) {what} the input {given} ({in_flag}); "
                                    "name another output")
