"""Sentence alignment inside aligned documents (issue 45): the dynamic programme on hand-made cases,
coarse-to-fine equal to the full search, Vecalign's F1, the output formats and bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hmde.cli.main import main
from hmde.align.sentence_alignment import AlignmentOptions, Bead, align_vectors, beads_f1

DIM = 48


def unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def spans(v, longest=3):
    """Span vectors as a concatenated text would give them: here the normalised sum of the sentences."""
    return [unit(np.stack([v[i:i + k].sum(0) for i in range(len(v) - k + 1)])) if len(v) >= k
            else np.zeros((0, DIM), np.float32) for k in range(1, longest + 1)]


def noisy(rng, v, level=0.05):
    return unit(v + level * rng.standard_normal(v.shape))


def pairs_of(beads):
    return [(b.src, b.tgt) for b in beads]


def test_a_two_to_one_merge_a_deletion_and_an_insertion():
    rng = np.random.default_rng(0)
    src = unit(rng.standard_normal((12, DIM)))
    chars = rng.integers(40, 120, 12)
    extra = unit(rng.standard_normal(DIM))
    tgt = [noisy(rng, src[0]), noisy(rng, src[1]), noisy(rng, src[2] + src[3]),  # 2-1
           noisy(rng, src[4]), noisy(rng, src[6]), extra,  # src 5 deleted; an inserted target sentence
           *[noisy(rng, src[i]) for i in range(7, 12)]]
    tgt_chars = [chars[0], chars[1], chars[2] + chars[3], chars[4], chars[6], 70, *chars[7:]]
    beads = align_vectors(spans(src), spans(np.stack(tgt)), None, chars, tgt_chars)
    assert pairs_of(beads) == [([0], [0]), ([1], [1]), ([2, 3], [2]), ([4], [3]), ([5], []), ([6], [4]), ([], [5]),
                               ([7], [6]), ([8], [7]), ([9], [8]), ([10], [9]), ([11], [10])]
    assert all(b.score > 0.9 for b in beads if b.src and b.tgt) and all(b.score == 0 for b in beads
                                                                       if not (b.src and b.tgt))


def test_two_swapped_paragraphs_are_never_aligned_wrongly():
    rng = np.random.default_rng(1)
    src = unit(rng.standard_normal((15, DIM)))
    order = list(range(5)) + list(range(10, 15)) + list(range(5, 10))  # paragraphs 2 and 3 swapped
    tgt = np.stack([noisy(rng, src[i]) for i in order])
    beads = align_vectors(spans(src), spans(tgt))
    matched = [(b.src, [order[j] for j in b.tgt]) for b in beads if b.src and b.tgt]
    assert all(s == t for s, t in matched)  # every aligned bead is right
    assert sum(len(s) for s, _ in matched) >= 10  # the first paragraph and one of the swapped two
    assert {i for b in beads for i in b.src} == set(range(15)) and {j for b in beads for j in b.tgt} == set(range(15))


def test_coarse_to_fine_finds_the_full_searchs_path_in_bounded_cells():
    rng = np.random.default_rng(2)
    src = unit(rng.standard_normal((300, DIM)))
    keep = [i for i in range(300) if i % 37 != 5]  # some deletions
    tgt = np.stack([noisy(rng, src[i], 0.2) for i in keep])
    full = align_vectors(spans(src), spans(tgt), AlignmentOptions(full_cells=10**9))
    banded = align_vectors(spans(src), spans(tgt), AlignmentOptions(full_cells=5_000))
    assert pairs_of(banded) == pairs_of(full)
    gold = [Bead([i], [keep.index(i)] if i in keep else [], 0) for i in range(300)]
    assert beads_f1(full, gold)["strict_f1"] == 1.0


def test_vecaligns_f1_on_a_hand_checked_case():
    gold = [Bead([0], [0], 0), Bead([1, 2], [1], 0), Bead([3], [], 0), Bead([4], [2], 0)]
    predicted = [Bead([0], [0], 0), Bead([1], [1], 0), Bead([2], [], 0), Bead([3], [], 0), Bead([4], [2], 0)]
    f = beads_f1(predicted, gold)
    # strict: 3 of 5 predicted beads are gold ([0]-[0], [3]-[], [4]-[2]); 2 of the 3 gold pairs found
    assert f["strict_precision"] == pytest.approx(3 / 5) and f["strict_recall"] == pytest.approx(2 / 3)
    # lax: [1]-[1] overlaps gold [1,2]-[1]; [2]-[] is no gold skip; every gold pair is overlapped
    assert f["lax_precision"] == pytest.approx(4 / 5) and f["lax_recall"] == 1.0


def test_the_command_writes_every_format_and_refuses_bad_input(hmde_dir, tmp_path, capsys):
    src, tgt = tmp_path / "en.txt", tmp_path / "de.txt"
    src.write_text("The cat sleeps.\nIt rains.\nThe dog barks.\n")
    tgt.write_text("Die Katze schläft.\nEs regnet.\nDer Hund bellt.\n")
    assert main(["align-sentences", str(hmde_dir), str(src), str(tgt), "-o", str(tmp_path / "a.jsonl")]) == 0
    rows = [json.loads(x) for x in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert {tuple(r) for r in rows} == {("src_doc", "tgt_doc", "src", "tgt", "score", "src_text", "tgt_text")}
    covered = sorted(i for r in rows for i in r["src"]), sorted(j for r in rows for j in r["tgt"])
    assert covered == ([0, 1, 2], [0, 1, 2])  # every sentence once, in order
    assert main(["align-sentences", str(hmde_dir), str(src), str(tgt), "-o", str(tmp_path / "a.txt"), "--format",
                 "vecalign"]) == 0
    lines = (tmp_path / "a.txt").read_text().splitlines()
    assert [line.rsplit(":", 1)[0] for line in lines] == [f"{r['src']}:{r['tgt']}" for r in rows]
    assert main(["align-sentences", str(hmde_dir), str(src), str(tgt), "-o", str(tmp_path / "b.tsv"), "--format",
                 "tsv", "--min-score", "2"]) == 0
    assert (tmp_path / "b.tsv").read_text() == ""  # no cosine reaches 2
    both = [r for r in rows if r["src"] and r["tgt"]]
    # issue 77: tsv is exactly the bitext (two columns, no header); the scored table has its own name
    assert main(["align-sentences", str(hmde_dir), str(src), str(tgt), "-o", str(tmp_path / "c.tsv"), "--format",
                 "tsv"]) == 0
    assert (tmp_path / "c.tsv").read_text() == "".join(f"{r['src_text']}\t{r['tgt_text']}\n" for r in both)
    assert main(["align-sentences", str(hmde_dir), str(src), str(tgt), "-o", str(tmp_path / "s.tsv"), "--format",
                 "scored"]) == 0
    scored = (tmp_path / "s.tsv").read_text().splitlines()
    assert scored[0] == "src_text\tscore\tsrc_doc\ttgt_doc".replace("\tscore", "\ttgt_text\tscore")
    assert [line.split("\t") for line in scored[1:]] == [[r["src_text"], r["tgt_text"], f"{r['score']:.6f}", "en.txt",
                                                           "de.txt"] for r in both]
    # Moses: two files named by the languages (given, or detected: English and German here)
    assert main(["align-sentences", str(hmde_dir), str(src), str(tgt), "-o", str(tmp_path / "corpus"), "--format",
                 "moses", "--no-progress"]) == 0
    assert (tmp_path / "corpus.en").read_text().splitlines() == [r["src_text"] for r in both]
    assert (tmp_path / "corpus.de").read_text().splitlines() == [r["tgt_text"] for r in both]
    assert "corpus.en and " in capsys.readouterr().out
    import xml.etree.ElementTree as ET

    assert main(["align-sentences", str(hmde_dir), str(src), str(tgt), "-o", str(tmp_path / "m.tmx"), "--format",
                 "tmx"]) == 0
    tmx = ET.parse(tmp_path / "m.tmx").getroot()
    assert tmx.get("version") == "1.4" and tmx.find("header").get("srclang") == "en"
    lang = "{http://www.w3.org/XML/1998/namespace}lang"
    assert [[(v.get(lang), v.find("seg").text) for v in u.findall("tuv")] for u in tmx.iter("tu")] == \
        [[("en", r["src_text"]), ("de", r["tgt_text"])] for r in both]
    assert main(["align-sentences", str(hmde_dir), str(src), str(tgt), "-o", str(tmp_path / "x.jsonl"),
                 "--min-score", "0.5"]) == 2
    assert "--min-score filters the bitext formats (tsv, scored, moses, tmx)" in capsys.readouterr().err
    capsys.readouterr()
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    assert main(["align-sentences", str(hmde_dir), str(src), str(empty), "-o", str(tmp_path / "c.jsonl")]) == 2
    assert capsys.readouterr().err.strip() == f"hmde: error: {empty}: holds no sentence (one sentence per line)"
    docs_a, docs_b = tmp_path / "a.jsonl.in.jsonl", tmp_path / "b.jsonl"
    docs_a.write_text(json.dumps({"doc_id": "x", "text": "One. Two.", "lang": "eng"}) + "\n")
    docs_b.write_text(json.dumps({"doc_id": "y", "text": "Eins. Zwei.", "lang": "deu"}) + "\n" +
                      json.dumps({"doc_id": "z", "text": " ", "lang": "deu"}) + "\n")
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("src_id\ttgt_id\tscore\nx\tnope\t0.9\n")
    assert main(["align-sentences", str(docs_a), str(docs_b), "--pairs", str(pairs), "-o", str(tmp_path / "d")]) == 2
    assert capsys.readouterr().err.strip() == f"hmde: error: {pairs}, line 2, field 'tgt_id': the target collection " \
        "has no document 'nope'"
    pairs.write_text("x\tz\n")
    assert main(["align-sentences", str(docs_a), str(docs_b), "--pairs", str(pairs), "-o", str(tmp_path / "d")]) == 2
    assert "document 'z' has no sentence to align" in capsys.readouterr().err


@pytest.mark.parametrize("length", [1, 2, 3, 5])
def test_a_short_documents_true_pairs_are_never_two_skips(length):
    """Issue 57: the skip cost was a quantile of the document's own 1-1 costs, so in a 2 x 2 document (half
    its pairs true) two skips cost no more than a true pair. Sentence vectors here share a common direction,
    as a real encoder's do (unrelated sentences at cosine ~0.7); each translation is its source plus noise."""
    rng = np.random.default_rng(length)
    common = rng.standard_normal(DIM)
    for trial in range(20):
        src = unit(2.0 * common + rng.standard_normal((length, DIM)))
        tgt = np.stack([noisy(rng, s, 0.07) for s in src])  # cosine ~0.9 with its source
        beads = align_vectors(spans(src), spans(tgt), None, [80] * length, [90] * length)
        assert pairs_of(beads) == [([i], [i]) for i in range(length)], (trial, pairs_of(beads))


def test_a_three_to_two_bead_is_found():
    """Issue 55: two target sentences that share three source sentences between them (the middle one cut in
    two) are one 3-2 bead, which needs merges of five sentences (the default ``max_merge``)."""
    rng = np.random.default_rng(5)
    src = unit(rng.standard_normal((10, DIM)))
    tgt = [*[noisy(rng, src[i]) for i in range(3)], noisy(rng, src[3] + 0.5 * src[4]), noisy(rng, 0.5 * src[4] + src[5]),
           *[noisy(rng, src[i]) for i in range(6, 10)]]
    beads = align_vectors(spans(src, 4), spans(np.stack(tgt), 4))
    assert pairs_of(beads) == [([0], [0]), ([1], [1]), ([2], [2]), ([3, 4, 5], [3, 4]), ([6], [5]), ([7], [6]),
                               ([8], [7]), ([9], [8])]
    assert AlignmentOptions().max_merge == 5 and (3, 2) in AlignmentOptions().bead_types()
    defaults = AlignmentOptions()  # issue 55's measured defaults (docs/model.md); issue 45's: 4, no anchors, 1.0
    assert (defaults.anchors, defaults.length_weight, defaults.skip_weight) == (True, 0.25, 0.5)


def test_a_deleted_paragraph_leaves_its_sentences_unaligned_and_anchors_hold_around_it():
    rng = np.random.default_rng(6)
    common = rng.standard_normal(DIM)
    src = unit(2.0 * common + rng.standard_normal((30, DIM)))
    keep = [i for i in range(30) if not 10 <= i < 15]  # a paragraph of five sentences not translated
    tgt = np.stack([noisy(rng, src[i], 0.07) for i in keep])
    beads = align_vectors(spans(src, 4), spans(tgt, 4), None, [80] * 30, [88] * 25)
    assert pairs_of(beads) == [([i], [keep.index(i)] if i in keep else []) for i in range(30)]


def test_anchors_never_cross_and_no_bead_crosses_an_anchor():
    """Two sentences swapped far apart are each other's nearest: neither pair may become an anchor (they cross
    the others), locked beads' corners lie on one monotone path, and the final path passes through them."""
    from hmde.align.sentence_alignment import first_step

    rng = np.random.default_rng(7)
    src = unit(rng.standard_normal((40, DIM)))
    order = list(range(40))
    order[5], order[30] = 30, 5
    tgt = np.stack([noisy(rng, src[i]) for i in order])
    plan = first_step(src, tgt, AlignmentOptions(), None, None)
    rows, columns = plan.anchors.rows, plan.anchors.columns
    assert len(rows) > 30 and np.all(np.diff(rows) > 0) and np.all(np.diff(columns) > 0)
    corners = set(zip(rows.tolist(), columns.tolist()))
    assert not {(5, 30), (30, 5), (6, 31), (31, 6)} & corners  # the swapped pairs lock nothing
    beads = align_vectors(spans(src, 4), spans(tgt, 4))
    visited, i, j = {(0, 0)}, 0, 0
    for b in beads:
        i, j = i + len(b.src), j + len(b.tgt)
        visited.add((i, j))
    assert corners <= visited
    assert all(order[t] == s for b in beads if b.src and b.tgt for s, t in zip(b.src, b.tgt))  # nothing wrong


def test_align_many_embeds_each_reachable_span_once_and_equals_the_full_search():
    """Spans crossing a locked anchor are never embedded; what is embedded is embedded once across the pairs
    of a batch; the beads equal those of the search over every span's vector."""
    from hmde.align.sentence_pairs import align_many

    rng = np.random.default_rng(8)
    common = rng.standard_normal(DIM)  # a real encoder's common direction: unrelated sentences at cosine ~0.7
    base = {f"s{i}": unit(2.0 * common + rng.standard_normal(DIM)) for i in range(40)}
    calls: list[list[str]] = []

    def vector(word):  # "t8" translates "s8": its vector plus a little noise fixed by the word
        if word in base:
            return base[word]
        return base["s" + word[1:]] + 0.07 * np.random.default_rng(int(word[1:])).standard_normal(DIM)

    def embed(texts):
        calls.append(list(texts))
        return unit(np.stack([sum(vector(w) for w in t.split()) for t in texts]))

    src = [f"s{i}" for i in range(40)]
    tgt = [f"t{i}" for i in range(40) if i != 17]
    tgt[8] = "t8 t9"  # a 2-1 bead
    del tgt[9]
    beads = align_many([(src, tgt, None, None), (src[:20], tgt[:18], None, None)], embed)
    texts = [t for call in calls for t in call]
    # singles, then spans, then the texts of the boundary moves that cross an anchor; each distinct text once
    assert len(calls) == 3 and len(texts) == len(set(texts)) and calls[2] == ["s9 s10"]
    every_span = sum(max(0, len(side) - k + 1) for side in (src, tgt) for k in (2, 3, 4))
    assert 0 < len(calls[1]) < every_span / 4  # most sentences are locked: few spans are reachable
    assert pairs_of(beads[0])[7:11] == [([7], [7]), ([8, 9], [8]), ([10], [9]), ([11], [10])]
    assert ([17], []) in pairs_of(beads[0])

    def all_spans(side):
        return [embed([" ".join(side[i:i + k]) for i in range(len(side) - k + 1)]) for k in range(1, 5)]

    lengths = [len(x) for x in src], [len(x) for x in tgt]
    assert pairs_of(align_vectors(all_spans(src), all_spans(tgt), None, *lengths)) == pairs_of(beads[0])


def test_pairs_of_two_collections_align_in_one_batch_with_or_without_anchors(hmde_dir, tmp_path):
    src, tgt = tmp_path / "en.jsonl", tmp_path / "de.jsonl"
    src.write_text("".join(json.dumps(d) + "\n" for d in [
        {"doc_id": "a", "text": ["The cat sleeps.", "It rains.", "The dog barks."], "lang": "eng"},
        {"doc_id": "b", "text": ["Good morning.", "See you soon."], "lang": "eng"}]))
    tgt.write_text("".join(json.dumps(d) + "\n" for d in [
        {"doc_id": "x", "text": ["Guten Morgen.", "Bis bald."], "lang": "deu"},
        {"doc_id": "y", "text": ["Die Katze schläft.", "Es regnet.", "Der Hund bellt."], "lang": "deu"}]))
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("src_id\ttgt_id\na\ty\nb\tx\n")

    for extra in ([], ["--no-joins"], ["--join-tolerance", "0.05"], ["--complete-translation"],
                  ["--no-anchors", "--max-merge", "4"]):
        out = tmp_path / f"beads{len(extra)}.jsonl"
        assert main(["align-sentences", str(hmde_dir), str(src), str(tgt), "--pairs", str(pairs), "-o", str(out),
                     "--no-progress", *extra]) == 0
        rows = [json.loads(x) for x in out.read_text().splitlines()]
        assert [r["src_doc"] for r in rows] == sorted(r["src_doc"] for r in rows)  # pair by pair, in order
        for doc, n, m in (("a", 3, 3), ("b", 2, 2)):
            mine = [r for r in rows if r["src_doc"] == doc]
            assert sorted(i for r in mine for i in r["src"]) == list(range(n))
            assert sorted(j for r in mine for j in r["tgt"]) == list(range(m))


def test_impossible_settings_are_one_line_before_any_model_loads(tmp_path, capsys):
    src = tmp_path / "en.txt"
    src.write_text("One.\nTwo.\n")
    for flags, message in ((["--length-weight", "-1"], "--length-weight must be between 0 (no length penalty) and "
                            "100, got -1.0"),
                           (["--bead-scoring", "neighbours", "--skip-score", "-0.5"],
                            "--skip-score must be between 0 and 10, got -0.5"),
                           (["--join-tolerance", "3"], "--join-tolerance must be between 0 and 2 (a change of "
                            "cosine), got 3.0"),
                           (["--join-length-weight", "-0.1"], "--join-length-weight must be between 0 (the cosine "
                            "alone) and 10, got -0.1")):
        assert main(["align-sentences", str(tmp_path / "no-model"), str(src), str(src), "-o", str(tmp_path / "o"),
                     *flags]) == 2
        assert capsys.readouterr().err.strip() == f"hmde: error: {message}"
    with pytest.raises(SystemExit):  # argparse: the bounds of --max-merge (issue 63)
        main(["align-sentences", str(tmp_path / "no-model"), str(src), str(src), "-o", str(tmp_path / "o"),
              "--max-merge", "1"])
    assert "--max-merge: must be between 2 and 10, got 1" in capsys.readouterr().err


def test_the_neighbour_score_by_hand():
    """Bertalign's kind of score (issue 65): the cosine less the mean of each span's mean cosine with the
    sentences just around the other span, x log2(1 + shorter / longer) with the target scaled by the document's
    ratio of characters."""
    from hmde.align.sentence_alignment import _Costs

    e = np.eye(3, dtype=np.float32)
    src, tgt = [e], [np.stack([e[0], unit(e[1] + e[2]), e[2]])]
    plain = _Costs(src, tgt, knn=1, scoring="neighbours")
    # (1, 1): cos 0.7071; src neighbours s0, s2 against t1: 0 and 0.7071 -> 0.3536; tgt neighbours t0, t2 against
    # s1: 0 and 0 -> 0; 0.7071 - 0.5 x 0.3536 = 0.5303. (0, 0): cos 1, its only neighbours orthogonal: 1.
    assert plain.pair_scores(np.array([1, 0]), np.array([1, 0])) == pytest.approx([0.53033, 1.0], abs=1e-4)
    sized = _Costs(src, tgt, knn=1, scoring="neighbours", src_lengths=[10, 20, 10], tgt_lengths=[10, 40, 10])
    # characters with a space each: source 11 / 21 / 11 (43), target 11 / 41 / 11 (63); target 41 x 43 / 63 = 27.98
    # against 21: x log2(1 + 21 / 27.98) = 0.8077
    assert sized.pair_scores(np.array([1]), np.array([1]))[0] == pytest.approx(0.53033 * 0.80769, abs=1e-4)
    assert -sized.cost(1, 1, 2, np.array([2]))[0] == pytest.approx(sized.pair_scores(np.array([1]), np.array([1]))[0])


def test_neighbour_scoring_aligns_a_weak_encoders_pairs_and_is_one_flag_away():
    rng = np.random.default_rng(3)
    dim = 256
    src = unit(rng.standard_normal((30, dim)))
    tgt = unit(0.35 * src + unit(rng.standard_normal((30, dim))))  # a translation's cosine ~0.33, others ~0
    lengths = rng.integers(40, 120, 30)
    neighbours = align_vectors(spans(src), spans(tgt), AlignmentOptions(scoring="neighbours"), lengths, lengths)
    assert pairs_of(neighbours) == [([i], [i]) for i in range(30)]
    assert AlignmentOptions().scoring == "ratio" and AlignmentOptions().skip_score == 0.5  # docs/model.md
    with pytest.raises(Exception, match="--bead-scoring must be one of ratio, neighbours"):
        AlignmentOptions(scoring="cosine").check()


def test_two_texts_align_as_complete_translations_unless_omissions_are_said(hmde_dir, tmp_path, monkeypatch, capsys):
    """Issue 77: two texts of `hmde align-sentences` translate each other whole unless --omissions says sentences may
    be missing (docs/sentence-alignment.md: the complete-translation setting leads on complete translations, the
    omission-aware one where sentences were deleted); documents paired by --pairs or by `hmde align` keep the
    omission-aware one. docs/model.md has the row."""
    from hmde.align.sentence_alignment import COMPLETE_TRANSLATION, AlignmentOptions
    from hmde.cli import align_sentences

    chosen = []
    real = align_sentences.write_alignments
    monkeypatch.setattr(align_sentences, "write_alignments",
                        lambda args, pairs, embed, options, *rest, **kw: chosen.append(options) or
                        real(args, pairs, embed, options, *rest, **kw))
    src, tgt = tmp_path / "en.txt", tmp_path / "de.txt"
    src.write_text("The cat sleeps.\nIt rains.\n")
    tgt.write_text("Die Katze schläft.\nEs regnet.\n")
    for flags in ([], ["--omissions"], ["--join-tolerance", "0.1"]):
        assert main(["align-sentences", str(hmde_dir), str(src), str(tgt), "-o", str(tmp_path / "o.jsonl"),
                     *flags]) == 0
    assert chosen == [AlignmentOptions.complete_translation(), AlignmentOptions(),
                      AlignmentOptions.complete_translation(join_tolerance=0.1)]
    assert COMPLETE_TRANSLATION == {"length_weight": 0.5, "join_tolerance": 0.04}
    docs_a, docs_b, pairs = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "pairs.tsv"
    docs_a.write_text(json.dumps({"doc_id": "x", "text": "One. Two.", "lang": "eng"}) + "\n")
    docs_b.write_text(json.dumps({"doc_id": "y", "text": "Eins. Zwei.", "lang": "deu"}) + "\n")
    pairs.write_text("x\ty\n")
    assert main(["align-sentences", str(hmde_dir), str(docs_a), str(docs_b), "--pairs", str(pairs), "-o",
                 str(tmp_path / "p.jsonl")]) == 0
    assert chosen[-1] == AlignmentOptions()
    assert main(["align-sentences", str(hmde_dir), str(src), str(tgt), "-o", str(tmp_path / "o.jsonl"),
                 "--omissions", "--complete-translation"]) == 2
    assert "--omissions and --complete-translation say opposite things" in capsys.readouterr().err
