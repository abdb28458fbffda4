"""benchmarks/languages.py --compare: issue 80's done-when read off two tables (the tail's rise, the rest's falls)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
from languages import compare, tail_of  # noqa: E402


def table(scores: dict[str, float], task: str = "udhr") -> dict:
    return {lang: {"score": s, task: s} for lang, s in scores.items()}


BEFORE = {"a": 1.0, "b": 0.9, "c": 0.8, "d": 0.7, "e": 0.6, "f": 0.5, "g": 0.4, "h": 0.3, "i": 0.1, "j": 0.0}


def test_the_tail_is_the_bottom_fifth():
    assert tail_of(BEFORE) == {"i", "j"}
    assert tail_of({"x": 0.5, "y": 0.2, "z": 0.9}) == set()  # a fifth of 3 is none


def test_compare_reads_the_tails_rise_and_names_the_languages_that_fell_worst_first():
    after = dict(BEFORE, i=0.3, j=0.2, b=0.896, c=0.79, g=0.3, h=0.31)
    found = compare(table(BEFORE), table(after))
    n, before_tail, after_tail = found["tail"]
    assert (n, before_tail, after_tail) == (2, pytest.approx(0.05), pytest.approx(0.25))
    # b fell by 0.004 (within 0.005), c by 0.01, g by 0.1; h rose
    assert [(lang, round(b, 3), round(a, 3)) for lang, b, a in found["fallen"]] == [("g", 0.4, 0.3), ("c", 0.8, 0.79)]
    n, b, a = found["rest"]
    assert n == 8 and a - b == pytest.approx((-0.004 - 0.01 - 0.1 + 0.01) / 8)
    assert found["tasks"]["udhr"][0] == 10


def test_compare_takes_the_languages_both_tables_have():
    after = {lang: s for lang, s in BEFORE.items() if lang != "a"}
    found = compare(table(BEFORE), table(after))
    assert found["tail"][0] + found["rest"][0] == 9 and not found["fallen"]


def test_the_command_compares_two_written_tables_without_a_model(tmp_path):
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    before.write_text(json.dumps({"languages": table(BEFORE)}))
    after.write_text(json.dumps({"languages": table(dict(BEFORE, j=0.5, a=0.9))}))
    run = subprocess.run([sys.executable, str(BENCHMARKS / "languages.py"), "--compare", str(before), str(after)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "the tail (bottom fifth of the first table, 2): 0.0500 -> 0.3000 (+0.2500" in run.stdout
    assert "fallen by more than 0.005: 1" in run.stdout and "  a 1.000 -> 0.900 (-0.100)" in run.stdout


def test_routed_only_scores_the_routed_languages_and_takes_every_other_row_from_the_base_table(tmp_path, hmde_dir):
    """--routed-only BASE: the languages of the tail model's route are scored, the others copied from BASE (a table
    of the same model and settings); a BASE written otherwise is refused."""
    import gzip
    import shutil

    data = tmp_path / "data"
    (data / "eval" / "masakhanews").mkdir(parents=True)
    (data / "eval" / "tatoeba").mkdir(parents=True)
    for lang, word in (("eng", "English rights"), ("quc", "Kiche ri"), ("deu", "Deutsch Recht")):
        path = data / "docs" / "udhr" / f"{lang}.jsonl.gz"
        path.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.writelines(json.dumps({"concept": f"udhr.{n}", "text": f"{word} article {n} " + "word " * n}) + "\n"
                         for n in range(1, 31))
    tail = tmp_path / "tail"
    shutil.copytree(hmde_dir, tail)
    (tail / "route.json").write_text(json.dumps({"languages": ["quc"]}))

    def run(*extra):
        return subprocess.run([sys.executable, str(BENCHMARKS / "languages.py"), "--data", str(data), "--model",
                               str(hmde_dir), "--backend", "torch", "--tasks", "udhr", *extra],
                              capture_output=True, text=True, timeout=600)

    base = tmp_path / "base.json"
    assert run("-o", str(base)).returncode == 0
    written = json.loads(base.read_text())
    scored = written["languages"]["quc"]["udhr"]
    for lang, mark in (("deu", 0.123), ("quc", 0.456)):  # marks a copied row
        written["languages"][lang]["udhr"] = written["languages"][lang]["score"] = mark
    base.write_text(json.dumps(written))
    routed = tmp_path / "routed.json"
    done = run("--tail-model", str(tail), "--routed-only", str(base), "-o", str(routed))
    assert done.returncode == 0, done.stderr
    rows = json.loads(routed.read_text())["languages"]
    assert rows["deu"]["udhr"] == 0.123  # not scored: BASE's row
    assert rows["quc"]["udhr"] == scored  # scored again (the same weights: the same score)
    refused = run("--tail-model", str(tail), "--routed-only", str(base), "--udhr-articles", "dev")
    assert refused.returncode != 0 and "written with other settings" in refused.stderr


def test_the_bible_and_help_tasks_take_the_development_slice_alone(tmp_path):
    """The bible task's chapters and the help task's pages are of the development slice, which the sentence stage's
    pairs never use; help pages lose their title paragraph, titles not unique in English are no query."""
    import gzip

    from languages import bible, help_pages

    from hmde.pretraining.dev_slice import dev_concept

    def write(path, rows):
        path.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)

    chapters = [f"MAT.{n}" for n in range(1, 29)]
    for lang, word in (("eng", "English"), ("acu", "Achuar")):
        write(tmp_path / "bible" / f"{lang}.jsonl.gz",
              [{"concept": c, "verses": [f"{word} verse {v} of chapter {c}." for v in range(5)] + ["short"]}
               for c in chapters if lang == "eng" or c != "MAT.1"])
    queries, owners, theirs = bible(tmp_path, chapters=4)
    dev = [c for c in chapters if dev_concept("bible", c)]
    assert len(set(owners)) == 4 and set(owners) <= set(dev) and len(queries) == 12  # 3 verses a chapter
    assert all(q.startswith(f"English verse {k % 3} of chapter {c}") for k, (q, c) in enumerate(zip(queries, owners)))
    assert set(theirs["acu"]) == set(owners) - {"MAT.1"}
    assert theirs["acu"][owners[-1]].split("\n")[0] == f"Achuar verse 0 of chapter {owners[-1]}."

    pages = [f"page{n}" for n in range(12)]
    for lang in ("eng", "deu"):
        write(tmp_path / "docs" / "gnome" / f"{lang}.jsonl.gz",
              [{"concept": c, "title": "Same" if c in ("page10", "page11") else f"{lang} {c}",
                "paragraphs": [f"{lang} {c}", f"body of {c} in {lang}"]} for c in pages])
    found = help_pages(tmp_path, pages=40)
    expected = sorted(c for c in pages[:10] if dev_concept("gnome", c))  # page10, page11: one title in English
    assert expected and any(dev_concept("gnome", c) for c in ("page10", "page11"))
    assert found["deu"] == [("gnome", f"eng {c}", f"body of {c} in deu") for c in expected]


def test_merge_puts_two_tables_tasks_together_and_rescores_each_language():
    from languages import merge

    first = {"model": "m", "settings": {"tasks": "tatoeba,udhr", "pairs": 300},
             "languages": {"quc": {"score": 0.2, "udhr": 0.2}, "deu": {"score": 0.9, "udhr": 1.0, "tatoeba": 0.8}}}
    second = {"model": "m", "settings": {"tasks": "bible,help", "chapters": 20, "pages": 40},
              "languages": {"quc": {"score": 0.6, "bible": 0.6}, "acu": {"score": 0.1, "bible": 0.1}}}
    merged = merge(first, second)
    # bible is a column beside the score, on its own scale: quc's score stays its UDHR's
    assert merged["languages"]["quc"] == {"score": 0.2, "udhr": 0.2, "bible": 0.6, "tier": "weak"}
    assert merged["languages"]["deu"]["score"] == pytest.approx(0.9)
    assert merged["languages"]["acu"] == {"bible": 0.1}  # no scored task: no score, no tier
    assert merged["settings"] == {"tasks": "tatoeba,udhr,bible,help", "pairs": 300, "chapters": 20, "pages": 40}
    assert merged["tail"] == []  # the bottom fifth of 3 languages: none



def test_merge_into_the_shipped_table_keeps_its_format_and_rescores_the_models_rows(tmp_path):
    shipped = {"_about": "about", "hmde-e5": {"quc": {"score": 0.2, "udhr": 0.2, "tier": "weak", "pretrained": False,
                                                       "tokens_per_word": 2.48, "unknown_tokens": 0.0123}},
               "other-model": {"quc": {"score": 0.9}}}
    second = {"model": "hmde-e5", "settings": {"tasks": "bible,help", "chapters": 20, "pages": 40},
              "languages": {"quc": {"score": 0.71234, "bible": 0.71234, "held_out": False}, "acu": {"bible": 0.4}}}
    (tmp_path / "shipped.json").write_text(json.dumps(shipped))
    (tmp_path / "second.json").write_text(json.dumps(second))
    out = tmp_path / "out.json"
    done = subprocess.run([sys.executable, str(BENCHMARKS / "languages.py"), "--merge", str(tmp_path / "shipped.json"),
                           str(tmp_path / "second.json"), "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    written = json.loads(out.read_text())
    assert written["_about"] == "about" and written["other-model"] == shipped["other-model"]
    assert written["hmde-e5"]["quc"] == {"score": 0.2, "udhr": 0.2, "bible": 0.712, "tier": "weak",
                                         "pretrained": False, "tokens_per_word": 2.48, "unknown_tokens": 0.0123}
    assert "acu" not in written["hmde-e5"]  # no scored task, no tier: not a row of the shipped table
