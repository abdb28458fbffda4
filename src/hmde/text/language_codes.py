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
