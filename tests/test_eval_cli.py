"""`hmde eval` end to end on small files the test writes; result provenance; the report."""

import json

import pytest

from hmde.cli.main import main
from hmde.evaluation.provenance import file_sha256, model_hash

TEXTS = {
    "eng": ["The cat sat on the mat.", "Economic growth slowed.", "The team won the final.", "A new frog was found."],
    "deu": ["Die Katze saß auf der Matte.", "Das Wachstum verlangsamte sich.", "Das Team gewann das Finale.",
            "Ein neuer Frosch wurde gefunden."],
}


@pytest.fixture()
def pud_like(tmp_path):
    folder = tmp_path / "pud"
    folder.mkdir()
    for lang, texts in TEXTS.items():
        (folder / f"{lang}.jsonl").write_text("".join(
            json.dumps({"doc_id": f"{lang}/{i}", "concept": f"c{i}", "lang": lang, "text": t}) + "\n"
            for i, t in enumerate(texts)))
    return folder


def test_align_result_records_provenance(hmde_dir, pud_like, tmp_path):
    out = tmp_path / "r.json"
    assert main(["eval", "align", str(hmde_dir), "--data", str(pud_like), "--method", "mean", "-o", str(out),
                 "--no-progress"]) == 0
    rec = json.loads(out.read_text())
    assert rec["protocol"] == "align" and rec["method"] == "mean" and rec["model_sha256"] == model_hash(hmde_dir)
    assert {d["sha256"] for d in rec["data"]} == {file_sha256(pud_like / "eng.jsonl"), file_sha256(pud_like / "deu.jsonl")}
    m = rec["metrics"]["pairs"]["deu-eng"]
    assert m["gold_pairs"] == 4 and 0.0 <= m["p@1"] <= 1.0 and rec["hmde_version"]


def test_missing_language_is_an_error_not_a_zero(hmde_dir, pud_like, tmp_path, capsys):
    assert main(["eval", "align", str(hmde_dir), "--data", str(pud_like), "--langs", "fra", "-o",
                 str(tmp_path / "r.json"), "--no-progress"]) == 2
    assert "language 'fra' is missing (have: deu, eng)" in capsys.readouterr().err


@pytest.mark.smoke  # the smoke tier: this command once
def test_xsr_and_report_table(hmde_dir, tmp_path):
    tat = tmp_path / "tatoeba"
    tat.mkdir()
    (tat / "tatoeba.deu-eng.deu").write_text("\n".join(TEXTS["deu"]) + "\n")
    (tat / "tatoeba.deu-eng.eng").write_text("\n".join(TEXTS["eng"]) + "\n")
    assert main(["eval", "xsr", str(hmde_dir), "--data", str(tat), "-o", str(tmp_path / "xsr.json"), "--no-progress"]) == 0
    fake = {"protocol": "align", "model": "m", "method": "seg", "settings": {"dataset": "pud"},
            "metrics": {"pairs": {"deu-eng": {"p@1": 0.5}, "fra-eng": {"p@1": 0.25}}, "average": 0.375}}
    (tmp_path / "fake.json").write_text(json.dumps(fake))
    assert main(["eval", "report", str(tmp_path / "xsr.json"), str(tmp_path / "fake.json"), "-o",
                 str(tmp_path / "r.md"), "--plot", str(tmp_path / "r.png")]) == 0
    table = (tmp_path / "r.md").read_text()
    assert "| m / seg | 0.500 | 0.250 | **0.375** |" in table and "### xsr" in table
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
    (tmp_path / "bad.json").write_text("{}")
    assert main(["eval", "report", str(tmp_path / "bad.json")]) == 2
