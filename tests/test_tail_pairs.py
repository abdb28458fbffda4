"""Pairs for the languages' tail (issue 80): UDHR articles outside the development slice and Bible verses of
chapters whose verse counts agree, each paired with English, capped per language, held-out languages out."""

from __future__ import annotations

import gzip
import json

import pytest

from hmde.errors import HmdeError
from hmde.pretraining.sentence_stage import SentenceStageConfig, dev_concept, sample_stage_pairs
from hmde.pretraining.tail_pairs import sample_bible_pairs, sample_udhr_pairs


def write(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)


def udhr(data, lang, word):
    write(data / "docs" / "udhr" / f"{lang}.jsonl.gz",
          [{"concept": f"udhr.{n}", "lang": lang, "text": f"{word} article {n}."} for n in range(1, 31)])


def test_udhr_pairs_leave_the_development_articles_out_and_pair_every_other_with_english(tmp_path):
    dev = {f"udhr.{n}" for n in range(1, 31) if dev_concept("udhr", f"udhr.{n}")}
    assert len(dev) == 8  # the articles benchmarks/languages.py --udhr-articles dev scores
    languages = {"English": "eng", "Kiche": "quc", "Ukrainian": "ukr", "Javanese": "jav_Java"}
    for word, lang in languages.items():
        udhr(tmp_path, lang, word)
    pairs = sample_udhr_pairs(tmp_path)
    assert len(pairs) == 2 * 22  # quc and jav_Java; ukr is held out of training
    for x, y, y_lang in pairs:
        english, other = (x, y) if x.startswith("English") else (y, x)
        assert english.split()[-1] == other.split()[-1]  # the same article
        assert f"udhr.{english.split()[-1].rstrip('.')}" not in dev
        assert y_lang == languages[y.split()[0]]
    assert {x.startswith("English") for x, _, _ in pairs} == {True, False}  # both directions drawn
    assert len(sample_udhr_pairs(tmp_path, per_language=5)) == 10
    assert sample_udhr_pairs(tmp_path) == pairs and sample_udhr_pairs(tmp_path, seed=1) != pairs  # seeded
    with pytest.raises(HmdeError, match="no English UDHR to pair with"):
        sample_udhr_pairs(tmp_path / "nothing")


def test_bible_pairs_take_verses_of_chapters_whose_counts_agree(tmp_path):
    verses = [f"Verse number {i} of the chapter." for i in range(5)]
    write(tmp_path / "bible" / "eng.jsonl.gz", [{"concept": "MAT.3", "verses": verses},
                                                {"concept": "MAT.4", "verses": verses}])
    write(tmp_path / "bible" / "acu.jsonl.gz", [{"concept": "MAT.3", "verses": [f"Achuar {i} aarmawaitai." for i in
                                                                               range(5)]},
                                                {"concept": "MAT.4", "verses": ["merged verses", "x"]}])
    write(tmp_path / "bible" / "swh.jsonl.gz", [{"concept": "MAT.3", "verses": verses}])  # held out
    pairs = sample_bible_pairs(tmp_path)
    assert len(pairs) == 5  # MAT.4's counts differ: left out
    for x, y, y_lang in pairs:
        achuar, english = (x, y) if x.startswith("Achuar") else (y, x)
        assert achuar.split()[1] == english.split()[2]  # verse i with verse i
        assert y_lang == ("acu" if y is achuar else "eng")
    assert len(sample_bible_pairs(tmp_path, per_language=2)) == 2
    for path in (tmp_path / "bible").glob("*.jsonl.gz"):  # MAT.1 and MAT.2: the development slice's chapters
        with gzip.open(path, "rt", encoding="utf-8") as f:
            rows = [json.loads(line) for line in f]
        write(path, [dict(r, concept=r["concept"].replace("MAT.3", "MAT.1").replace("MAT.4", "MAT.2")) for r in rows])
    assert dev_concept("bible", "MAT.1") and dev_concept("bible", "MAT.2")
    assert sample_bible_pairs(tmp_path) == []


def test_bible_pairs_never_train_on_the_alignment_verse_chapters_and_a_total_is_spread_over_languages(tmp_path):
    """Sentence alignment's verse table (benchmarks/sentence_alignment.py) aligns ALIGNMENT_DEV_CHAPTERS: no Bible
    pair a run trains on comes from them (validation, never trained on, keeps them); ``total`` takes as many
    verses from each language; the stage's ``bible`` share is of ``config.pairs``."""
    from hmde.pretraining.dev_slice import ALIGNMENT_DEV_CHAPTERS, in_part

    aligned, validated = "JHN.3", "ROM.8"  # neither in the development slice; ROM.8 in the validation slice
    assert {aligned, validated} <= set(ALIGNMENT_DEV_CHAPTERS) and not dev_concept("bible", aligned)
    assert in_part("validation", "bible", validated) and not in_part("validation", "bible", aligned)
    free = [c for c in (f"MRK.{n}" for n in range(1, 17)) if not dev_concept("bible", c)][:3]
    chapters = [aligned, validated, *free]
    english = {c: [f"{c} verse {i} in English." for i in range(10)] for c in chapters}
    write(tmp_path / "bible" / "eng.jsonl.gz", [{"concept": c, "verses": v} for c, v in english.items()])
    for lang, many in (("acu", 10), ("quc", 3)):
        write(tmp_path / "bible" / f"{lang}.jsonl.gz",
              [{"concept": c, "verses": [f"{lang} {c} verse {i} aarmawaitai." if i < many or c != free[0] else ""
                                         for i in range(10)]} for c in chapters])
    pairs = sample_bible_pairs(tmp_path, per_language=1000)
    assert pairs and not [p for p in pairs if aligned in p[0] + p[1] or validated in p[0] + p[1]]
    assert len(pairs) == 2 * 30 - 7  # three free chapters of 10 verses in each language, quc's 7 blank verses out
    validation = sample_bible_pairs(tmp_path, per_language=1000, part="validation")
    assert any(validated in x + y for x, y, _ in validation)
    spread = sample_bible_pairs(tmp_path, total=10)
    assert sorted(lang if lang != "eng" else x.split()[0] for x, _, lang in spread) == ["acu"] * 5 + ["quc"] * 5
    staged = sample_stage_pairs(tmp_path, SentenceStageConfig(pairs=40), {"bible": 0.5})
    assert len(staged) == 20 and not [p for p in staged if aligned in p[0] + p[1] or validated in p[0] + p[1]]


def test_the_stage_mixes_the_tail_kinds_with_their_languages_for_hard_negatives(tmp_path):
    for lang, word in (("eng", "English"), ("quc", "Kiche")):
        udhr(tmp_path, lang, word)
    tagged = sample_stage_pairs(tmp_path, SentenceStageConfig(), {"udhr": 0.0}, with_languages=True)
    assert len(tagged) == 22 and {lang for *_, lang in tagged} <= {"eng", "quc"}
    assert sample_stage_pairs(tmp_path, SentenceStageConfig(), {"udhr": 0.0}) == [(x, y) for x, y, _ in tagged]


def test_routed_pairs_put_the_language_first_and_english_second_for_the_languages_named_alone(tmp_path):
    """A routed encoder's pairs (hmde sentence-stage --english-side teacher): (text, English, its language), of the
    languages it serves (the script named: jav_Java is not jav), translations capped per language."""
    from hmde.pretraining.tail_pairs import sample_routed_pairs

    for word, lang in {"English": "eng", "Kiche": "quc", "Javanese": "jav_Java", "Latin": "jav"}.items():
        udhr(tmp_path, lang, word)
    folder = tmp_path / "parallel" / "tatoeba"
    folder.mkdir(parents=True)
    for name, line in (("eng-quc", "Sentence {i}.\tKiche {i}.\n"), ("kab-eng", "Kabyle {i}.\tSentence {i}.\n"),
                       ("deu-eng", "Satz {i}.\tSentence {i}.\n")):
        with gzip.open(folder / f"{name}.tsv.gz", "wt", encoding="utf-8") as f:
            f.writelines(line.format(i=i) for i in range(7))
    pairs = sample_routed_pairs(tmp_path, ["translations", "udhr"], ["quc", "jav_Java", "kab"], per_language=5)
    assert sorted({lang for *_, lang in pairs}) == ["jav_Java", "kab", "quc"]
    assert sum(lang == "quc" for *_, lang in pairs) == 5 + 22 and sum(lang == "kab" for *_, lang in pairs) == 5
    for text, english, lang in pairs:
        assert english.startswith(("English", "Sentence")) and text.split()[0] in ("Kiche", "Javanese", "Kabyle")
        assert text.split()[-1] == english.split()[-1]  # the same article or sentence
    assert sample_routed_pairs(tmp_path, ["udhr"], ["quc"]) == sample_routed_pairs(tmp_path, ["udhr"], ["quc"])
    with pytest.raises(HmdeError, match="not titles"):
        sample_routed_pairs(tmp_path, ["titles", "udhr"], ["quc"])
    with pytest.raises(HmdeError, match=r"\(translations, udhr, bible\); not spans"):  # spans know their language, but
        sample_routed_pairs(tmp_path, ["spans", "udhr"], ["quc"])  # are no (language, English) pairs of a route's
    with pytest.raises(HmdeError, match="no udhr pairs with English in xyz"):
        sample_routed_pairs(tmp_path, ["udhr"], ["xyz"])


def test_the_validation_slice_takes_a_quarter_of_what_the_development_slice_leaves_and_never_meets_it(tmp_path):
    """A routed run that chooses its route (--select-route) trains on the training part; the route is chosen on the
    validation part; the table's development articles are in neither."""
    from hmde.pretraining.dev_slice import in_part, validation_item
    from hmde.pretraining.tail_pairs import sample_routed_pairs

    articles = [f"udhr.{n}" for n in range(1, 31)]
    validation = [c for c in articles if validation_item("udhr", c)]
    assert validation == ["udhr.4", "udhr.5", "udhr.7", "udhr.12", "udhr.16", "udhr.26"]
    assert not {c for c in validation if dev_concept("udhr", c)}
    for word, lang in {"English": "eng", "Kiche": "quc"}.items():
        udhr(tmp_path, lang, word)
    folder = tmp_path / "parallel" / "tatoeba"
    folder.mkdir(parents=True)
    with gzip.open(folder / "eng-quc.tsv.gz", "wt", encoding="utf-8") as f:
        f.writelines(f"Sentence {i}.\tKiche {i}.\n" for i in range(400))
    by_part = {part: sample_routed_pairs(tmp_path, ["translations", "udhr"], ["quc"], per_language=1000, part=part)
               for part in ("all", "training", "validation")}
    assert sorted(by_part["all"]) == sorted(by_part["training"] + by_part["validation"])
    assert not set(by_part["training"]) & set(by_part["validation"])
    held = [e for _, e, _ in by_part["validation"] if e.startswith("English")]
    assert sorted(held) == sorted(f"English article {c.split('.')[1]}." for c in validation)
    sentences = [e for _, e, _ in by_part["validation"] if e.startswith("Sentence")]
    assert 70 < len(sentences) < 130 and all(validation_item("translations", e) for e in sentences)  # a quarter
    assert sum(e.startswith("English") for _, e, _ in by_part["training"]) == 22 - 6
    with pytest.raises(ValueError, match="part must be one of all, training, validation"):
        in_part("dev", "udhr", "udhr.1")
