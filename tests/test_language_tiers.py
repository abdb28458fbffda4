"""Every language measured (issue 80): the bundled per-language table, its tiers, ``index info`` and the weak-tier
warning."""

import json
from collections import Counter

import pytest

from hmde.text import language_tiers
from hmde.text.language_tiers import language_tier, quality, tier_of, warn_weak, with_tiers


def test_tiers_by_score_at_their_edges():
    assert [tier_of(s) for s in (1.0, 0.9, 0.8999, 0.7, 0.6999, 0.0)] == \
        ["strong", "strong", "fair", "fair", "weak", "weak"]


def test_the_bundled_table_covers_the_shared_datas_languages_for_hmde_e5():
    table = quality("hmde-e5")
    assert len(table) >= 300  # Tatoeba's 112, UDHR's 388 and MasakhaNEWS's 16 languages, merged by code
    assert language_tier("hmde-e5", "eng") == language_tier("hmde-e5", "en") == "strong"
    assert language_tier("hmde-e5", "deu") == language_tier("hmde-e5", "de-AT")  # codes of one language agree
    assert language_tier("hmde-e5", "xx-unknown") == "unmeasured" and language_tier("hmde-e5", None) == "unmeasured"
    assert language_tier("some-folder", "eng") == "unmeasured"  # a model without a table
    assert {row["tier"] for row in table.values()} == {"strong", "fair", "weak"}
    for row in table.values():
        assert row["tier"] == tier_of(row["score"])


def test_index_info_names_each_language_with_its_tier():
    info = with_tiers("hmde-e5", {"eng": 3, "unknown": 1})
    assert info["eng"]["tier"] == "strong" and info["eng"]["documents"] == 3 and 0.9 <= info["eng"]["score"] <= 1
    assert info["unknown"] == {"documents": 1, "tier": "unmeasured"}
    assert info["eng"]["unknown_tokens"] == 0.0  # the tokenizer's coverage of the language (issue 80)


def test_a_collection_mostly_in_weak_languages_is_said_in_one_line(monkeypatch, capsys):
    monkeypatch.setattr(language_tiers, "quality", lambda model: {"yo": {"score": 0.41, "tier": "weak"},
                                                                  "en": {"score": 0.97, "tier": "strong"}})
    assert warn_weak("m", Counter({"yor": 3, "eng": 2}), "documents")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "3 of 5 documents" in err and "yor (0.41)" in err and "weak" in err
    assert not warn_weak("m", Counter({"yor": 2, "eng": 2}), "documents")  # half is not most
    assert not warn_weak("m", Counter({None: 4}), "documents")
    assert capsys.readouterr().err == ""
    # a script the tokenizer cannot read is named as such
    monkeypatch.setattr(language_tiers, "quality", lambda model: {"jv": {"score": 0.05, "tier": "weak",
                                                                         "unknown_tokens": 0.976}})
    assert warn_weak("m", Counter({"jav_Java": 3}), "documents")
    assert "jav_Java (0.05; 98% of its tokens <unk>)" in capsys.readouterr().err


def test_hmde_index_info_prints_the_tiers(tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    from hmde.cli.main import main

    src = tmp_path / "d.jsonl"
    src.write_text("".join(json.dumps({"doc_id": str(i), "lang": "eng", "text": t}) + "\n"
                           for i, t in enumerate(["The volcano erupted.", "Ash covered the villages."])))
    assert main(["index", "build", "hmde-mini", str(src), "-o", str(tmp_path / "idx"), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["index", "info", str(tmp_path / "idx"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["language_quality"] == {"eng": {"documents": 2, "tier": "unmeasured"}}  # hmde-mini: no table
