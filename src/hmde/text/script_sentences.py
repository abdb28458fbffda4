"""Sentence splitting for scripts that sentencex leaves whole: Thai, Lao and Khmer.

Thai and Lao write no space between words and no full stop: a space marks the end of a sentence
or clause, but not every space does (a space also follows the repetition mark ``ๆ`` and sets off
numbers and names). sentencex therefore returned a whole Thai paragraph as one "sentence", which
the lower encoder then truncated at its token limit.

- Thai: PyThaiNLP's CRF sentence segmenter (``crfcut``, trained on Thai text, model shipped in
  the package), the maintained tool for it.
- Lao: no maintained splitter installs from PyPI; the script's convention is used: a space ends a
  sentence, except after the repetition mark ``ໆ`` or next to a digit.
- Khmer: the khan ``។`` and the bariyoosan ``៕`` end sentences.
- Myanmar's ``။`` is already a full stop to sentencex.
"""

from __future__ import annotations

import re
from functools import lru_cache

_LAO_BREAK = re.compile(r"(?<=[^\sໆ0-9໐-໙])\s+(?=[^\s0-9໐-໙])")
_KHMER_BREAK = re.compile(r"(?<=[។៕])\s*")


@lru_cache(maxsize=1)
def _thai_segmenter():
    from pythainlp.tokenize import sent_tokenize

    return lambda text: sent_tokenize(text, engine="crfcut")


def thai_sentences(text: str) -> list[str]:
    return _thai_segmenter()(text)


def lao_sentences(text: str) -> list[str]:
    return _LAO_BREAK.split(text)


def khmer_sentences(text: str) -> list[str]:
    return _KHMER_BREAK.split(text)


SPLITTERS = {"th": thai_sentences, "lo": lao_sentences, "km": khmer_sentences}  # by sentencex's (639-1) code
