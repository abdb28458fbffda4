"""build-pairs over several sources (folders of the docs/ corpus's shape): each source sampled on its own
cap, language pairs capped, languages compared as normalised codes, a report per source and language."""

from __future__ import annotations

import gzip
import json

import pytest

from hmde.cli.main import main
from hmde.errors import InputError
from hmde.pretraining.pairs import PairOptions, build_pairs, keep_rates, read_pairs


def page(lang, concept, cats, text):
    return {"doc_id": f"{lang}/{concept}", "concept": concept, "lang": lang, "text": text, "categories": cats}


def write_source(root, name, pages_by_lang):
    folder = root / name
    folder.mkdir(parents=True)
    for lang, pages in pages_by_lang.items():
        with gzip.open(folder / f"{lang}.jsonl.gz", "wt", encoding="utf-8") as f:
            f.writelines(json.dumps(p, ensure_ascii=False) + "\n" for p in pages)
    return folder


@pytest.fixture()
def sources(tmp_path):
    """help: 20 concepts in eng/deu/fra, two categories (hard negatives); udhr: 6 articles in eng/deu/ekk (Estonian's
    individual code) and spa, one category."""
    langs = ("eng", "deu", "fra")
    help_pages = {lang: [page(lang, f"help/{i}", ["menus" if i % 2 else "dialogs"], f"{lang} help page {i}. Text {i}.")
                         for i in range(20)] for lang in langs}
    udhr = {lang: [page(lang, f"udhr.{i}", ["udhr"], f"{lang} article {i}. Everyone has rights.") for i in range(6)]
            for lang in ("eng", "deu", "ekk", "spa")}
    return write_source(tmp_path, "help", help_pages), write_source(tmp_path, "udhr", udhr)


def test_a_folder_is_a_source_and_each_source_has_its_own_cap(sources, tmp_path):
    summary = build_pairs(list(sources), tmp_path / "p.parquet", PairOptions(source_max_pairs=10), show_progress=False)
    assert set(summary.per_source) == {"help", "udhr"}
    # help has 60 pairs and udhr 36; each kept about 10 (hash sampling), so neither drowns the other
    assert 5 <= summary.per_source["help"] <= 16 and 5 <= summary.per_source["udhr"] <= 16
    pairs, docs, _ = read_pairs(tmp_path / "p.parquet")
    assert len(pairs) == summary.pairs == sum(summary.per_source.values())
    assert summary.per_language["eng"] == sum(n for lp, n in summary.per_language_pair.items() if "eng" in lp.split("-"))
    every = build_pairs(list(sources), tmp_path / "all.parquet", PairOptions(), show_progress=False)
    assert every.per_source == {"help": 60, "udhr": 36}  # 3 pairs per help concept, 6 per article


def test_one_source_has_a_cap_of_its_own(sources, tmp_path):
    summary = build_pairs(list(sources), tmp_path / "p.parquet", PairOptions(source_caps={"udhr": 6}),
                          show_progress=False)
    assert summary.per_source["help"] == 60 and summary.per_source["udhr"] <= 10


def test_hard_negatives_stay_in_their_source_and_language(sources, tmp_path):
    build_pairs(list(sources), tmp_path / "p.parquet", PairOptions(), show_progress=False)
    pairs, docs, _ = read_pairs(tmp_path / "p.parquet")
    for p in pairs:
        for side, neg in (("doc_a", "neg_a"), ("doc_b", "neg_b")):
            source = p[side].split("/")[1].split(".")[0]  # help or udhr
            assert p[neg].split("/")[0] == p[side].split("/")[0]  # same language
            assert p[neg].split("/")[1].split(".")[0] == source and p[neg] != p[side]


def test_languages_are_compared_as_normalised_codes(sources, tmp_path):
    summary = build_pairs(list(sources), tmp_path / "p.parquet", PairOptions(exclude_languages=["est", "de"]),
                          show_progress=False)
    assert set(summary.per_language) == {"eng", "fra", "spa"}  # est dropped ekk, de dropped deu
    kept = build_pairs(list(sources), tmp_path / "k.parquet", PairOptions(languages=["en", "et"]), show_progress=False)
    assert set(kept.per_language) == {"eng", "ekk"}


def test_keep_rates_share_a_source_budget_by_count_to_the_alpha():
    counts = {("a", "x-y"): 100, ("a", "x-z"): 1, ("b", "x-y"): 10}
    rates = keep_rates(counts, PairOptions(alpha=0.0, source_max_pairs=10))
    # alpha 0: source a's budget of 10 split evenly over its 2 language pairs (5 each; x-z has only 1)
    assert rates[("a", "x-y")] == pytest.approx(0.05) and rates[("a", "x-z")] == 1.0 and rates[("b", "x-y")] == 1.0
    capped = keep_rates(counts, PairOptions(max_per_language_pair=4))
    assert capped[("a", "x-y")] == pytest.approx(0.04) and capped[("b", "x-y")] == pytest.approx(0.4)
    total = keep_rates(counts, PairOptions(source_max_pairs=50, max_pairs=20))
    assert sum(total[k] * n for k, n in counts.items()) == pytest.approx(20)
    # one source and max_pairs only: the sampling of before (one budget over the language pairs)
    one = {("a", "x-y"): 100, ("a", "x-z"): 50}
    assert keep_rates(one, PairOptions(max_pairs=30)) == {("a", "x-y"): pytest.approx(0.2), ("a", "x-z"): pytest.approx(0.2)}


def test_a_doc_id_in_two_sources_is_refused(sources, tmp_path):
    twin = write_source(tmp_path, "twin", {"eng": [page("eng", "help/1", ["menus"], "another page. Text.")]})
    with pytest.raises(InputError, match="doc_id 'eng/help/1' is in two sources"):
        build_pairs([sources[0], twin], tmp_path / "p.parquet", PairOptions(), show_progress=False)


def test_cli_reports_sources_and_languages_and_takes_caps(sources, tmp_path, capsys):
    codes = ",".join(["eng", "deu", "fra", "spa"] + [f"x{i:02d}" for i in range(80)])  # a list longer than a file name
    assert main(["build-pairs", *map(str, sources), "-o", str(tmp_path / "p.parquet"), "--languages", codes,
                 "--source-max-pairs", "100", "--source-max-pairs", "udhr=3", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "pairs per source: help 60, udhr " in out and "pairs with a page in each language: " in out
    assert "language pairs" in out
    with pytest.raises(SystemExit) as exited:
        main(["build-pairs", str(sources[0]), "-o", str(tmp_path / "q.parquet"), "--source-max-pairs", "x=0"])
    assert exited.value.code == 2 and "SOURCE=N" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["build-pairs", str(empty), "-o", str(tmp_path / "r.parquet")]) == 2
    assert "holds no corpus file" in capsys.readouterr().err
