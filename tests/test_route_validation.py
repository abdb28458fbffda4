"""Choosing a routed encoder's route on the validation slice (issue 80, hmde.pretraining.route_validation): each
language is routed only where texts the run never saw score higher through the routed encoder."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from hmde.evaluation.ranks import mean_reciprocal_rank
from hmde.pretraining.route_validation import choose_route, validate_route, validation_sets


def write(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)


def test_mrr_by_hand_ties_count_against_the_query():
    queries = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    candidates = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]])
    # query 0: its candidate 0 is first (1/1); query 1: candidate 1 (0.8) is behind candidate 2 (1.0): 1/2;
    # query 2 (45 degrees): candidates 0 and 2 tie at 0.707 and candidate 1 scores 0.99; candidate 2 ranks 3rd
    assert mean_reciprocal_rank(queries, candidates, [0, 1, 2]) == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)
    # the languages table's count: a tie ranks below the right candidate (query 2: 2nd, behind candidate 1 alone)
    lenient = mean_reciprocal_rank(queries, candidates, [0, 1, 2], ties_against=False)
    assert lenient == pytest.approx((1 + 1 / 2 + 1 / 2) / 3)
    assert mean_reciprocal_rank(queries[:2] * 5, candidates[[0, 2]]) == 1.0  # cosines: lengths do not count


def test_choose_route_keeps_the_languages_that_gain_by_more_than_the_margin():
    table = {"quc": {"base": 0.2, "routed": 0.5}, "tso": {"base": 0.8, "routed": 0.7},
             "nzi": {"base": 0.5, "routed": 0.5}, "kab": {"base": 0.4, "routed": 0.43}}
    assert choose_route(table) == ["kab", "quc"]  # a tie keeps the starting model
    assert choose_route(table, min_gain=0.05) == ["quc"]


def test_the_validation_sets_hold_the_validation_slice_and_masakhanews_training_split(tmp_path):
    for lang, word in (("eng", "English"), ("quc", "Kiche"), ("ibo", "Igbo")):
        write(tmp_path / "docs" / "udhr" / f"{lang}.jsonl.gz",
              [{"concept": f"udhr.{n}", "text": f"{word} article {n}."} for n in range(1, 31)])
    news = tmp_path / "eval" / "masakhanews" / "ibo" / "train.tsv.gz"
    news.parent.mkdir(parents=True)
    with gzip.open(news, "wt", encoding="utf-8") as f:
        f.write("category\theadline\ttext\turl\n" + "".join(f"sports\tHeadline {i}\tStory {i}.\tu\n" for i in range(3)))
    sets = validation_sets(tmp_path, ["quc", "ibo"], ["udhr"])
    assert sorted(sets["udhr_english"]) == sorted(f"udhr.{n}" for n in (4, 5, 7, 12, 16, 26))  # the candidates
    assert sorted(sets["languages"]["quc"]["udhr"]) == sorted(f"udhr.{n}" for n in (4, 5, 7, 12, 16, 26))
    assert sets["languages"]["ibo"]["masakhanews"] == [(f"Headline {i}", f"Story {i}.") for i in range(3)]
    assert "masakhanews" not in sets["languages"]["quc"]


def test_a_routed_encoder_no_better_than_its_teacher_is_routed_nowhere(tmp_path, hmde_dir):
    """The same model on both sides: every language ties, so none is routed (the head keeps the starting model)."""
    from hmde.encoders.model_loading import load_model

    for lang, word in (("eng", "English rights"), ("quc", "Kiche ri")):
        write(tmp_path / "docs" / "udhr" / f"{lang}.jsonl.gz",
              [{"concept": f"udhr.{n}", "text": f"{word} article {n} " + "word " * n} for n in range(1, 31)])
    model = load_model(str(hmde_dir), "cpu")[1]
    table = validate_route(model, model, validation_sets(tmp_path, ["quc"], ["udhr"]), log=lambda _: None)
    assert list(table) == ["quc"] and table["quc"]["base"] == table["quc"]["routed"] > 0
    assert len(table["quc"]["tasks"]["udhr"]) == 2 and choose_route(table) == []
