"""``hmde mine`` (issue 79): margin mining equal to the margin scoring hmde's document alignment has used since LAWDR
(``hmde.align.similarity.align``), the kept pairs' rules by hand, an IVF-PQ search that finds what the exact one finds,
and the command on every input kind and output format, its bad input in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hmde.align.mining import MiningOptions, mine_vectors, select_pairs
from hmde.cli.main import main


def planted(n: int, dim: int, share: float, seed: int = 0, noise: float = 0.3):
    """x, y and the gold pairs: a ``share`` of x translated into y (x plus noise), the rest of y unrelated."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    k = int(share * n)
    y = np.concatenate([x[:k] + noise * rng.standard_normal((k, dim)), rng.standard_normal((n - k, dim))])
    order = rng.permutation(n)
    y = y[order].astype(np.float32)
    where = np.argsort(order)
    return x, y, {(i, int(where[i])) for i in range(k)}


@pytest.mark.parametrize("direction", ["max", "intersection", "forward", "backward"])
def test_the_margin_pairs_equal_hmdes_document_alignment(direction):
    from hmde.align.similarity import align

    x, y, _ = planted(400, 24, 0.5)
    want = align(x, y, "margin", 4, direction, 8)
    src, tgt, score = mine_vectors(x, y, MiningOptions(direction=direction, k=4, candidates=8))
    got = sorted(zip(src.tolist(), tgt.tolist()))
    assert got == sorted((i, j) for i, j, _ in want)
    by_pair = {(i, j): s for i, j, s in want}
    assert all(abs(by_pair[(i, j)] - s) < 1e-4 for i, j, s in zip(src.tolist(), tgt.tolist(), score.tolist()))
    assert list(score) == sorted(score, reverse=True)


def test_an_ivf_pq_search_finds_what_the_exact_one_finds():
    x, y, gold = planted(6000, 32, 0.3, noise=0.4)
    exact = mine_vectors(x, y, MiningOptions())
    coded = mine_vectors(x, y, MiningOptions(exact_limit=1000))
    kept = [{(i, j) for i, j, s in zip(*found) if s >= 1.06} for found in (exact, coded)]
    assert len(kept[0] & gold) == len(gold)  # the planted pairs stand out
    assert len(kept[1] & gold) >= 0.98 * len(gold) and len(kept[1] - gold) <= len(kept[0] - gold) + 20


def test_the_pairs_kept_by_hand():
    src_texts = ["A cat.", "Hello world, how are you today?", "Same", "Tiny", "Other"]
    tgt_texts = ["Eine Katze.", "Hallo", "same ", "Winzig", "Eine Katze."]
    found = (np.array([0, 1, 2, 3, 4]), np.array([0, 1, 2, 3, 4]), np.array([1.3, 1.2, 1.15, 1.1, 1.05]))
    options = MiningOptions(threshold=1.06, max_length_ratio=2.0)
    # 1: 31 characters against 5, over the ratio; 2: a copy (case and spaces aside); 4: under the threshold
    assert select_pairs(*found, src_texts, tgt_texts, options) == [(0, 0, pytest.approx(1.3)),
                                                                      (3, 3, pytest.approx(1.1))]
    keep_all = MiningOptions(threshold=1.0, max_length_ratio=0, keep_copies=True)
    twice = (np.array([0, 4]), np.array([0, 4]), np.array([1.3, 1.2]))
    assert [p[:2] for p in select_pairs(*twice, ["A", "A"] * 3, ["B"] * 5, keep_all)] == [(0, 0)]  # one pair of texts


def test_options_out_of_range_are_one_line():
    from hmde.errors import HmdeError

    for bad, message in ((MiningOptions(direction="both"), "direction must be one of"),
                         (MiningOptions(k=0), "k must be a whole number >= 1"),
                         (MiningOptions(threshold=float("nan")), "threshold must be a finite number"),
                         (MiningOptions(max_length_ratio=0.5), "max_length_ratio is the longer side over")):
        with pytest.raises(HmdeError, match=message):
            bad.check()


SENTENCES = [f"Sentence number {i} says something about topic {i % 7}." for i in range(40)]


def test_the_command_on_every_input_kind_and_format(hmde_dir, tmp_path, capsys):
    """Copies of a third of the sentences, shuffled into distractors: with --keep-copies a tiny random model finds
    them (cosine 1), whatever the input kind; the formats write what they say."""
    src = tmp_path / "src.txt"
    src.write_text("\n".join(SENTENCES[:30]) + "\n\n" + "\n".join(SENTENCES[30:]) + "\n")  # an empty line kept
    copies = SENTENCES[::3]
    rng = np.random.default_rng(0)
    others = [f"Ein anderer Satz {i} ohne Gegenstück, Nummer {i * 13}." for i in range(25)]
    tgt_lines = [copies[i] for i in range(len(copies))] + others
    tgt_lines = [tgt_lines[i] for i in rng.permutation(len(tgt_lines))]
    tgt = tmp_path / "tgt.jsonl"
    tgt.write_text("".join(json.dumps({"id": f"t{n}", "text": t}) + "\n" for n, t in enumerate(tgt_lines)))
    out = tmp_path / "pairs.jsonl"
    assert main(["mine", str(hmde_dir), str(src), str(tgt), "-o", str(out), "--keep-copies", "--no-progress"]) == 0
    pairs = [json.loads(x) for x in out.read_text().splitlines()]
    copied = [p for p in pairs if p["src_text"] == p["tgt_text"]]
    assert len(copied) == len(copies)
    for p in copied:  # line numbers of the file (the empty line 30 counted), the target's ids
        assert src.read_text().splitlines()[p["src"]] == p["src_text"]
        assert p["tgt_id"] == f"t{p['tgt']}" and tgt_lines[p["tgt"]] == p["tgt_text"]
    assert [p["score"] for p in pairs] == sorted((p["score"] for p in pairs), reverse=True)
    for fmt, name in (("tsv", "p.tsv"), ("moses", "corpus"), ("tmx", "p.tmx")):
        assert main(["mine", str(hmde_dir), str(src), str(tgt), "-o", str(tmp_path / name), "--format", fmt,
                     "--keep-copies", "--src-lang", "eng", "--tgt-lang", "deu", "--no-progress",
                     "--threshold", "1.5"]) == 0
    assert (tmp_path / "p.tsv").read_text().count("\n") == (tmp_path / "corpus.en").read_text().count("\n")
    assert (tmp_path / "p.tmx").read_text().startswith('<?xml version="1.0" encoding="UTF-8"?>')
    # an hmde representation file: its sentences and their vectors, embedded once by hmde encode
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"doc_id": f"d{n}", "text": t}) + "\n" for n, t in enumerate(SENTENCES[:9])))
    assert main(["encode", str(hmde_dir), str(docs), "-o", str(tmp_path / "docs.parquet"), "--no-progress"]) == 0
    assert main(["mine", str(hmde_dir), str(tmp_path / "docs.parquet"), str(tgt), "-o", str(tmp_path / "r.jsonl"),
                 "--keep-copies", "--no-progress"]) == 0
    rows = [json.loads(x) for x in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert {p["src_id"] for p in rows if p["src_text"] == p["tgt_text"]} == {"d0#0", "d3#0", "d6#0"}
    assert not list(tmp_path.glob(".hmde-mine-*"))  # the embedded vectors' folder is gone


def test_bad_input_is_one_line_before_the_model_loads(tmp_path, capsys):
    good = tmp_path / "good.txt"
    good.write_text("One sentence.\n")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"id": 3}\n')
    assert main(["mine", "no-such-model", str(good), str(bad), "-o", str(tmp_path / "o.jsonl")]) == 2
    assert capsys.readouterr().err.strip() == f"hmde: error: {bad}, line 2, field 'text': needs a string 'text'"
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n")
    assert main(["mine", "no-such-model", str(good), str(empty), "-o", str(tmp_path / "o.jsonl")]) == 2
    assert capsys.readouterr().err.strip() == f"hmde: error: {empty}: holds no sentence"
    assert main(["mine", "no-such-model", str(good), str(good), "-o", str(good)]) == 2
    assert "input" in capsys.readouterr().err
    assert not (tmp_path / "o.jsonl").exists()


def test_python_mines_as_the_command(hmde_dir, tmp_path):
    import hmde

    src, tgt = tmp_path / "a.txt", tmp_path / "b.txt"
    src.write_text("\n".join(SENTENCES[:10]) + "\n")
    tgt.write_text("\n".join(SENTENCES[5:15]) + "\n")
    pairs = hmde.mine(str(src), str(tgt), model=str(hmde_dir), options=hmde.MiningOptions(keep_copies=True))
    assert {(p["src"], p["tgt"]) for p in pairs if p["src_text"] == p["tgt_text"]} == {(i, i - 5) for i in range(5, 10)}
