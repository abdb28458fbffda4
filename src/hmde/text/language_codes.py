"""One language, whatever code or tag names it (langcodes), for every module that compares languages."""

from __future__ import annotations

from functools import lru_cache

import langcodes


@lru_cache(maxsize=4096)
def language_code(lang: str) -> str:
    """The language of a code or tag, as langcodes standardises it (ISO 639-1 where there is one;
    639-3 and BCP-47 tags, deprecated codes such as ``iw``, and individual languages folded into their
    macrolanguage: ``cmn`` -> zh, ``npi_Deva`` -> ne, ``zh-TW`` -> zh). A tag langcodes cannot read is
    kept as given, lower-cased, without its subtags.

    Why langcodes and not sentence splitting's table (:data:`hmde.text.segmentation.ISO3_TO_ISO1`): that
    table names the rules of a splitter and lacks most 639-3 codes (jav, tgl, fry, yid, lvs, ekk...), so
    documents in languages e5 knows were said to be outside it."""
    text = lang.strip().replace("_", "-")
    try:
        text = langcodes.standardize_tag(text, macro=True)
    except (langcodes.tag_parser.LanguageTagError, ValueError):
        pass
    return text.split("-")[0].lower()


@lru_cache(maxsize=4096)
def _scripts(lang: str) -> tuple[str | None, str | None]:
    """(the script a tag names, the script its language is written in where it names none), None where unknown."""
    try:
        parsed = langcodes.Language.get(lang.strip().replace("_", "-"))
        return parsed.script, parsed.maximize().script
    except (langcodes.tag_parser.LanguageTagError, ValueError):
        return None, None


def same_language(asked: str, stored: str) -> bool:
    """Whether documents tagged ``stored`` are in the language ``asked`` names: one language (``ace``, ``ACE`` and
    ``ace_Latn`` are one: issue 94), and, where ``asked`` names a script, written in it (``zh-Hant`` is not
    ``zh-Hans``; ``zh`` is either)."""
    if language_code(asked) != language_code(stored):
        return False
    script = _scripts(asked)[0]
    return script is None or script == (_scripts(stored)[0] or _scripts(stored)[1])


def language_group(lang: str) -> tuple[str, str | None]:
    """What codes of one language in one script share (``index info`` counts them as one)."""
    named, likely = _scripts(lang)
    return language_code(lang), named or likely
