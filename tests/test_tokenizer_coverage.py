"""Tokenizer coverage per language (issue 80): <unk> share and tokens per word, words counted as the shared data
counts them."""

from __future__ import annotations

import json

import pytest

from hmde.text.tokenizer_coverage import tokenizer_coverage, word_count


def test_words_are_whitespace_tokens_or_unspaced_characters_by_hand():
    assert word_count("Everyone has the right to life.") == 6
    assert word_count("ሁሉም፡ሰው፡ነጻ") == 3  # Ethiopic's word separator separates as a space does
    assert word_count("我爱你") == pytest.approx(2.0)  # three Han characters / 1.5
    assert word_count("我爱你 ok") == pytest.approx(2 + 3 / 4)  # the space and "ok" at 4 a word
    assert word_count("ꦱꦧꦼꦤ꧀") == pytest.approx(5 / 1.5)  # Javanese script is written without spaces


def test_coverage_counts_unknown_pieces_of_a_script_the_vocabulary_lacks(hmde_dir):
    from hmde.encoders.model_loading import load_model

    tokenizer = load_model(str(hmde_dir), "cpu")[1].lower.tokenizer
    known = tokenizer_coverage(tokenizer, ["the river", "a city"])
    assert known.unknown == 0 and known.words == 4 and known.tokens >= 4
    assert known.tokens_per_word == known.tokens / 4
    unseen = tokenizer_coverage(tokenizer, ["ꦱꦧꦼꦤ꧀ ꦲꦤ꧀", "the river"])  # Javanese: not in the tiny vocabulary
    assert unseen.unknown >= 2 and 0 < unseen.unknown_share < 1
    assert tokenizer_coverage(tokenizer, []).tokens_per_word == 0.0


def test_the_shipped_table_carries_each_languages_coverage_and_the_unreadable_scripts_show():
    from hmde.text.language_tiers import TABLE

    rows = json.loads(TABLE.read_text(encoding="utf-8"))["hmde-e5"]
    assert all("unknown_tokens" in row and "tokens_per_word" in row for row in rows.values())
    assert rows["eng"]["unknown_tokens"] == 0 and 1 <= rows["eng"]["tokens_per_word"] < 2
    # scripts XLM-R's vocabulary lacks: most of their pieces are <unk>, which no training of the layers can read
    assert rows["jav_Java"]["unknown_tokens"] > 0.9 and rows["jav"]["unknown_tokens"] < 0.01
    assert rows["fuf_Adlm"]["unknown_tokens"] > 0.5
