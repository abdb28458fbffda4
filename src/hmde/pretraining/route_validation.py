"""Choosing a routed encoder's route (issue 80): each language it was trained for is routed to it only where texts
the run never saw say it gains.

A routed encoder (``hmde sentence-stage --english-side teacher``, :mod:`hmde.pretraining.tail_pairs`) serves the
languages of its pairs; trained on at most a few dozen texts a language, it lifts the languages the starting model
barely knows and lowers some it half-knows (docs/languages.md: ``route-1``). ``--select-route`` keeps the
**validation slice** out of the run's pairs (:func:`hmde.pretraining.dev_slice.validation_item`: a quarter of the
UDHR articles, Bible chapters and translation pairs outside the development slice) and, after training, scores every
served language on it twice, with the starting model (the teacher) and with the routed encoder (English always by the
teacher, as the route embeds it):

- ``udhr``: each validation article of the language (a document) finds its English article among the English
  validation articles, and back (MRR, both directions' mean), as the table scores the development articles: no
  article the run trained on is a candidate (those the routed encoder was pulled to would draw a validation
  article to them and score the route down for it);
- ``bible``: a validation chapter's verses (at most ``VERSES`` a language, as queries) find their English verses among
  the language's drawn English verses (MRR);
- ``translations``: held-out translation pairs (at most ``TRANSLATIONS``), the same way;
- ``masakhanews``: where MasakhaNEWS has a training split for the language (the table scores its dev split), its
  first ``NEWS`` headlines (queries) find their own article among those articles (MRR, monolingual: the route
  embeds both).

A language's validation score is the mean of its tasks; it is routed when the routed encoder's beats the teacher's by
more than ``min_gain``. The table goes into ``route.json`` beside the chosen languages, so the choice can be read.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from ..errors import HmdeError
from ..evaluation.ranks import mean_reciprocal_rank

VERSES = 100
TRANSLATIONS = 200
NEWS = 150


def validation_sets(data: Path, languages, kinds, sources=("tatoeba", "wmt", "multi30k"), seed: int = 0) -> dict:
    """What :func:`validate_route` scores, read before any model runs: ``{"udhr_english": {concept: text},
    "languages": {lang: {task: ...}}}`` for the ``languages`` served and the pair ``kinds`` the run trained on
    (module docstring); a language with nothing in the validation slice is left out."""
    from ..evaluation.classification import read_masakhanews_headlines
    from .dev_slice import in_part
    from .tail_pairs import read_rows, sample_bible_pairs, sample_routed_pairs

    data, wanted = Path(data), set(languages)
    out: dict = {"udhr_english": {}, "languages": defaultdict(dict)}
    folder = data / "docs" / "udhr"
    if "udhr" in kinds and (folder / "eng.jsonl.gz").is_file():
        out["udhr_english"] = {r["concept"]: r["text"] for r in read_rows(folder / "eng.jsonl.gz")
                               if in_part("validation", "udhr", r["concept"]) and r["text"].strip()}
        for lang in sorted(wanted):
            path = folder / f"{lang}.jsonl.gz"
            if path.is_file():
                articles = {r["concept"]: r["text"] for r in read_rows(path) if r["concept"] in out["udhr_english"]
                            and r["text"].strip()}
                if len(articles) > 1:
                    out["languages"][lang]["udhr"] = articles
    for kind, per_language in (("bible", VERSES), ("translations", TRANSLATIONS)):
        if kind not in kinds:
            continue
        if kind == "bible":
            if not (data / "bible" / "eng.jsonl.gz").is_file():
                continue
            pairs = sample_bible_pairs(data, per_language, seed, english_last=True, part="validation")
        else:
            try:
                pairs = sample_routed_pairs(data, [kind], wanted, sources, seed, per_language, part="validation")
            except HmdeError:  # no held-out translation of these languages
                continue
        grouped = defaultdict(list)
        for x, english, lang in pairs:
            if lang in wanted:
                grouped[lang].append((x, english))
        for lang, rows in grouped.items():
            out["languages"][lang][kind] = rows
    for lang in sorted(wanted):  # no pair kind is MasakhaNEWS: its training split is only ever validation here
        rows = read_masakhanews_headlines(data / "eval" / "masakhanews", lang, "train", NEWS)
        if len(rows) > 1:
            out["languages"][lang]["masakhanews"] = rows
    out["languages"] = dict(out["languages"])
    return out


def validate_route(teacher, routed, sets: dict, log=None) -> dict[str, dict]:
    """Per language of ``sets`` (:func:`validation_sets`): ``{"base": teacher's score, "routed": routed encoder's,
    "tasks": {task: [base, routed]}}``; English is embedded by the teacher throughout. ``teacher``, ``routed``:
    loaded models (:func:`hmde.encoders.model_loading.load_model`)."""
    from ..methods.vectorizer import DocumentVectorizer

    log = log or (lambda message: print(message, file=sys.stderr, flush=True))
    vectorizers = {id(m): DocumentVectorizer(m, "mean") for m in (teacher, routed)}

    def queries(model, texts):
        return np.asarray(model.lower.encode(list(texts), prompt_name="query"), np.float32)

    def documents(model, texts, lang):
        return np.asarray(vectorizers[id(model)].encode(list(texts), [lang] * len(texts)), np.float32)

    concepts = sorted(sets["udhr_english"])
    english = documents(teacher, [sets["udhr_english"][c] for c in concepts], "eng") if concepts else None
    table = {}
    for i, (lang, tasks) in enumerate(sorted(sets["languages"].items())):
        scores: dict[str, list[float]] = {}
        for task, rows in tasks.items():
            english_rows = None if task in ("udhr", "masakhanews") else queries(teacher, [e for _, e in rows])
            scores[task] = []
            for model in (teacher, routed):
                if task == "udhr":  # among the validation articles both sides have, both ways
                    named = sorted(rows)
                    found = documents(model, [rows[c] for c in named], lang)
                    theirs = english[[concepts.index(c) for c in named]]
                    scores[task].append((mean_reciprocal_rank(found, theirs) + mean_reciprocal_rank(theirs, found)) / 2)
                elif task == "masakhanews":
                    heads = queries(model, [h for h, _ in rows])
                    scores[task].append(mean_reciprocal_rank(heads, documents(model, [t for _, t in rows], lang)))
                else:  # (text, English text) pairs, both as queries, English by the teacher
                    scores[task].append(mean_reciprocal_rank(queries(model, [x for x, _ in rows]), english_rows))
        table[lang] = {"base": float(np.mean([s[0] for s in scores.values()])),
                       "routed": float(np.mean([s[1] for s in scores.values()])), "tasks": scores}
        log(f"validation {i + 1}/{len(sets['languages'])}: {lang} {table[lang]['base']:.3f} -> "
            f"{table[lang]['routed']:.3f}")
    return table


def choose_route(table: dict[str, dict], min_gain: float = 0.0) -> list[str]:
    """The languages whose routed validation score beats the teacher's by more than ``min_gain``, sorted."""
    return sorted(lang for lang, row in table.items() if row["routed"] - row["base"] > min_gain)


def selected_route(starting_model: str, routed_folder, data, served, kinds, config, device: str) -> dict:
    """The ``route.json`` record of a run that chooses its route (``hmde sentence-stage --select-route``): the
    languages ``served`` scored on the validation slice by ``starting_model`` and by the routed encoder as saved in
    ``routed_folder``, those that gain chosen; said in one line."""
    from ..encoders.model_loading import load_model

    sets = validation_sets(data, served, kinds, config.sources, seed=config.seed)
    teacher = load_model(starting_model, device)[1]
    table = validate_route(teacher, load_model(str(routed_folder), device)[1], sets)
    chosen = choose_route(table)
    print(f"route: {len(chosen)} of the {len(served)} languages trained for gain on the validation slice "
          f"({len(served) - len(table)} have none there and are not routed)", flush=True)
    return {"starting_model": starting_model, "languages": chosen, "trained_for": list(served), "validation": table}
