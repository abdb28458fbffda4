"""The ratio-margin threshold measured for a model (issue 79): where ``hmde mine`` takes its default from.

The margin a translation needs depends on the encoder: hmde-e5's lower encoder, tuned for search, separates
translations from their neighbours by a narrow margin (best mean F1 at 1.025 on the dev mining table), while an
encoder trained for translation ranking spreads the margins (its best near 1.2). One default for all would mine
badly with every encoder but the one it was measured on. So ``benchmarks/mining.py --record`` writes the threshold
of the best mean F1 into the model's folder (``mining.json``: the threshold, the F1, what it was measured on), and
``hmde mine`` / :func:`hmde.mine` take it from there when no threshold is given; a model without one gets
:class:`~hmde.align.mining.MiningOptions`' default (hmde-e5's). A given ``--threshold`` always wins. The same
record may hold a cosine floor (``min_cosine``): an encoder trained for translation ranking mines best with one
(docs/mining.md); ``--min-cosine`` wins over it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..errors import InputError

FILE = "mining.json"


def _folder(model: str | None) -> Path | None:
    from ..encoders.registry import bundled_folder

    if not model:
        return None
    path = Path(str(model)).expanduser()
    return path if path.is_dir() else bundled_folder(str(model))


def _recorded(model: str | None, field: str) -> float | None:
    """``field`` of the record in ``model``'s folder (a path or a bundled name), or None where it records none.
    A bad file is refused in one line naming it and the field."""
    folder = _folder(model)
    path = folder / FILE if folder is not None else None
    if path is None or not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"unreadable ({exc})", str(path)) from None
    if isinstance(record, dict) and field != "threshold" and field not in record:  # the threshold is required
        return None
    value = record.get(field) if isinstance(record, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"must be a finite number, got {value!r}", str(path), None, field)
    return float(value)


def recorded_threshold(model: str | None) -> float | None:
    """The threshold recorded in ``model``'s folder, or None where it records none."""
    return _recorded(model, "threshold")


def default_threshold(model: str | None) -> float:
    """The threshold ``hmde mine`` uses with ``model`` when none is given (module docstring)."""
    from ..encoders.registry import MINING_MODEL
    from .mining import MiningOptions

    recorded = recorded_threshold(model or MINING_MODEL)
    return MiningOptions().threshold if recorded is None else recorded


def default_min_cosine(model: str | None) -> float:
    """The cosine floor ``hmde mine`` uses with ``model`` when none is given: the recorded one, else none (0)."""
    from ..encoders.registry import MINING_MODEL

    recorded = _recorded(model or MINING_MODEL, "min_cosine")
    return 0.0 if recorded is None else recorded


def resolve(options, model: str | None):
    """``options`` (hmde.align.mining.MiningOptions) with a threshold or cosine floor left None set to the one
    measured for ``model``, the model that embeds (:func:`hmde.align.miner.mining_model`): what :func:`hmde.mine`
    uses."""
    from dataclasses import replace

    if options.threshold is None:
        options = replace(options, threshold=default_threshold(model))
    if options.min_cosine is None:
        options = replace(options, min_cosine=default_min_cosine(model))
    return options


def record_threshold(folder: str | Path, threshold: float, measured: dict, min_cosine: float = 0.0) -> Path:
    """Write ``mining.json`` into the model folder ``folder`` (atomically): ``threshold``, the cosine floor
    ``min_cosine`` where there is one, and what ``measured`` says of them (the F1, the table, the selection)."""
    from ..ground.atomic import write_text_atomic

    folder = Path(folder)
    if not folder.is_dir():
        raise InputError("not a model folder: the threshold is recorded beside the model's files", str(folder))
    path = folder / FILE
    floor = {"min_cosine": float(min_cosine)} if min_cosine else {}
    write_text_atomic(path, json.dumps({"threshold": float(threshold), **floor, **measured}, indent=1) + "\n")
    return path
