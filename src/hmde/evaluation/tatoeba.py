"""Tatoeba cross-lingual sentence retrieval (LASER's format): P@1 in both directions.

``tatoeba.xxx-eng.xxx`` and ``tatoeba.xxx-eng.eng`` are line-aligned; each sentence
retrieves its nearest neighbour by cosine among all sentences of the other language.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import numpy as np
from sklearn.metrics import accuracy_score

from ..errors import InputError


def tatoeba_languages(folder: str | Path) -> list[str]:
    folder = Path(folder)
    langs = sorted({p.name.split(".")[1].split("-")[0] for p in folder.glob("tatoeba.*-eng.eng")})
    if not langs:
        raise InputError("no tatoeba.xxx-eng.* files found", path=str(folder))
    return langs


def load_tatoeba(folder: str | Path, lang: str) -> tuple[list[str], list[str]]:
    folder = Path(folder)
    xx, en = folder / f"tatoeba.{lang}-eng.{lang}", folder / f"tatoeba.{lang}-eng.eng"
    if not xx.exists() or not en.exists():
        raise InputError(f"language '{lang}' is missing from the Tatoeba folder", path=str(folder))
    a = xx.read_text(encoding="utf-8").splitlines()
    b = en.read_text(encoding="utf-8").splitlines()
    if len(a) != len(b):
        raise InputError(f"{len(a)} lines but {en.name} has {len(b)}", path=str(xx))
    return a, b


def retrieval_p_at_1(queries: np.ndarray, candidates: np.ndarray) -> float:
    """P@1 when query i's correct candidate is candidate i (cosine nearest neighbour)."""
    from ..align.similarity import normalize

    q, c = normalize(queries), normalize(candidates)
    predicted = (q @ c.T).argmax(1)
    return float(accuracy_score(np.arange(len(q)), predicted))


def evaluate_tatoeba(
    encode: Callable[[Sequence[str]], np.ndarray], folder: str | Path, langs: Sequence[str] | None = None
) -> dict:
    """Per-language P@1 (xxx->eng, eng->xxx, their mean) and the average over languages."""
    langs = list(langs) if langs else tatoeba_languages(folder)
    per_lang = {}
    for lang in langs:
        a, b = load_tatoeba(folder, lang)
        va, vb = encode(a), encode(b)
        fwd, bwd = retrieval_p_at_1(va, vb), retrieval_p_at_1(vb, va)
        per_lang[lang] = {f"{lang}->eng": fwd, f"eng->{lang}": bwd, "mean": (fwd + bwd) / 2}
    average = float(np.mean([r["mean"] for r in per_lang.values()])) if per_lang else float("nan")
    return {"languages": per_lang, "average": average}
