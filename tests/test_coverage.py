"""hmde says once when documents or queries are in languages the model's lower encoder was not trained
on (issue 29: hmde-use, the default, gave near-random vectors for Greek or Hebrew without a word)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from hmde.cli.main import main
from hmde.text.coverage import document_language, script_language, warn_uncovered


@pytest.mark.parametrize("text, lang", [
    ("Η κυβέρνηση μειώνει τους φόρους.", "el"), ("הממשלה מורידה מסים.", "he"), ("መንግሥት ግብር ቀነሰ።", "am"),
    ("सरकार ने कर घटाए।", "hi"), ("ரஷ்யாவின் அதிபர்", "ta"), ("საქართველოს მთავრობა", "ka"),
    ("The government cuts taxes.", None), ("Правительство снижает налоги.", None), ("", None),
    ("123 456 !!!", None)])
def test_scripts_that_name_a_language(text, lang):
    assert script_language(text) == lang


@pytest.mark.parametrize("given, text, lang", [("ell", "x", "el"), ("zho", "x", "zh"), ("zh-TW", "x", "zh"),
                                                ("swh", "x", "sw"), (None, "Καλημέρα κόσμε", "el"),
                                                (None, ["Καλημέρα.", "Τι κάνεις;"], "el"), (None, "Hello", None)])
def test_document_language_prefers_the_given_code(given, text, lang):
    assert document_language(given, text) == lang


@pytest.mark.parametrize("code", ["npi_Deva", "ekk_Latn", "lvs_Latn", "jav_Latn", "tgl_Latn", "zsm_Latn", "khk_Cyrl",
                                  "uzn_Latn", "azj_Latn", "pbu_Arab", "ory_Orya", "ydd_Hebr", "plt_Latn", "gaz_Latn",
                                  "als_Latn", "fry", "yid", "iw", "tl"])
def test_codes_of_languages_e5_knows_are_covered(code):
    """FLORES-200's individual-language codes and 639-3 codes that sentence splitting's table lacks (each
    said 'not trained on' for hmde-e5 before langcodes read them) are languages of XLM-R."""
    from hmde.text.coverage import XLM_R

    assert document_language(code, "x") in XLM_R


@pytest.mark.parametrize("given, lang", [("English", "english"), ("x", "x"), ("zh-cn", "zh"), ("pt_BR", "pt")])
def test_a_tag_langcodes_cannot_read_is_kept_lower_cased(given, lang):
    assert document_language(given, "x") == lang


def test_no_warning_where_the_languages_are_unknown_or_covered(capsys):
    from hmde import HierarchicalEncoder

    mini = HierarchicalEncoder.from_pretrained("hmde-mini")
    assert not warn_uncovered("hmde-mini", mini, Counter({"el": 3}))  # its languages are not declared
    use = HierarchicalEncoder.from_pretrained("hmde-use")
    assert not warn_uncovered("hmde-use", use, Counter({"de": 2, "zh": 1, None: 4}))
    assert "not trained on" not in capsys.readouterr().err


def _docs(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_encode_with_hmde_use_warns_once_and_names_e5(tmp_path, capsys):
    docs = _docs(tmp_path / "d.jsonl", [
        {"doc_id": "1", "text": "Η κυβέρνηση μειώνει τους φόρους.", "lang": "ell"},
        {"doc_id": "2", "text": "הממשלה מורידה מסים."},  # no lang: the script says Hebrew
        {"doc_id": "3", "text": "Η ομάδα κέρδισε.", "lang": "ell"},
        {"doc_id": "4", "text": "The team won the final.", "lang": "eng"}])
    assert main(["encode", "hmde-use", str(docs), "-o", str(tmp_path / "v.npy"), "--no-progress"]) == 0
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if "not trained on" in line]
    assert len(warnings) == 1
    assert "3 documents" in warnings[0] and "el (2), he (1)" in warnings[0] and "USE-m" in warnings[0]
    assert "multilingual-e5-small covers them" in warnings[0]


def test_e5_is_silent_on_greek_and_warns_on_what_xlmr_lacks(tmp_path, capsys, e5_folder):
    docs = _docs(tmp_path / "d.jsonl", [{"doc_id": "1", "text": "Η κυβέρνηση μειώνει τους φόρους.", "lang": "ell"},
                                        {"doc_id": "2", "text": "Ixi yuy.", "lang": "quc"}])
    assert main(["encode", "multilingual-e5-small", str(docs), "-o", str(tmp_path / "v.npy"), "--method", "mean",
                 "--no-progress"]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "not trained on" in line]
    assert len(warnings) == 1 and "1 documents" in warnings[0] and "quc (1)" in warnings[0]
    assert "covers" not in warnings[0]


def test_search_warns_about_queries_in_other_scripts(tmp_path, capsys):
    docs = _docs(tmp_path / "d.jsonl", [{"doc_id": "1", "text": "The team won the final.", "lang": "eng"}])
    assert main(["index", "build", "hmde-use", str(docs), "-o", str(tmp_path / "idx"), "--no-progress"]) == 0
    assert "not trained on" not in capsys.readouterr().err
    assert main(["search", str(tmp_path / "idx"), "ποιος κέρδισε τον τελικό;"]) == 0
    err = capsys.readouterr().err
    assert "1 queries are in languages hmde-use's lower encoder (USE-m) was not trained on: el (1)" in err
