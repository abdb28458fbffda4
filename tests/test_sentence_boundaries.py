"""The boundary between two aligned beads moved by a sentence after the search (issue 65,
:mod:`hmde.align.boundaries`): the candidate moves, the rule on hand-checked cosines, rounds, and the pass inside
the aligner."""

from __future__ import annotations

import numpy as np
import pytest

from hmde.align.boundaries import move_boundaries, move_round, moves
from hmde.align.sentence_alignment import AlignmentOptions, Bead


def pairs_of(beads):
    return [(b.src, b.tgt) for b in beads]


def table(cosines):
    return lambda bead: cosines[(tuple(bead.src), tuple(bead.tgt))]


def test_the_moves_of_a_boundary_keep_a_sentence_on_each_side_and_skip_unaligned_beads():
    beads = [Bead([0], [0, 1], 0.0), Bead([1], [2], 0.0), Bead([2], [], 0.0), Bead([3], [3], 0.0)]
    # between beads 0 and 1 only t1 can move forward: t2 back would leave bead 1 without a target sentence, and
    # either source sentence moving would leave a bead without a source one; the skip (bead 2) touches no move
    assert [(k, pairs_of([x, y])) for k, x, y in moves(beads)] == [(0, [([0], [0]), ([1], [1, 2])])]
    two = [Bead([0, 1], [0], 0.0), Bead([2], [1, 2], 0.0)]
    assert [pairs_of([x, y]) for _, x, y in moves(two)] == [
        [([0], [0]), ([1, 2], [1, 2])],  # s1 forward
        [([0, 1], [0, 1]), ([2], [2])],  # t1 back
    ]


def test_a_boundary_moves_where_the_two_cosines_rise_and_stays_where_they_fall():
    # gold: s0 <-> t0, s1 <-> t1 t2 t3; the search gave s0 <-> t0 t1, s1 <-> t2 t3
    beads = [Bead([0], [0, 1], 0.70), Bead([1], [2, 3], 0.75)]
    cosines = {((0,), (0, 1)): 0.70, ((1,), (2, 3)): 0.75,
               ((0,), (0,)): 0.80, ((1,), (1, 2, 3)): 0.78,   # t1 forward: +0.10 + 0.03 = +0.13
               ((0,), (0, 1, 2)): 0.60, ((1,), (3,)): 0.50}   # t2 back: -0.10 - 0.25
    moved, changed = move_round(beads, table(cosines), min_gain=0.0)
    assert changed and pairs_of(moved) == [([0], [0]), ([1], [1, 2, 3])]
    assert (moved[0].score, moved[1].score) == (0.80, 0.78)
    assert move_round(beads, table(cosines), min_gain=0.15) == (beads, False)  # +0.13 is not more than 0.15
    falls = dict(cosines) | {((0,), (0,)): 0.66, ((1,), (1, 2, 3)): 0.78}    # -0.04 + 0.03 = -0.01
    assert move_round(beads, table(falls), min_gain=0.0) == (beads, False)


def test_each_bead_moves_once_a_round_the_largest_rise_first():
    # both boundaries would gain; bead 1 is in both moves, so only the larger (the second) is taken this round
    beads = [Bead([0], [0, 1], 0.0), Bead([1], [2], 0.0), Bead([2, 3], [3], 0.0)]
    cosines = {((0,), (0, 1)): 0.70, ((1,), (2,)): 0.80, ((2, 3), (3,)): 0.60,
               ((0,), (0,)): 0.72, ((1,), (1, 2)): 0.80,            # t1 forward: +0.02
               ((1, 2), (2,)): 0.85, ((3,), (3,)): 0.75}            # s2 back: +0.05 + 0.15
    moved, changed = move_round(beads, table(cosines), 0.0)
    assert changed and pairs_of(moved) == [([0], [0, 1]), ([1, 2], [2]), ([3], [3])]


def test_moves_over_rounds_with_embedded_texts():
    e = np.eye(6)
    vectors = {"a": e[0], "b": e[1] + e[2] + e[3], "x": e[0], "p": e[1], "q": e[2], "r": e[3]}

    def embed_texts(texts):  # a text is the sum of its words' vectors, normalised
        summed = {t: np.sum([vectors[w] for w in t.split()], axis=0) for t in texts}
        return {t: v / np.linalg.norm(v) for t, v in summed.items()}

    # a <-> x, b <-> p q r, but the search put p and q with a
    beads = [Bead([0], [0, 1, 2], 0.0), Bead([1], [3], 0.0)]
    out = move_boundaries([(["a", "b"], ["x", "p", "q", "r"], beads)], embed_texts, min_gain=0.0)
    assert pairs_of(out[0]) == [([0], [0]), ([1], [1, 2, 3])]  # two rounds: q, then p
    assert out[0][1].score == pytest.approx(1.0) and out[0][0].score == pytest.approx(1.0)


def test_the_default_moves_boundaries_and_refuses_a_negative_gain():
    assert AlignmentOptions().boundary_gain == 0.0  # docs/model.md
    with pytest.raises(Exception, match="--boundary-gain must be between 0 and 2"):
        AlignmentOptions(boundary_gain=-0.1).check()


def test_the_flags_of_the_moves():
    from hmde.cli.align_sentences import alignment_options
    from hmde.cli.main import build_parser

    def options(*flags):
        return alignment_options(build_parser().parse_args(["align-sentences", "m", "a", "b", "-o", "o", *flags]))

    assert options().boundary_gain == 0.0
    assert options("--no-boundary-moves").boundary_gain is None
    assert options("--boundary-gain", "0.02").boundary_gain == 0.02
    assert options("--complete-translation").boundary_gain == 0.0
