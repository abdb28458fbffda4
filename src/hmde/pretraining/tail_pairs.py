"""Pairs for the languages' tail (issue 80): the sentence stage's data in the languages that only the Universal
Declaration and the Bible hold.

Most of the per-language table's bottom fifth (docs/languages.md) are languages with no text in the shared data
but UDHR's 30 articles, and a few with a New Testament. Two pair kinds bring them into the stage that trains the
lower encoder, each capped per language so that 380 small languages do not outweigh the translation pairs:

- ``udhr``: an article in a language and the same article in English (whole, cut at ``max_chars``), for the
  articles outside the development slice (:func:`hmde.pretraining.dev_slice.dev_concept`: 8 of the 30 articles,
  which ``benchmarks/languages.py --udhr-articles dev`` scores, so a model trained on these pairs is measured on
  articles it never saw);
- ``bible``: verses of a chapter in a language and the same verses in English, in chapters whose verse counts agree
  (a merged verse shifts every later one) outside the development slice (``benchmarks/languages.py``'s ``bible``
  task finds its chapters), at most ``per_language`` a language, drawn.

Each pair comes as ``(x, y, y's language)`` with its direction drawn, as translation pairs do; the languages held
out of training stay out. Seeded.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

from ..errors import HmdeError

UDHR_PER_LANGUAGE = 22  # every article outside the development slice
BIBLE_PER_LANGUAGE = 200


def read_rows(path: Path) -> list[dict]:
    """The rows of a ``.jsonl.gz`` file of the shared data."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _with_english(folder: Path, what: str, per_language: int, seed: int, english_of, pairs_of,
                  english_last: bool = False, total: int | None = None) -> list[tuple[str, str, str]]:
    """Each language file of ``folder`` but English and the held-out ones: ``pairs_of(its rows, english)`` (texts
    of the language, English texts), at most ``per_language`` of them drawn, each direction drawn; shuffled.
    ``english_of``: what English's rows give those pairs to be made with. ``english_last``: every pair as
    ``(the language's text, English, the language)`` (a routed encoder's pairs: :func:`sample_routed_pairs`).
    ``total``: instead of ``per_language``, about this many in all, as many from each language (fewer where a
    language has fewer)."""
    from .dev_slice import HELD_OUT

    if not (folder / "eng.jsonl.gz").is_file():
        raise HmdeError(f"{folder / 'eng.jsonl.gz'}: no English {what} to pair with")
    english = english_of(read_rows(folder / "eng.jsonl.gz"))
    files = [(p.name[:-len(".jsonl.gz")], p) for p in sorted(folder.glob("*.jsonl.gz"))]
    files = [(lang, path) for lang, path in files if lang != "eng" and lang.split("_")[0] not in HELD_OUT]
    if total is not None:
        per_language = -(-total // max(1, len(files)))
    rng = random.Random(seed)
    out = []
    for lang, path in files:
        pairs = pairs_of(read_rows(path), english)
        for x, y in rng.sample(pairs, min(per_language, len(pairs))):
            if english_last:
                out.append((x, y, lang))
            else:
                out.append((x, y, "eng") if rng.random() < 0.5 else (y, x, lang))
    rng.shuffle(out)
    return out


def sample_udhr_pairs(data: Path, per_language: int = UDHR_PER_LANGUAGE, seed: int = 0,
                      max_chars: int = 600, english_last: bool = False, part: str = "all") -> list[tuple[str, str, str]]:
    """Article pairs with English (module docstring), at most ``per_language`` a language. ``part``: all the
    articles outside the development slice, or those outside the validation slice too (``training``), or the
    validation slice alone (:func:`hmde.pretraining.dev_slice.in_part`)."""
    from .dev_slice import dev_concept, in_part

    def articles(rows, english):
        return [(r["text"][:max_chars], english[r["concept"]]) for r in rows if r["concept"] in english
                and not dev_concept("udhr", r["concept"]) and in_part(part, "udhr", r["concept"]) and r["text"].strip()]

    return _with_english(Path(data) / "docs" / "udhr", "UDHR", per_language, seed,
                         lambda rows: {r["concept"]: r["text"][:max_chars] for r in rows}, articles, english_last)


def sample_bible_pairs(data: Path, per_language: int = BIBLE_PER_LANGUAGE, seed: int = 0,
                       min_chars: int = 20, english_last: bool = False, part: str = "all",
                       total: int | None = None) -> list[tuple[str, str, str]]:
    """Verse pairs with English (module docstring), at most ``per_language`` a language (or ``total`` spread over
    the languages); ``part`` as :func:`sample_udhr_pairs`'s, by chapter. The chapters of sentence alignment's verse table
    (:data:`hmde.pretraining.dev_slice.ALIGNMENT_DEV_CHAPTERS`) are never trained on (validation, which no run trains
    on, keeps them)."""
    from .dev_slice import ALIGNMENT_DEV_CHAPTERS, dev_concept, in_part

    left_out = () if part == "validation" else ALIGNMENT_DEV_CHAPTERS

    def verses(rows, english):
        out = []
        for r in rows:
            theirs, ours = r.get("verses") or [], english.get(r["concept"], [])
            if (len(theirs) == len(ours) and not dev_concept("bible", r["concept"]) and r["concept"] not in left_out
                    and in_part(part, "bible", r["concept"])):
                out += [(a, b) for a, b in zip(theirs, ours) if min(len(a), len(b)) >= min_chars]
        return out

    return _with_english(Path(data) / "bible", "Bible", per_language, seed,
                         lambda rows: {r["concept"]: r.get("verses") or [] for r in rows}, verses, english_last, total)


TRANSLATIONS_PER_LANGUAGE = 500
ROUTE_FILE = "route.json"  # beside a routed encoder's weights: the languages it serves (those its pairs had)


def sample_routed_pairs(data: Path, kinds, languages, sources=("tatoeba", "wmt", "multi30k"), seed: int = 0,
                        per_language: int = TRANSLATIONS_PER_LANGUAGE, part: str = "all") -> list[tuple[str, str, str]]:
    """The pairs of a routed encoder (one that embeds ``languages`` alone, its vectors in the space of the model
    that embeds English and every other language: ``english_side="teacher"``): ``(text, English text, its
    language)`` of the ``kinds`` named (``translations``: the parallel files of ``sources`` between English and
    one of ``languages``, at most ``per_language`` pairs a language; ``udhr``; ``bible``) whose language (its code as
    the data names it, script included: ``jav_Java`` is not ``jav``) is one of ``languages``; shuffled, seeded.
    ``part``: every pair, or those outside the validation slice (``training``: a run that chooses its route), or the
    validation slice alone (its texts: :mod:`hmde.pretraining.route_validation`); a translation pair's item is its
    English text."""
    from .dev_slice import in_part

    from .parallel_files import pair_files, read_pairs
    from .sentence_stage_config import ROUTED_KINDS

    wanted = set(languages)
    if not wanted:
        raise HmdeError("a routed encoder needs languages to serve; none given")
    unknown = sorted(set(kinds) - set(ROUTED_KINDS))
    if unknown:
        raise HmdeError("a routed encoder trains on pairs with English of known languages "
                        f"({', '.join(ROUTED_KINDS)}); not {', '.join(unknown)}")

    rng = random.Random(seed)
    out: list[tuple[str, str, str]] = []
    if "translations" in kinds:
        for path, x, y in pair_files(data, sources):
            lang = y if x == "eng" else x
            if "eng" not in (x, y) or lang not in wanted:
                continue
            rows = [(a, b) if y == "eng" else (b, a) for a, b in read_pairs(path) if a.strip() and b.strip()]
            rows = [(a, b) for a, b in rows if in_part(part, "translations", b)]
            out += [(a, b, lang) for a, b in rng.sample(rows, min(per_language, len(rows)))]
    if "udhr" in kinds:
        out += [p for p in sample_udhr_pairs(data, seed=seed, english_last=True, part=part) if p[2] in wanted]
    if "bible" in kinds:
        out += [p for p in sample_bible_pairs(data, seed=seed, english_last=True, part=part) if p[2] in wanted]
    if not out:
        raise HmdeError(f"no {', '.join(kinds)} pairs with English in {', '.join(sorted(wanted)[:8])}"
                        f"{'...' if len(wanted) > 8 else ''} under {data}")
    rng.shuffle(out)
    return out
