"""``hmde mine`` (issue 79): margin mining equal to the margin scoring hmde's document alignment has used since LAWDR
(``hmde.align.similarity.align``), the kept pairs' rules by hand, an IVF-PQ search that finds what the exact one finds,
and the command on every input kind and output format, its bad input in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hmde.errors import InputError
from hmde.align.mining import MiningOptions, mine_vectors, select_pairs
from hmde.cli.main import main


def planted(n: int, dim: int, share: float, seed: int = 0, noise: float = 0.3, topics: int = 50):
    """x, y and the gold pairs: sentences around ``topics`` centres (as a real encoder's lie), a ``share`` of x
    translated into y (x plus noise), the rest of y unrelated."""
    rng = np.random.default_rng(seed)
    centres = 1.5 * rng.standard_normal((topics, dim))
    x = (centres[rng.integers(0, topics, n)] + rng.standard_normal((n, dim))).astype(np.float32)
    k = int(share * n)
    y = np.concatenate([x[:k] + noise * rng.standard_normal((k, dim)),
                        centres[rng.integers(0, topics, n - k)] + rng.standard_normal((n - k, dim))])
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


def test_an_ivf_search_finds_what_the_exact_one_finds():
    x, y, gold = planted(6000, 32, 0.3)
    exact = mine_vectors(x, y, MiningOptions())
    coded = mine_vectors(x, y, MiningOptions(exact_limit=1000, chunk=1000))  # an IVF index, queries in chunks
    kept = [{(i, j) for i, j, s in zip(*found) if s >= 1.06} for found in (exact, coded)]
    assert len(kept[0] & gold) >= 0.99 * len(gold) and len(kept[0] - gold) <= 0.05 * len(gold)  # they stand out
    assert len(kept[1] ^ kept[0]) <= 0.01 * len(kept[0])  # the codes' search keeps what the exact one keeps


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


def test_a_cosine_floor_leaves_a_pair_under_it_no_candidate():
    """By hand: two pairs of unit vectors, each the other's only near one (margin 1.0 with k=1), at cosines 0.5
    and 0.954; a floor of 0.6 leaves the first no candidate, the second kept with its margin."""
    x = np.array([[1, 0, 0], [0, 0, 1]], np.float32)
    y = np.array([[0.5, 0.75 ** 0.5, 0], [0, 0.3, 0.91 ** 0.5]], np.float32)
    plain = mine_vectors(x, y, MiningOptions(k=1, candidates=2))
    assert sorted(zip(*map(np.ndarray.tolist, plain[:2]))) == [(0, 0), (1, 1)]
    assert np.allclose(plain[2], 1.0)
    src, tgt, score = mine_vectors(x, y, MiningOptions(k=1, candidates=2, min_cosine=0.6))
    assert (src.tolist(), tgt.tolist()) == ([1], [1]) and np.allclose(score, 1.0)
    assert len(mine_vectors(x, y, MiningOptions(k=1, candidates=2, min_cosine=0.96))[0]) == 0
    # the planted pairs: every pair mined over a floor is at least that near, and the floor drops only such pairs
    x, y, gold = planted(400, 24, 0.5)
    xn, yn = (v / np.linalg.norm(v, axis=1, keepdims=True) for v in (x, y))
    src, tgt, _ = mine_vectors(x, y, MiningOptions(min_cosine=0.5))
    assert len(src) and (np.einsum("ij,ij->i", xn[src], yn[tgt]) >= 0.5 - 1e-6).all()


def test_options_out_of_range_are_one_line():
    from hmde.errors import HmdeError

    for bad, message in ((MiningOptions(direction="both"), "direction must be one of"),
                         (MiningOptions(k=0), "k must be a whole number >= 1"),
                         (MiningOptions(threshold=float("nan")), "threshold must be a finite number"),
                         (MiningOptions(max_length_ratio=0.5), "max_length_ratio is the longer side over"),
                         (MiningOptions(min_cosine=-1.5), "min_cosine must be a finite number >= -1, got -1.5")):
        with pytest.raises(HmdeError, match=message):
            bad.check()


PAIRS = [("The cat sleeps on the sofa.", "Die Katze schläft auf dem Sofa."),
         ("It is raining in the mountains today.", "Heute regnet es in den Bergen."),
         ("The government presented its budget to parliament.", "Die Regierung hat dem Parlament ihren Haushalt "
          "vorgelegt."),
         ("My brother plays football every Sunday.", "Mein Bruder spielt jeden Sonntag Fußball."),
         ("The museum opens at nine in the morning.", "Das Museum öffnet um neun Uhr morgens."),
         ("We bought fresh bread at the market.", "Wir haben auf dem Markt frisches Brot gekauft."),
         ("The train to Berlin was late again.", "Der Zug nach Berlin hatte wieder Verspätung."),
         ("She is learning to play the violin.", "Sie lernt Geige spielen.")]
ENGLISH_ONLY = ["The bridge was closed for repairs last week.", "Prices of coffee rose sharply this year.",
                "A new species of frog was found in the rainforest.", "The concert ended after midnight."]
GERMAN_ONLY = ["Der Hund bellt die ganze Nacht.", "Im Winter fahren viele Menschen Ski.",
               "Das Krankenhaus sucht neue Pflegekräfte.", "Der Garten ist voller Blumen.",
               "Die Schule beginnt nächste Woche wieder."]


STRICT = MiningOptions(threshold=1.06)


@pytest.fixture(scope="module")
def e5():
    """hmde-e5, loaded once: mining needs a model whose vectors mean something (the tiny random ones do not)."""
    from hmde.encoders.model_loading import load_model

    return load_model("hmde-e5", "cpu")


def sides(tmp_path):
    """An English text file (an empty line in it) and a German JSONL file: 8 translations among distractors."""
    rng = np.random.default_rng(0)
    english = [e for e, _ in PAIRS] + ENGLISH_ONLY
    english = [english[i] for i in rng.permutation(len(english))]
    german = [g for _, g in PAIRS] + GERMAN_ONLY
    german = [german[i] for i in rng.permutation(len(german))]
    src, tgt = tmp_path / "en.txt", tmp_path / "de.jsonl"
    src.write_text("\n".join(english[:5]) + "\n\n" + "\n".join(english[5:]) + "\n")
    tgt.write_text("".join(json.dumps({"id": f"de{n}", "text": t}, ensure_ascii=False) + "\n" for n, t in
                           enumerate(german)))
    gold = {(src.read_text().splitlines().index(e), german.index(g)) for e, g in PAIRS}
    return src, tgt, german, gold


def test_the_command_mines_the_translations_among_distractors(tmp_path, capsys):
    src, tgt, german, gold = sides(tmp_path)
    out = tmp_path / "pairs.jsonl"
    from hmde.ground.stale_files import _host

    killed = tmp_path / f".hmde-mine-abcd1234.{_host()}-{2 ** 22 + 7}.tmp"  # a SIGKILLed run's (no such process)
    killed.mkdir()
    (killed / "src.npy").write_bytes(b"x" * 1000)
    # the defaults: hmde-e5-bitext, its recorded margin and cosine floor (docs/mining.md)
    assert main(["mine", str(src), str(tgt), "-o", str(out), "--no-progress"]) == 0
    assert "(max, margin >= 1.01, cosine >= 0.62)" in capsys.readouterr().out
    pairs = [json.loads(x) for x in out.read_text().splitlines()]
    assert {(p["src"], p["tgt"]) for p in pairs} == gold  # line numbers of the file: the empty line counted
    assert all(p["tgt_id"] == f"de{p['tgt']}" and german[p["tgt"]] == p["tgt_text"] for p in pairs)
    assert all(src.read_text().splitlines()[p["src"]] == p["src_text"] for p in pairs)
    assert [p["score"] for p in pairs] == sorted((p["score"] for p in pairs), reverse=True)
    assert not list(tmp_path.glob(".hmde-mine-*"))  # the embedded vectors' folder is gone, and the killed run's


def test_every_input_kind_and_output_format(tmp_path, e5):
    import hmde

    src, tgt, _, gold = sides(tmp_path)
    for fmt, name in (("tsv", "p.tsv"), ("moses", "corpus"), ("tmx", "p.tmx")):
        pairs = hmde.mine(str(src), str(tgt), tmp_path / name, format=fmt, src_lang="eng", tgt_lang="deu",
                          model="hmde-e5", loaded=e5, options=STRICT)
        assert {(p["src"], p["tgt"]) for p in pairs} == gold
    bitext = [line.split("\t") for line in (tmp_path / "p.tsv").read_text().splitlines()]
    assert bitext == [[p["src_text"], p["tgt_text"]] for p in pairs]
    assert (tmp_path / "corpus.en").read_text().splitlines() == [p["src_text"] for p in pairs]
    assert (tmp_path / "corpus.de").read_text().splitlines() == [p["tgt_text"] for p in pairs]
    assert (tmp_path / "p.tmx").read_text().startswith('<?xml version="1.0" encoding="UTF-8"?>')
    # an hmde representation file: its sentences with their vectors, embedded once by `hmde encode`
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"doc_id": f"d{n}", "text": e}) + "\n" for n, (e, _) in enumerate(PAIRS)))
    assert main(["encode", str(docs), "-o", str(tmp_path / "docs.parquet"), "--no-progress"]) == 0
    pairs = hmde.mine(str(tmp_path / "docs.parquet"), str(tgt), model="hmde-e5", loaded=e5, options=STRICT)
    assert {p["src_id"] for p in pairs} == {f"d{n}#0" for n in range(len(PAIRS))}
    assert all(p["tgt_text"] == dict(PAIRS)[p["src_text"]] for p in pairs)


def test_a_language_given_drops_pairs_in_another(tmp_path, e5):
    import hmde

    src, tgt = tmp_path / "a.txt", tmp_path / "b.txt"
    src.write_text("The cat sleeps on the sofa.\nIt is raining in the mountains today.\n")
    tgt.write_text("Die Katze schläft auf dem Sofa.\nIl pleut aujourd'hui dans les montagnes.\n")
    assert len(hmde.mine(str(src), str(tgt), model="hmde-e5", loaded=e5)) == 2
    assert [p["tgt"] for p in hmde.mine(str(src), str(tgt), tgt_lang="deu", model="hmde-e5", loaded=e5)] == [0]
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


def test_the_measured_defaults_are_pinned():
    """docs/mining.md: 1.025 is hmde-e5's best mean F1 on the dev table, 50,000 where IVF overtakes exact search."""
    options = MiningOptions()
    assert (options.threshold, options.exact_limit, options.k, options.candidates, options.direction,
            options.max_length_ratio) == (1.025, 50_000, 4, 8, "max", 2.0)
    from hmde.align.mining import text_length

    assert (text_length("我爱你。"), text_length("I love you."), text_length("사랑해")) == (10, 11, 9)


def test_a_models_recorded_threshold_is_the_default_and_a_given_one_wins(tmp_path, hmde_dir, capsys):
    """hmde.align.mining_threshold: benchmarks/mining.py --record writes the model's best threshold into its folder;
    hmde mine takes it when no --threshold is given (an encoder trained for translation spreads its margins)."""
    import shutil

    from hmde.align.miner import mine
    from hmde.align.mining_threshold import FILE, default_threshold, record_threshold

    def threshold_for(model, paths):  # what hmde.mine used for a threshold left to the model
        return mine(*paths, model=model, device="cpu").options.threshold

    model = tmp_path / "model"
    shutil.copytree(hmde_dir, model)
    assert default_threshold(str(model)) == 1.025  # none recorded: hmde-e5's
    assert default_threshold(None) == 1.01  # no model named: hmde-e5-bitext's, recorded in its folder
    record_threshold(model, 1.215, {"f1": 0.843})
    assert json.loads((model / FILE).read_text()) == {"threshold": 1.215, "f1": 0.843}
    assert default_threshold(str(model)) == 1.215
    src, tgt = tmp_path / "a.txt", tmp_path / "b.txt"
    src.write_text("The river floods.\nA city sleeps.\n")
    tgt.write_text("the river\na city\n")
    out = tmp_path / "pairs.jsonl"
    assert main(["mine", str(model), str(src), str(tgt), "-o", str(out), "--no-progress", "--device", "cpu"]) == 0
    assert "margin >= 1.215" in capsys.readouterr().out
    assert main(["mine", str(model), str(src), str(tgt), "-o", str(out), "--no-progress", "--device", "cpu",
                 "--threshold", "1.0"]) == 0
    assert "margin >= 1.0" in capsys.readouterr().out
    # a Parquet side's vectors name the model that made them: its threshold, where no model is named
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"doc_id": f"d{n}", "text": t}) + "\n" for n, t in enumerate(["One.", "Two."])))
    assert main(["encode", str(model), str(docs), "-o", str(tmp_path / "d.parquet"), "--no-progress",
                 "--device", "cpu"]) == 0
    assert threshold_for(None, (str(src), str(tmp_path / "d.parquet"))) == 1.215
    assert threshold_for(str(model), (str(src), str(tmp_path / "d.parquet"))) == 1.215
    with pytest.raises(InputError, match="its vectors were made by"):  # a named model other than the Parquet's
        threshold_for("hmde-e5", (str(src), str(tmp_path / "d.parquet")))
    # a record with a cosine floor: the default floor too, printed; a given --min-cosine wins
    from hmde.align.mining_threshold import default_min_cosine

    assert default_min_cosine(str(model)) == 0.0  # none recorded: the margin alone
    assert default_min_cosine(None) == 0.62  # hmde-e5-bitext's
    record_threshold(model, 1.01, {"f1": 0.879}, min_cosine=0.62)
    assert json.loads((model / FILE).read_text()) == {"threshold": 1.01, "min_cosine": 0.62, "f1": 0.879}
    assert default_min_cosine(str(model)) == 0.62
    assert main(["mine", str(model), str(src), str(tgt), "-o", str(out), "--no-progress", "--device", "cpu"]) == 0
    assert "margin >= 1.01, cosine >= 0.62)" in capsys.readouterr().out
    assert main(["mine", str(model), str(src), str(tgt), "-o", str(out), "--no-progress", "--device", "cpu",
                 "--min-cosine", "0"]) == 0
    assert "margin >= 1.01) into" in capsys.readouterr().out
    (model / FILE).write_text('{"threshold": 1.0, "min_cosine": null}')
    assert main(["mine", str(model), str(src), str(tgt), "-o", str(tmp_path / "o.jsonl")]) == 2
    assert capsys.readouterr().err.strip() == (f"hmde: error: {model / FILE}, field 'min_cosine': must be a finite "
                                               "number, got None")
    (model / FILE).write_text('{"threshold": "high"}')
    assert main(["mine", str(model), str(src), str(tgt), "-o", str(tmp_path / "o.jsonl")]) == 2
    assert capsys.readouterr().err.strip() == (f"hmde: error: {model / FILE}, field 'threshold': must be a finite "
                                               "number, got 'high'")
    with pytest.raises(Exception, match="not a model folder"):
        record_threshold(tmp_path / "nothing", 1.1, {})


def test_the_model_that_mines_is_the_named_one_else_a_parquet_sides_else_hmde_e5_bitext(tmp_path, hmde_dir, capsys):
    """Vectors of two models are two spaces: a Parquet side's model embeds the other side where none is named, and a
    named model other than a Parquet side's is refused in one line; with neither, hmde-e5-bitext (docs/mining.md)."""
    from hmde.align.miner import mining_model, read_side
    from hmde.encoders.registry import MINING_MODEL, bundled_folder

    assert MINING_MODEL == "hmde-e5-bitext" and bundled_folder(MINING_MODEL) is not None
    src = tmp_path / "a.txt"
    src.write_text("The river floods.\nA city sleeps.\n")
    assert mining_model(None, [read_side(src)]) == "hmde-e5-bitext"
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"doc_id": f"d{n}", "text": t}) + "\n" for n, t in enumerate(["One.", "Two."])))
    assert main(["encode", str(hmde_dir), str(docs), "-o", str(tmp_path / "d.parquet"), "--no-progress",
                 "--device", "cpu"]) == 0
    sides = [read_side(src), read_side(tmp_path / "d.parquet")]
    assert mining_model(None, sides) == str(hmde_dir) == mining_model(str(hmde_dir), sides)
    capsys.readouterr()
    assert main(["mine", "hmde-e5", str(src), str(tmp_path / "d.parquet"), "-o", str(tmp_path / "o.jsonl")]) == 2
    assert capsys.readouterr().err.strip() == (f"hmde: error: {tmp_path / 'd.parquet'}: its vectors were made by "
                                               f"{hmde_dir}, not hmde-e5: vectors of two models are not comparable "
                                               f"(name {hmde_dir}, or give the sentences as text)")
    assert not (tmp_path / "o.jsonl").exists()
