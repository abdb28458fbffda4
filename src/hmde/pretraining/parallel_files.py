"""The shared data's parallel files (``parallel/<source>/<xxx>-<yyy>.tsv.gz``), as the sentence stage and the
tail's routed pairs (:mod:`hmde.pretraining.tail_pairs`) read them."""

from __future__ import annotations

import gzip
from pathlib import Path

from ..errors import HmdeError
from .dev_slice import HELD_OUT


def pair_files(data: Path, sources) -> list[tuple[Path, str, str]]:
    """The parallel files of ``sources`` (``parallel/<source>/<xxx>-<yyy>.tsv.gz``) without a held-out language."""
    out = []
    for source in sources:
        for path in sorted((Path(data) / "parallel" / source).glob("*.tsv.gz")):
            x, y = path.name[:-len(".tsv.gz")].split("-", 1)
            if x not in HELD_OUT and y not in HELD_OUT:
                out.append((path, x, y))
    if not out:
        raise HmdeError(f"no parallel files of {', '.join(sources)} under {Path(data) / 'parallel'}")
    return out


def read_pairs(path: Path) -> list[tuple[str, str]]:
    """A parallel file's lines as (xxx, yyy) text pairs, in file order (lines without a tab left out)."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [tuple(line.rstrip("\n").split("\t")[:2]) for line in f if "\t" in line]
