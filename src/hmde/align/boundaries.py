"""After the search and the joins: the boundary between two aligned beads moved by one sentence where that
raises the two beads' cosines (issue 65).

Why: the programme prices a bead by its normalised distance times ``a x b``, so between a 1-3 + 1-1 and a 1-2 +
1-2 reading of two source sentences against four target sentences the weights (3 + 1 against 2 + 2) decide as
much as the texts do; with a weak encoder, whose distances lie close together, the boundary then falls a
sentence off (docs/sentence-alignment.md). A move keeps the number of beads and of aligned sentences, so it can
be judged by the texts alone: the last sentence of one side of a bead goes to the next bead's side (or that
bead's first sentence comes back) where the sum of the two beads' cosines rises by more than ``min_gain`` (0).
Rounds repeat, each bead in at most one move a round, until none is taken (at most ``rounds``); the texts of a
round's candidates are embedded in one call, only those the steps before did not embed.

Measured (docs/sentence-alignment.md, "Boundary moves"): strict F1 up on both verse sets at both encoders and not
down elsewhere; moves of two sentences, of both sides at once, or weighing the length misfit beside the cosines
changed nothing or less.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

import numpy as np

from .joins import in_rounds
from .sentence_alignment import Bead


def moves(beads: Sequence[Bead]) -> list[tuple[int, Bead, Bead]]:
    """``(k, new_k, new_next)`` for every one-sentence move of the boundary between aligned beads k and k + 1, on
    one side, that leaves both beads with a sentence on each side."""
    out = []
    for k in range(len(beads) - 1):
        a, b = beads[k], beads[k + 1]
        if not (a.src and a.tgt and b.src and b.tgt):
            continue
        for side in ("src", "tgt"):
            left, right = getattr(a, side), getattr(b, side)
            for new_left, new_right in ((left[:-1], left[-1:] + right), (left + right[:1], right[1:])):
                if new_left and new_right:
                    out.append((k, replace(a, score=0.0, **{side: new_left}),
                                replace(b, score=0.0, **{side: new_right})))
    return out


def move_round(beads: list[Bead], cosine: Callable[[Bead], float], min_gain: float) -> tuple[list[Bead], bool]:
    """One round: each boundary's best move where the sum of the two beads' cosines rises by more than
    ``min_gain``, the largest rises first, a bead in one move at most. Returns the beads and whether any moved."""
    best: dict[int, tuple[float, Bead, Bead]] = {}
    for k, x, y in moves(beads):
        gain = cosine(x) + cosine(y) - cosine(beads[k]) - cosine(beads[k + 1])
        if gain > min_gain and (k not in best or gain > best[k][0]):
            best[k] = (gain, x, y)
    out, moved = list(beads), False
    used: set[int] = set()
    for k in sorted(best, key=lambda k: -best[k][0]):
        if k in used or k + 1 in used:
            continue
        _, x, y = best[k]
        x.score, y.score = cosine(x), cosine(y)
        out[k], out[k + 1] = x, y
        used.update((k, k + 1))
        moved = True
    return out, moved


def move_boundaries(documents: Sequence[tuple[Sequence[str], Sequence[str], list[Bead]]],
                    embed_texts: Callable[[list[str]], dict[str, np.ndarray]], min_gain: float,
                    rounds: int = 10) -> list[list[Bead]]:
    """Every document pair's beads after the moves: ``documents`` holds ``(src, tgt, beads)``;
    ``embed_texts(texts)`` returns unit vectors by text (what is not embedded yet, in one call a round)."""
    return in_rounds(documents, embed_texts,
                     lambda beads: [b for k, x, y in moves(beads) for b in (x, y, beads[k], beads[k + 1])],
                     lambda d, beads, cosine: move_round(beads, cosine, min_gain), rounds)
