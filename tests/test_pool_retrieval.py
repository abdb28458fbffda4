"""Sentence retrieval among a large pool (the lightweight-encoder paper's protocol; issue 16, item 9)."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from hmde.errors import HmdeError
from hmde.evaluation.pool_retrieval import build_pool_task, pool_p_at_1


def _parallel(tmp_path, n=60):
    root = tmp_path / "parallel"
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    with gzip.open(root / "a" / "deu-eng.tsv.gz", "wt", encoding="utf-8") as f:
        f.writelines(f"Satz {i}\tSentence {i}\n" for i in range(n))
        f.write("Satz 0\tAnother translation of sentence 0\n")  # an ambiguous query: its first translation is gold
    with gzip.open(root / "b" / "eng-fra.tsv.gz", "wt", encoding="utf-8") as f:
        f.writelines(f"Other English {i}\tAutre {i}\n" for i in range(n))
        f.write("Sentence 3\tPhrase 3\n")  # a duplicate of a possible gold: never a second copy in the pool
    return root


def test_the_pool_holds_every_gold_once_and_the_rest_are_distinct_distractors(tmp_path):
    root = _parallel(tmp_path)
    task = build_pool_task(root, "deu", "eng", n_queries=20, pool_size=100, seed=1)
    assert len(task.queries) == 20 and len(task.pool) == 100 == len(set(task.pool))
    pool = set(task.pool)
    assert all(g in pool for g in task.gold)
    assert all(g == "Sentence " + q.split()[1] for q, g in zip(task.queries, task.gold))
    assert task == build_pool_task(root, "deu", "eng", n_queries=20, pool_size=100, seed=1)  # seeded
    assert task.queries != build_pool_task(root, "deu", "eng", n_queries=20, pool_size=100, seed=2).queries
    with pytest.raises(HmdeError, match="fewer than --pool 1000"):
        build_pool_task(root, "deu", "eng", n_queries=20, pool_size=1000)


def test_p_at_1_is_the_share_of_queries_whose_nearest_candidate_is_their_translation(tmp_path):
    task = build_pool_task(_parallel(tmp_path), "deu", "eng", n_queries=10, pool_size=50, seed=0)
    number = {t: int(t.split()[-1]) if t.split()[-1].isdigit() else 999 for t in task.pool + task.queries}

    def encode(texts):  # "Satz i" and "Sentence i" share a vector; a distractor "Other English i" a nearby one
        out = np.zeros((len(texts), 200), np.float32)
        for r, t in enumerate(texts):
            out[r, number[t] % 200] = 1.0
            out[r, (number[t] + 100) % 200] = 0.3 if t.startswith("Other") else 0.0
        return out

    assert pool_p_at_1(encode, task)["p@1"] == 1.0
    wrong = lambda texts: np.ones((len(texts), 4), np.float32)  # noqa: E731 - every candidate ties: index 0 wins
    expected = np.mean([task.pool[0] == g for g in task.gold])
    assert pool_p_at_1(wrong, task)["p@1"] == expected


def test_the_cli_runs_the_protocol(tmp_path, labse_dir):
    from hmde.cli.main import main

    out = tmp_path / "r.json"
    assert main(["eval", "pool-xsr", str(labse_dir), "--parallel", str(_parallel(tmp_path)), "--langs", "deu",
                 "--queries", "10", "--pool", "50", "--no-progress", "-o", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["metrics"]["languages"]["deu"]["pool"] == 50 and 0 <= result["metrics"]["average"] <= 1
    assert result["settings"]["pool"] == 50
