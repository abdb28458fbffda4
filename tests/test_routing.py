"""hmde-auto, the default model name: one model per job, chosen by the job's languages and said."""

from __future__ import annotations

import argparse
import json
from collections import Counter

import pytest

from hmde.cli.eval_languages import eval_languages

from hmde.encoders import routing
from hmde.errors import ModelLoadError


@pytest.fixture()
def installed_e5(monkeypatch, hmde_dir):
    """hmde-e5 stands for a small hmde folder here (the real one is a bundled model)."""
    monkeypatch.setattr(routing, "E5_MODEL", str(hmde_dir))
    return str(hmde_dir)


def test_use_m_languages_get_hmde_use_and_any_other_gets_hmde_e5_for_the_whole_job(installed_e5):
    assert routing.model_for(["en", "deu", "fr-FR", "zh-tw"])[0] == routing.USE_MODEL
    model, why = routing.model_for(Counter({"en": 10, "ell": 1, None: 3}))
    assert model == installed_e5 and why.startswith("el is outside USE-m's 16")
    assert routing.model_for(Counter({"en": 4, "sw": 0}))[0] == routing.USE_MODEL  # a count of 0 is no document


def test_a_job_of_unknown_languages_keeps_hmde_use_and_says_how_to_route(installed_e5):
    model, why = routing.model_for([None, None])
    assert model == routing.USE_MODEL and "give them a 'lang' field or --lang" in why


def test_without_hmde_e5_installed_the_route_stays_on_hmde_use_and_says_why(monkeypatch, tmp_path):
    monkeypatch.setattr(routing, "E5_MODEL", str(tmp_path / "not-there"))
    model, why = routing.model_for(["en", "sw"])
    assert model == routing.USE_MODEL and why == "sw is outside USE-m's 16 languages but " \
        f"{tmp_path / 'not-there'} is not installed"


def test_only_hmde_auto_is_routed(capsys, installed_e5):
    assert routing.route("hmde-mini", ["el"]) == "hmde-mini" and capsys.readouterr().err == ""
    assert routing.route(routing.AUTO, ["el", "en"]) == installed_e5
    assert capsys.readouterr().err.startswith(f"hmde: hmde-auto -> {installed_e5}: el is outside")


def test_loading_hmde_auto_without_a_job_says_how_to_choose():
    from hmde import HierarchicalEncoder

    with pytest.raises(ModelLoadError, match=r"picks hmde-use or hmde-e5 by the languages of a job; from Python, "
                                             r"hmde\.encoders\.routing\.model_for"):
        HierarchicalEncoder.from_pretrained("hmde-auto")


@pytest.mark.parametrize("flags, expected", [
    ({"langs": "deu,fra", "pivot": "eng"}, ["deu", "fra", "eng"]),
    ({"pairs": "de-en,en-el", "pivot": "en"}, ["de", "en", "en", "el", "en"]),
    ({"query_lang": "eng", "doc_lang": "swh"}, ["eng", "swh"]),
    ({"masakhanews": "x", "targets": "hau,fra"}, ["hau", "fra", "en"]),
    ({"pivot": "eng"}, None),  # every file of a folder against the pivot: not known from the flags
])
def test_eval_runs_are_routed_by_the_languages_their_flags_name(flags, expected):
    assert eval_languages(argparse.Namespace(**flags)) == expected


def _write(path, docs):
    path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")


def test_encode_and_index_build_route_hmde_auto_by_the_documents_and_the_index_records_the_choice(
        installed_e5, tmp_path, capsys):
    from hmde.cli.main import main
    from hmde.index.store import DocumentIndex

    docs = tmp_path / "docs.jsonl"
    _write(docs, [{"doc_id": "1", "text": "The cat sleeps.", "lang": "en"},
                  {"doc_id": "2", "text": "Η γάτα κοιμάται στον καναπέ."}])  # Greek by its script: no lang field
    assert main(["encode", "hmde-auto", str(docs), "-o", str(tmp_path / "v.npy"), "--no-progress", "--device",
                 "cpu"]) == 0
    assert f"hmde: hmde-auto -> {installed_e5}: el is outside USE-m's 16 languages" in capsys.readouterr().err
    assert main(["index", "build", "hmde-auto", str(docs), "-o", str(tmp_path / "idx"), "--no-progress", "--device",
                 "cpu"]) == 0
    index = DocumentIndex.open(tmp_path / "idx")
    try:
        assert index.meta.model == installed_e5  # searches and --add keep the model it was built with
    finally:
        index.close()
