"""The language of a short text (a search query), where the caller does not say it.

A search of a mixed-language index calibrates the scores of the documents in the query's own language
(:func:`hmde.index.language_debias.calibrate`), so it must know that language. The index's own language means
cannot tell it (hmde-e5's joint stage took most of the language out of the vectors: XQuAD's Greek questions were
given the nearest indexed language right 62% of the time, Chinese ones a language of the pool every time), so a
language identifier does: py3langid (langid.py's model, 97 languages, numpy only), with probabilities normalised
over its languages. XQuAD's questions in 12 languages: 0.89 (Chinese) to 1.00 right, about 70 us a query.

A guess below :data:`MIN_PROBABILITY` (a keyword: "growth" is Polish at 0.17) gives None: no calibration.
Codes are :func:`hmde.text.coverage.language_code`'s, so ``el`` matches documents stored as ``ell``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Sequence

from .coverage import language_code

MIN_PROBABILITY = 0.5


@lru_cache(maxsize=1)
def _identifier():
    from pathlib import Path

    from py3langid import langid

    # the package's own model (a numpy archive, not a pickle), read once per process
    return langid.LanguageIdentifier.from_modelpath(Path(langid.__file__).parent / langid.MODEL_FILE,
                                                    norm_probs=True)


def detect_languages(texts: Sequence[str], min_probability: float = MIN_PROBABILITY) -> list[str | None]:
    """Each text's language as :func:`language_code` writes it, or None where the identifier is not sure."""
    identifier = _identifier()
    out = []
    for text in texts:
        text = text if isinstance(text, str) else " ".join(text)
        if not text.strip():
            out.append(None)
            continue
        lang, probability = identifier.classify(text)
        out.append(language_code(lang) if probability >= min_probability else None)
    return out
