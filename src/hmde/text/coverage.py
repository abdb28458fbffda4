"""Which languages a lower encoder was trained on, and a warning when documents fall outside them.

Why: hmde-use is the default for every language, but its lower encoder (USE-m) knows 16; outside
them its vectors are near random (held-out news alignment about 0.5 P@1; Greek, Hebrew and
Amharic near 0.1) and nothing said so. hmde now says it once per run, naming the model that
covers the language.

A document's language is its ``lang`` field (ISO 639-1, 639-3 or a BCP-47 tag, read by
``langcodes``: an individual language of a macrolanguage counts as the macrolanguage, so FLORES'
``npi_Deva`` is Nepali and ``lvs`` Latvian), or, where it has none, its script when the script names the language cheaply and surely (Greek, Hebrew,
Ethiopic, the Indic scripts, Georgian, Armenian, Khmer, Lao, Myanmar, Sinhala). Latin,
Cyrillic and Arabic texts without a ``lang`` are not guessed: no warning rather than a wrong one.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Sequence

import langcodes

from ..e5.folder import NAME as E5_NAME
from .language_codes import language_code  # hmde.text.coverage.language_code, as before



NOT_LANGUAGES = frozenset({"und", "mul", "zxx", "mis"})  # ISO 639 codes that name no language

def iso639_3(lang: str) -> str:
    """A language code as ISO 639-3 writes it (``de`` -> ``deu``), the form of hmde's data; as given where
    langcodes has none."""
    try:
        return langcodes.Language.get(lang).to_alpha3()
    except (LookupError, ValueError, langcodes.tag_parser.LanguageTagError):
        return lang


def _languages(codes: str) -> frozenset:
    return frozenset(language_code(code) for code in codes.split())


# held out of document-level training, so that what training gives languages it never saw can be measured:
# hmde recipe e5's choice (Swahili: Bantu, Gujarati: Indic, Estonian: Uralic, each in e5's vocabulary) and the shared
# data's (Ukrainian, Latvian and Basque are left out of every document source there)
RECIPE_HELD_OUT = ("swh", "guj", "est")
DATA_HELD_OUT = ("ukr", "lav", "lvs", "eus")

USE_M = _languages("ar de en es fr it ja ko nl pl pt ru th tr zh")  # zh-cn and zh-tw fold into zh
# XLM-R's CC-100 languages (multilingual-e5-small's vocabulary and pretraining; langcodes names Tagalog fil)
XLM_R = _languages("""af am ar as az be bg bn br bs ca cs cy da de el en eo es et eu fa fi fr fy ga gd gl gu ha he
hi hr hu hy id is it ja jv ka kk km kn ko ku ky la lo lt lv mg mk ml mn mr ms my ne nl no nb om or pa pl ps pt ro
ru sa sd si sk sl so sq sr su sv sw ta te th tl tr ug uk ur uz vi xh yi zh""")

# scripts that name one language (or, for Devanagari, the most common one) at no cost
_SCRIPTS = ((0x0370, 0x03FF, "el"), (0x0590, 0x05FF, "he"), (0x1200, 0x139F, "am"), (0x0900, 0x097F, "hi"),
            (0x0980, 0x09FF, "bn"), (0x0A80, 0x0AFF, "gu"), (0x0A00, 0x0A7F, "pa"), (0x0B80, 0x0BFF, "ta"),
            (0x0C00, 0x0C7F, "te"), (0x0C80, 0x0CFF, "kn"), (0x0D00, 0x0D7F, "ml"), (0x0D80, 0x0DFF, "si"),
            (0x10A0, 0x10FF, "ka"), (0x0530, 0x058F, "hy"), (0x1780, 0x17FF, "km"), (0x0E80, 0x0EFF, "lo"),
            (0x1000, 0x109F, "my"), (0x0E00, 0x0E7F, "th"))


def script_language(text: str, sample: int = 400) -> str | None:
    """The language a text's script names, from its first letters; None when the script does not."""
    counts: Counter = Counter()
    letters = 0
    for ch in text[:sample]:
        if not ch.isalpha():
            continue
        letters += 1
        code = ord(ch)
        for low, high, lang in _SCRIPTS:
            if low <= code <= high:
                counts[lang] += 1
                break
    if not counts or letters == 0:
        return None
    lang, n = counts.most_common(1)[0]
    return lang if n * 2 > letters else None


def model_languages(model) -> tuple[str, frozenset] | None:
    """(what the lower encoder is, the languages it was trained on), or None when hmde cannot tell."""
    lower = getattr(model, "lower", model)
    exported = getattr(lower, "declared_languages", None)  # an ONNX graph's, recorded at export
    if exported is not None:
        return exported
    first = getattr(getattr(lower, "model", None), "__getitem__", None)
    module = first(0) if first is not None else None
    declared = getattr(module, "covered_languages", None)  # hmde's own lower-encoder modules say it
    if declared is not None:
        return declared
    config = getattr(getattr(module, "auto_model", None), "config", None)
    path = str(getattr(config, "_name_or_path", "") or "")
    if E5_NAME in path or _e5_body(config):
        return E5_NAME, XLM_R
    return None


# multilingual-e5's vocabulary: XLM-R's SentencePiece pieces, 250,037 rows, in a BERT body
E5_VOCAB_SIZE = 250037


def _e5_body(config) -> bool:
    """Whether a lower encoder is multilingual-e5 or trained from it: an HMDE saved after training on
    e5 keeps e5's BERT body and vocabulary in ``lower/`` but not its name in the path (so ``hmde train
    --covered-pairs-only`` on a stage-1 folder could not tell e5's languages)."""
    return getattr(config, "model_type", None) == "bert" and getattr(config, "vocab_size", None) == E5_VOCAB_SIZE


def document_language(lang: str | None, text) -> str | None:
    if lang:
        return language_code(lang)
    if isinstance(text, str):
        return script_language(text)
    if isinstance(text, (list, tuple)) and text and isinstance(text[0], str):
        return script_language(" ".join(text[:5]))
    return None


def tally(records, counts: Counter, lang: str | None = None):
    """Pass ``records`` (with ``.lang`` and ``.text``) through, counting their languages into ``counts``
    (a first pass over the input does this, keeping no text)."""
    for r in records:
        counts[document_language(lang or r.lang, r.text)] += 1
        yield r


def languages_of(langs: Sequence[str | None], texts: Sequence) -> Counter:
    return Counter(document_language(lg, t) for lg, t in zip(langs, texts))


def warn_uncovered(model_name: str, model, languages: Counter, what: str = "documents", stream=None) -> bool:
    """Say once, on stderr, how many inputs are in languages the model was not trained on, and which
    model covers them; ``languages``: {language or None: inputs}. True if it said so."""
    known = model_languages(model)
    if known is None:
        return False
    label, covered = known
    # und (undetermined), mul, zxx, mis name no language: never "a language the model was not trained on"
    outside = Counter({lang: n for lang, n in languages.items()
                       if lang is not None and lang not in covered and lang not in NOT_LANGUAGES})
    if not outside:
        from .language_tiers import warn_weak

        warn_weak(model_name, languages, what, stream)  # covered, but maybe weakly: said in its own line
        return False
    names = ", ".join(f"{lang} ({n})" for lang, n in outside.most_common(8))
    better = (f"; {E5_NAME} covers {'them' if len(outside) > 1 else 'it'} (about 100 languages)"
              if all(lang in XLM_R for lang in outside) and label != E5_NAME else "")
    print(f"hmde: warning: {sum(outside.values())} {what} are in languages {model_name}'s lower encoder ({label}) was "
          f"not trained on: {names}; its vectors there are close to random{better}", file=stream or sys.stderr)
    return True
