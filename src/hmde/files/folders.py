"""The document files of a folder: walked in sorted order, hidden files and folders left out, links not followed
where they leave the folder, files no reader reads counted by suffix (a summary names them)."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .formats import file_format


@dataclass
class FolderFiles:
    """A folder's document files (each with its path relative to the folder, in POSIX form: the document's id) and
    what was passed over."""

    root: Path
    files: list[tuple[Path, str]] = field(default_factory=list)
    other_kinds: Counter = field(default_factory=Counter)  # suffix -> files no reader reads
    links_out: list[str] = field(default_factory=list)  # links that leave the folder, not followed


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def folder_files(root: Path) -> FolderFiles:
    root = Path(root)
    real_root = root.resolve()
    found = FolderFiles(root)
    for folder, dirs, names in os.walk(root, followlinks=False):
        here = Path(folder)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for d in list(dirs):
            if (here / d).is_symlink():  # a linked folder: followed only where it stays inside
                dirs.remove(d)
                target = (here / d).resolve()
                if not _inside(target, real_root):
                    found.links_out.append((here / d).relative_to(root).as_posix())
        for name in sorted(names):
            if name.startswith("."):
                continue
            path = here / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink() and not _inside(path.resolve(), real_root):
                found.links_out.append(rel)
                continue
            if not path.is_file():
                continue
            if file_format(path) is None:
                found.other_kinds[path.suffix.lower() or "(no suffix)"] += 1
                continue
            found.files.append((path, rel))
    return found
