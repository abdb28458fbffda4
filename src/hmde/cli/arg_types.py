"""argparse types that refuse impossible numbers before any work starts (exit 2, one line).

Without them a negative HNSW degree grew until the kernel killed hmde, ``--ivf-lists 0`` wrote
an index search could not read, a temperature of 0 trained a model of NaNs, and ``nan`` weights
ranked at random.
"""

from __future__ import annotations

import argparse
import math


def _number(kind, text: str):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a{'n integer' if kind is int else ' number'}") from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"'{text}' is not a finite number")
    return value


def positive_int(text: str) -> int:
    value = _number(int, text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def thread_count(text: str) -> int:
    """``--threads``: 1 to :data:`hmde.encoders.devices.MAX_THREADS`."""
    from ..encoders.devices import MAX_THREADS

    value = positive_int(text)
    if value > MAX_THREADS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_THREADS}, got {value}")
    return value


def nonnegative_int(text: str) -> int:
    value = _number(int, text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def finite_float(text: str) -> float:
    return _number(float, text)


def positive_float(text: str) -> float:
    value = _number(float, text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def bounded_int(low: int, high: int):
    """An integer in [low, high] (e.g. HNSW's degree: FAISS allocates per node in proportion to it)."""
    def parse(text: str) -> int:
        value = _number(int, text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, got {value}")
        return value

    return parse


def lower_trainable(text: str) -> str:
    """``hmde train --lower-trainable``: all, no-embeddings or top-N (hmde.pretraining.lower_parts)."""
    from ..pretraining.lower_parts import parse_lower_trainable

    try:
        return parse_lower_trainable(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def language_code(text: str) -> str:
    """``--lang``: a language code or tag (``en``, ``deu``, ``zh-Hant``), by the rule documents' ``lang`` fields pass
    (:func:`hmde.io.documents.is_language_tag`); ``!!`` was recorded as every document's language."""
    from ..io.documents import is_language_tag

    if not is_language_tag(text):
        raise argparse.ArgumentTypeError(f"{text!r} is no language code (en, deu, zh-Hant...)")
    return text.strip()
