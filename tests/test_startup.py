"""What a command does before it loads a model (issue 48): parsing imports no deep-learning library, a
mistyped model name is refused before one is imported, flags are never abbreviated."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hmde.cli.main import main

HEAVY = ("torch", "transformers", "sentence_transformers", "sklearn", "scipy", "faiss", "duckdb", "pyarrow")


def imported_after(code: str) -> set[str]:
    """The heavy modules a fresh interpreter holds after running ``code``."""
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys, json\nprint(json.dumps(sorted(m for m in "
                          f"{HEAVY!r} if m in sys.modules)))"], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_building_the_parser_and_importing_hmde_load_no_deep_learning_library():
    assert imported_after("import hmde\nfrom hmde.cli.main import build_parser\nbuild_parser()") == set()
    assert imported_after("from hmde.cli.main import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n"
                          "    pass") == set()
    assert "torch" in imported_after("from hmde import HierarchicalEncoder")  # loaded on first use


def test_a_mistyped_model_name_or_a_missing_input_is_refused_before_any_heavy_import(tmp_path):
    docs = tmp_path / "d.jsonl"
    docs.write_text(json.dumps({"doc_id": "a", "text": "One."}) + "\n")
    for argv in (["encode", "hmde-e5x", str(docs), "-o", str(tmp_path / "o.npy")],
                 ["encode", "hmde-e5", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "o.npy")]):
        code = f"from hmde.cli.main import main\nassert main({argv!r}) == 2"
        assert imported_after(code) == set(), argv


def test_flags_are_never_abbreviated(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["index", "build", "x.jsonl", "-o", str(tmp_path / "i"), "--lang-f", "eng"])
    assert "unrecognized arguments: --lang-f" in capsys.readouterr().err


def test_index_build_takes_a_language_for_every_document(hmde_dir, tmp_path, capsys):
    docs = tmp_path / "d.jsonl"
    docs.write_text("".join(json.dumps({"doc_id": i, "text": t}) + "\n"
                            for i, t in (("a", "Die Katze schläft."), ("b", "Der Hund bellt."))))
    assert main(["index", "build", str(hmde_dir), str(docs), "-o", str(tmp_path / "i"), "--lang", "deu",
                 "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["search", str(tmp_path / "i"), "Katze", "--lang", "de", "--json"]) == 0  # de finds deu
    hits = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert {h["lang"] for h in hits} == {"deu"} and len(hits) == 2


def test_help_groups_the_engine_and_lawdr_options_and_explains_every_field(capsys):
    with pytest.raises(SystemExit):
        main(["index", "build", "--help"])
    text = capsys.readouterr().out
    for title in ("Ray engine (--engine ray):", "LAWDR's fit (--method lawdr):", "document length (the paper's"):
        assert title in text
    from hmde.cli.main import build_parser

    def subparser(parser, name):
        return next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices[name]

    build = subparser(subparser(build_parser(), "index"), "build")
    helps = {s: a.help for a in build._actions for s in a.option_strings}
    for flag in ("--text-field", "--id-field", "--lang-field", "--device", "--lang"):
        assert helps[flag] and len(helps[flag]) > 10, flag


def test_a_measure_deeper_than_the_run_says_so(hmde_dir, tmp_path, capsys):
    docs = tmp_path / "d.jsonl"
    docs.write_text("".join(json.dumps({"doc_id": f"d{i}", "text": f"Text number {i}."}) + "\n" for i in range(12)))
    assert main(["index", "build", str(hmde_dir), str(docs), "-o", str(tmp_path / "i"), "--no-progress"]) == 0
    (tmp_path / "q.tsv").write_text("q1\tnumber 3\n")
    (tmp_path / "qrels.txt").write_text("q1 0 d3 1\n")
    capsys.readouterr()
    assert main(["search", str(tmp_path / "i"), "--queries", str(tmp_path / "q.tsv"), "--qrels",
                 str(tmp_path / "qrels.txt"), "--run", str(tmp_path / "r.trec"), "--top-k", "5"]) == 0
    assert "R@100, nDCG@10 count only the 5 hits retrieved per query (--top-k 5)" in capsys.readouterr().err
