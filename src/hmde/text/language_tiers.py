"""How well a model serves each language, measured (issue 80): tiers from the per-language dev table.

``benchmarks/languages.py`` scores every language of the shared data (Tatoeba, UDHR, MasakhaNEWS) with a model;
the bundled models' tables are kept in ``language_quality.json`` beside this module (outside the model folders,
whose content hash indexes record). A language's tier:

- ``strong``: score >= 0.90 (a translation or the right document found first nine times in ten or more);
- ``fair``: 0.70 <= score < 0.90;
- ``weak``: score < 0.70;
- ``unmeasured``: no dev data here; a language outside the sentence encoder's pretraining is said apart
  (:mod:`hmde.text.coverage`).

``hmde index info`` names the collection's languages with their tier, and building or searching a collection most
of whose documents are in weak-tier languages says so in one line.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path

TABLE = Path(__file__).with_name("language_quality.json")
STRONG, FAIR = 0.90, 0.70
TIERS = ("strong", "fair", "weak")


def tier_of(score: float) -> str:
    return "strong" if score >= STRONG else "fair" if score >= FAIR else "weak"


def tiers_of(scores: dict[str, float]) -> dict[str, str]:
    return {lang: tier_of(score) for lang, score in scores.items()}


@lru_cache(maxsize=None)
def _tables() -> dict:
    try:
        return json.loads(TABLE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


@lru_cache(maxsize=None)
def quality(model: str | None) -> dict[str, dict]:
    """``{language code: {"score", "tier", tasks...}}`` of a bundled model (by name), codes as
    :func:`hmde.text.language_codes.language_code` gives them; {} for a model without a measured table."""
    from .language_codes import language_code

    rows = _tables().get(str(model or ""), {})
    out: dict[str, dict] = {}
    for key, row in sorted(rows.items(), key=lambda kv: -len(kv[1])):  # the best-covered source of a code first
        out.setdefault(language_code(key.split("_")[0]), row)
    return out


def weak_unseen(model: str | None) -> list[str]:
    """The languages (the table's keys, scripts kept: ``jav_Java``) a bundled model serves weakly and never saw in
    its pretraining: what a routed tail encoder is trained for (issue 80); [] for a model without a table."""
    rows = _tables().get(str(model or ""), {})
    return sorted(k for k, r in rows.items() if r.get("tier") == "weak" and r.get("pretrained") is False)


def language_tier(model: str | None, lang: str | None) -> str:
    """``strong``, ``fair``, ``weak`` or ``unmeasured``."""
    from .language_codes import language_code

    if not lang:
        return "unmeasured"
    row = quality(model).get(language_code(str(lang)))
    return row["tier"] if row else "unmeasured"


def with_tiers(model: str | None, languages: dict[str, int]) -> dict[str, dict]:
    """``{lang: {"documents": n, "tier": ..., "score": ...}}`` for ``index info``."""
    out = {}
    for lang, n in languages.items():
        row = quality(model).get(_code(lang), {})
        out[lang] = {"documents": int(n), "tier": row.get("tier", "unmeasured"),
                     **({"score": round(float(row["score"]), 3)} if row else {}),
                     **({"unknown_tokens": row["unknown_tokens"]} if "unknown_tokens" in row else {})}
    return out


UNREADABLE = 0.2  # a language whose text is this share of <unk> tokens or more is one the tokenizer cannot read


def _named(model, lang) -> str:
    row = quality(model)[_code(lang)]
    unknown = row.get("unknown_tokens", 0.0)
    return f"{lang} ({row['score']:.2f}{f'; {unknown:.0%} of its tokens <unk>' if unknown >= UNREADABLE else ''})"


def _code(lang: str) -> str:
    from .language_codes import language_code

    return language_code(lang) if lang and lang != "unknown" else ""


def warn_weak(model: str | None, languages: Counter, what: str = "documents", stream=None) -> bool:
    """Say once, on stderr, when most ``languages`` ({lang: inputs}) are in weak-tier languages of ``model``;
    True if it said so."""
    total = sum(n for lang, n in languages.items() if lang)
    weak = Counter({lang: n for lang, n in languages.items() if lang and language_tier(model, lang) == "weak"})
    if not total or sum(weak.values()) * 2 <= total:
        return False
    names = ", ".join(_named(model, lang) for lang, _ in weak.most_common(5))
    print(f"hmde: warning: {sum(weak.values())} of {total} {what} are in languages where {model} is weak on its dev "
          f"table: {names}; expect fewer right answers first (docs/languages.md)", file=stream or sys.stderr)
    return True
