"""``hmde-auto``, the default model name: hmde-use or hmde-e5, chosen by the languages of a job.

Why: hmde-use (USE-m underneath) is the better model in USE-m's 16 languages on the dev sets, and
near random outside them; hmde-e5 (multilingual-e5-small underneath) covers about 100 languages
(docs/hmde-e5.md gives both sets of numbers). Vectors of two models live in two spaces and can never
be compared, so the choice is made once per job, never per document: a job whose languages are
all USE-m's gets hmde-use, a job with any other language gets hmde-e5 for every document, and the
choice is said on stderr. An index records the model it was built with, so its searches and
``--add`` keep it.

A job's languages are what hmde already reads before loading a model: the documents' ``lang``
fields and ``--lang`` flags, else the script where it names a language (Greek, Hebrew, Ethiopic,
the Indic scripts...; :mod:`hmde.text.coverage`). A job with no language known (Latin text without a
``lang`` field) gets hmde-use, as before hmde-e5 existed, and is told how to route it.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Iterable

from ..text.coverage import USE_M, language_code

AUTO = "hmde-auto"
USE_MODEL, E5_MODEL = "hmde-use", "hmde-e5"


def _languages(languages: Iterable[str | None] | Counter | None) -> set[str]:
    if languages is None:
        return set()
    names = [lang for lang, n in languages.items() if n] if isinstance(languages, Counter) else list(languages)
    return {language_code(lang) for lang in names if lang}


def model_for(languages: Iterable[str | None] | Counter | None) -> tuple[str, str]:
    """(the bundled model for a job in ``languages``, why), ``languages`` as codes (639-1, 639-3,
    BCP-47) or a Counter of them (None and unknown entries ignored)."""
    from .registry import bundled_folder

    langs = _languages(languages)
    outside = sorted(langs - USE_M)
    if not langs:
        return USE_MODEL, ("no language is known for these inputs; give them a 'lang' field or --lang to route "
                           f"them, or name {E5_MODEL} for languages outside USE-m's 16")
    if not outside:
        return USE_MODEL, f"every language ({', '.join(sorted(langs))}) is one of USE-m's 16"
    if bundled_folder(E5_MODEL) is None and not Path(E5_MODEL).is_dir():
        return USE_MODEL, (f"{', '.join(outside)} {'is' if len(outside) == 1 else 'are'} outside USE-m's 16 languages "
                           f"but {E5_MODEL} is not installed")
    return E5_MODEL, (f"{', '.join(outside[:8])}{' ...' if len(outside) > 8 else ''} "
                      f"{'is' if len(outside) == 1 else 'are'} outside USE-m's 16 languages")


def route(name: str, languages: Iterable[str | None] | Counter | None = None, stream=None) -> str:
    """``name`` itself, or for :data:`AUTO` the model for ``languages``, said once on stderr."""
    if name != AUTO:
        return name
    model, why = model_for(languages)
    print(f"hmde: {AUTO} -> {model}: {why}", file=stream or sys.stderr)
    return model


def refuse_for_one_space(name: str | None, what: str, fix: str) -> None:
    """:data:`AUTO` chooses a model per job; ``what`` (an index, a classifier) lives in one model's space,
    so naming it there is refused in one line, saying what to do (``fix``)."""
    if name == AUTO:
        from ..errors import HmdeError

        raise HmdeError(f"{what} lives in one model's space: {fix} ({AUTO} picks a model for a new job, never for "
                        f"{what})")
