"""Skipped sentences joining the aligned bead next to them (issue 65, :mod:`hmde.align.joins`): the rule on
hand-checked cosines, rounds for skips in a row, and the whole aligner on a bead longer than ``max_merge``
allows and on a deletion."""

from __future__ import annotations

import numpy as np
import pytest

from hmde.align.joins import candidates, join_round, join_skips
from hmde.align.sentence_alignment import AlignmentOptions, Bead
from hmde.align.sentence_pairs import align_many


def pairs_of(beads):
    return [(b.src, b.tgt) for b in beads]


def table(cosines):
    return lambda bead: cosines[(tuple(bead.src), tuple(bead.tgt))]


def test_a_skip_joins_the_neighbour_whose_cosine_rises_most_and_never_one_that_falls_past_the_tolerance():
    beads = [Bead([0], [0], 0.8), Bead([1], [], 0.0), Bead([2], [1], 0.9)]
    assert [(k, n, pairs_of([j])[0]) for k, n, j in candidates(beads)] == [(1, 0, ([0, 1], [0])),
                                                                           (1, 2, ([1, 2], [1]))]
    rises = {((0,), (0,)): 0.80, ((0, 1), (0,)): 0.83, ((2,), (1,)): 0.90, ((1, 2), (1,)): 0.92}
    joined, changed = join_round(beads, table(rises), tolerance=0.0)
    # +0.03 before, +0.02 after: the bead before takes it, with the joined texts' cosine as its score
    assert changed and pairs_of(joined) == [([0, 1], [0]), ([2], [1])] and joined[0].score == 0.83
    falls = {((0,), (0,)): 0.80, ((0, 1), (0,)): 0.79, ((2,), (1,)): 0.90, ((1, 2), (1,)): 0.88}
    assert join_round(beads, table(falls), tolerance=0.0) == (beads, False)  # -0.01 and -0.02: a deletion
    assert pairs_of(join_round(beads, table(falls), tolerance=0.015)[0]) == [([0, 1], [0]), ([2], [1])]
    assert pairs_of(join_round(beads, table(falls), tolerance=0.025)[0]) == [([0, 1], [0]), ([2], [1])]


def test_a_target_skip_joins_on_the_target_side_and_two_skips_in_a_row_join_over_two_rounds():
    e = np.eye(4)
    vectors = {"a": e[0], "b": e[1], "x": e[0], "y": e[1] * 0.5 + e[0] * 0.1, "z": e[1]}

    def embed_texts(texts):
        out = {}
        for t in texts:
            v = sum(vectors[w] for w in t.split())
            out[t] = v / np.linalg.norm(v)
        return out

    # source "a b" translated by "x y z": the programme found ([0, 1], [0]) then left y and z out
    beads = [Bead([0, 1], [0], 0.7071), Bead([], [1], 0.0), Bead([], [2], 0.0)]
    joined = join_skips([(["a", "b"], ["x", "y", "z"], beads)], embed_texts, tolerance=0.0)
    assert pairs_of(joined[0]) == [([0, 1], [0, 1, 2])]
    assert joined[0][0].score == pytest.approx(float(embed_texts(["a b"])["a b"] @ embed_texts(["x y z"])["x y z"]))


def test_the_aligner_joins_a_bead_longer_than_max_merge_and_leaves_a_deleted_sentence_out():
    rng = np.random.default_rng(5)
    dim = 64
    common = rng.standard_normal(dim)
    base = {f"s{i}": 2.0 * common + rng.standard_normal(dim) for i in range(20)}
    parts = [rng.standard_normal(dim) for _ in range(6)]
    base["s5"] = sum(parts) + 2.0 * common  # one long verse: six target sentences

    def vector(word):
        if word in base:
            return base[word]
        if word.startswith("p"):
            return parts[int(word[1:])] + 0.3 * common
        return base["s" + word[1:]] + 0.1 * np.random.default_rng(int(word[1:])).standard_normal(dim)

    def embed(texts):
        v = np.stack([sum(vector(w) for w in t.split()) for t in texts])
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    src = [f"s{i}" for i in range(20)]
    tgt = [f"t{i}" for i in range(5)] + [f"p{k}" for k in range(6)] + [f"t{i}" for i in range(6, 20) if i != 12]
    joined = align_many([(src, tgt, None, None)], embed)[0]
    before = align_many([(src, tgt, None, None)], embed, AlignmentOptions(join_tolerance=None))[0]
    assert ([5], list(range(5, 11))) in pairs_of(joined)  # 1-6: past max_merge 5, whole after the joins
    assert ([5], list(range(5, 11))) not in pairs_of(before)
    assert ([12], []) in pairs_of(joined) and ([12], []) in pairs_of(before)  # s12's translation is gone
    assert AlignmentOptions().join_tolerance == 0.0  # docs/model.md
    with pytest.raises(Exception, match="--join-tolerance must be between 0 and 2"):
        AlignmentOptions(join_tolerance=-0.1).check()


def test_complete_translation_joins_more_readily_and_explicit_flags_win():
    """``--complete-translation`` (issue 65): tolerance 0.04 and length weight 0.5 (docs/sentence-alignment.md,
    measured, not the default); a flag given beside it wins, ``--no-joins`` too."""
    from hmde.cli.align_sentences import alignment_options
    from hmde.cli.main import build_parser

    def options(*flags):
        return alignment_options(build_parser().parse_args(["align-sentences", "m", "a", "b", "-o", "o", *flags]))

    complete = AlignmentOptions.complete_translation()
    assert (complete.length_weight, complete.join_tolerance) == (0.5, 0.04)
    assert options() == AlignmentOptions() and (AlignmentOptions().length_weight, AlignmentOptions().join_tolerance) \
        == (0.25, 0.0)
    assert options("--complete-translation") == complete
    assert options("--complete-translation", "--join-tolerance", "0.01") == AlignmentOptions(length_weight=0.5,
                                                                                            join_tolerance=0.01)
    assert options("--complete-translation", "--no-joins").join_tolerance is None
    assert options("--length-weight", "1") == AlignmentOptions(length_weight=1.0)
    assert options("--complete-translation", "--max-merge", "4").max_merge == 4
    # a true part whose join lowers the cosine by 0.02 (a weak encoder): left out by default, joined here
    beads = [Bead([0], [0], 0.0), Bead([], [1], 0.0), Bead([1], [2], 0.0)]
    cosines = {((0,), (0,)): 0.80, ((0,), (0, 1)): 0.78, ((1,), (2,)): 0.90, ((1,), (1, 2)): 0.85}
    assert join_round(beads, table(cosines), AlignmentOptions().join_tolerance) == (beads, False)
    assert pairs_of(join_round(beads, table(cosines), complete.join_tolerance)[0]) == [([0], [0, 1]), ([1], [2])]


def test_the_length_misfit_by_hand_and_its_weight_in_a_join():
    """A bead's misfit is |log(its source characters / its target characters) - the document's|, a sentence
    counting one space; weighted beside the cosine's change, it joins a missing part whose cosine fell a little
    and keeps out a sentence that would pull the bead's lengths apart."""
    from hmde.align.joins import length_misfit

    src, tgt = ["aaaa", "bbbbbbbbb"], ["cccc", "dddd", "eeeee"]  # 5 + 10 = 15 characters against 5 + 5 + 6 = 16
    misfit = length_misfit(src, tgt)
    ratio = np.log(15 / 16)
    assert misfit(Bead([0], [0], 0.0)) == pytest.approx(abs(0.0 - ratio))
    assert misfit(Bead([1], [1, 2], 0.0)) == pytest.approx(abs(np.log(10 / 11) - ratio))
    assert misfit(Bead([0, 1], [0], 0.0)) == pytest.approx(abs(np.log(15 / 5) - ratio))
    # target sentence 1 left out between two beads; joined before: cosine -0.01, lengths 5:5 -> 5:10 (away from
    # the document's 15:16); joined after: cosine -0.01, lengths 10:6 -> 10:11 (nearer)
    beads = [Bead([0], [0], 0.0), Bead([], [1], 0.0), Bead([1], [2], 0.0)]
    cosines = {((0,), (0,)): 0.80, ((0,), (0, 1)): 0.79, ((1,), (2,)): 0.90, ((1,), (1, 2)): 0.89}
    assert join_round(beads, table(cosines), 0.0, misfit, 0.0) == (beads, False)
    gain_after = misfit(Bead([1], [2], 0.0)) - misfit(Bead([1], [1, 2], 0.0))  # 0.575 - 0.031
    assert gain_after == pytest.approx(abs(np.log(10 / 6) - ratio) - abs(np.log(10 / 11) - ratio))
    joined, changed = join_round(beads, table(cosines), 0.0, misfit, 0.05)  # -0.01 + 0.05 x 0.544 > 0
    assert changed and pairs_of(joined) == [([0], [0]), ([1], [1, 2])]
    assert join_round(beads, table(cosines), 0.0, misfit, 0.015) == (beads, False)  # -0.01 + 0.015 x 0.544 < 0
    assert AlignmentOptions().join_length_weight == 0.03  # the default (docs/model.md)
    with pytest.raises(Exception, match="--join-length-weight must be between 0 "):
        AlignmentOptions(join_length_weight=-1).check()
