"""After the search: a sentence left out (a 1-0 or 0-1 bead) joins the aligned bead next to it where that does
not lower the bead's cosine (issue 65).

Why: the programme prices a merge by ``a x b`` and a skip by the document's unrelated pairs, so it handles a
deleted sentence well, but with a weak encoder it also leaves out the last sentence of a long merge (a verse of
six target sentences against one, where the bead would pass ``max_merge``) or one whose part of the meaning is
small. The cosine of the joined texts tells the two apart: on the verse dev set with a tenth of each side
dropped, adding a deleted sentence to its neighbour's gold bead lowers the cosine (median -0.031, hmde-e5) and
adding a sentence that is part of the gold bead raises it (median +0.030); as a test of which is which the
change has an ROC AUC of 0.988 (0.943 with plain multilingual-e5-small), where a sentence's own best margin
against the other document reaches 0.74.

The length of the texts is a second witness (Gale and Church's): a missing part brings the bead's character
ratio back towards the document's, a deleted sentence pulls it away. Alone it separates the two about as well as
the cosine (ROC AUC 0.86 with hmde-e5, 0.88 with plain e5, over both neighbours' candidates, where the cosine's
change gives 0.85 and 0.81), and the two together better (0.90 and 0.90 at a weight of 0.05): a join's change is
the cosine's change plus ``join_length_weight`` (0.03) x how much nearer the document's log character ratio it
brings the bead.

A join is tried on both sides of each skip (the aligned bead just before it and just after it in the
monotone sequence; they always touch it); the one that changes the cosine most is taken if the change is at
least ``-tolerance``. Joins repeat, a round at a time (the texts of every candidate of every document pair
embedded in one call), until none is taken, so that two skips in a row can both join.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from .sentence_alignment import Bead, log_char_ratio, span_text


def _joined(bead: Bead, skip: Bead, after: bool) -> Bead:
    """``skip``'s sentence added to ``bead`` on the side where it lies (``after``: the skip follows it)."""
    if after:
        return Bead(bead.src + skip.src, bead.tgt + skip.tgt, 0.0)
    return Bead(skip.src + bead.src, skip.tgt + bead.tgt, 0.0)


def candidates(beads: Sequence[Bead]) -> list[tuple[int, int, Bead]]:
    """``(k, neighbour, joined)`` for every skip ``beads[k]`` and aligned bead ``beads[neighbour]`` next to it."""
    out = []
    for k, skip in enumerate(beads):
        if skip.src and skip.tgt:
            continue
        for n in (k - 1, k + 1):
            if 0 <= n < len(beads) and beads[n].src and beads[n].tgt:
                out.append((k, n, _joined(beads[n], skip, after=n < k)))
    return out


def side_text(sentences: Sequence[str], indices: Sequence[int]) -> str:
    """One side of a bead (consecutive, non-empty) as the search embeds a span of it (:func:`span_text`)."""
    return span_text(sentences, indices[0], len(indices))


def length_misfit(src: Sequence[str], tgt: Sequence[str]) -> Callable[[Bead], float]:
    """How far an aligned bead's log character ratio lies from the document's (the search's length penalty
    without its weight; a sentence counts its characters and one space, as the search counts a span)."""
    def chars(side, indices):
        return sum(len(side[i]) + 1 for i in indices)

    ratio = log_char_ratio(chars(src, range(len(src))), chars(tgt, range(len(tgt))))
    return lambda bead: float(abs(log_char_ratio(chars(src, bead.src), chars(tgt, bead.tgt)) - ratio))


def join_round(beads: list[Bead], cosine: Callable[[Bead], float], tolerance: float,
               misfit: Callable[[Bead], float] | None = None, length_weight: float = 0.0) -> tuple[list[Bead], bool]:
    """One round: each skip's best join, taken left to right where it changes the cosine (plus ``length_weight``
    x how much nearer the document's length ratio it brings the bead, by ``misfit``) by at least ``-tolerance``
    and neither bead was changed earlier in the round. Returns the beads and whether any joined."""
    best: dict[int, tuple[float, int, Bead]] = {}
    for k, n, joined in candidates(beads):
        joined.score = cosine(joined)
        change = joined.score - cosine(beads[n])  # both from the same embedding of the texts
        if length_weight and misfit is not None:
            change += length_weight * (misfit(beads[n]) - misfit(joined))
        if change >= -tolerance and (k not in best or change > best[k][0]):
            best[k] = (change, n, joined)
    if not best:
        return beads, False
    used: set[int] = set()
    replaced: dict[int, Bead | None] = {}
    for k in sorted(best):
        _, n, joined = best[k]
        if k in used or n in used:
            continue
        used.update((k, n))
        replaced[min(k, n)], replaced[max(k, n)] = joined, None
    out = [replaced.get(i, b) for i, b in enumerate(beads)]
    return [b for b in out if b is not None], True


def in_rounds(documents: Sequence[tuple[Sequence[str], Sequence[str], list[Bead]]],
              embed_texts: Callable[[list[str]], dict[str, np.ndarray]],
              beads_read: Callable[[list[Bead]], list[Bead]],
              one_round: Callable[[int, list[Bead], Callable[[Bead], float]], tuple[list[Bead], bool]],
              rounds: int) -> list[list[Bead]]:
    """A pass after the search, a round at a time over every document pair (``(src, tgt, beads)``) until none
    changes: ``beads_read(beads)`` lists the beads whose cosines a round reads (their texts embedded in one call of
    ``embed_texts(texts) -> unit vectors by text`` for every open pair), ``one_round(d, beads, cosine)`` returns the
    pair's new beads and whether they changed."""
    results = [list(beads) for _, _, beads in documents]
    open_pairs = list(range(len(documents)))
    for _ in range(rounds):
        texts = [side_text(side, ix) for d in open_pairs for bead in beads_read(results[d])
                 for side, ix in ((documents[d][0], bead.src), (documents[d][1], bead.tgt))]
        if not texts:
            break
        vectors = embed_texts(texts)
        still = []
        for d in open_pairs:
            src, tgt, _ = documents[d]

            def cosine(bead: Bead, src=src, tgt=tgt) -> float:
                return float(vectors[side_text(src, bead.src)] @ vectors[side_text(tgt, bead.tgt)])

            results[d], changed = one_round(d, results[d], cosine)
            if changed:
                still.append(d)
        open_pairs = still
        if not open_pairs:
            break
    return results


def join_skips(documents: Sequence[tuple[Sequence[str], Sequence[str], list[Bead]]],
               embed_texts: Callable[[list[str]], dict[str, np.ndarray]], tolerance: float,
               rounds: int = 20, length_weight: float = 0.0) -> list[list[Bead]]:
    """Every document pair's beads after the joins: ``documents`` holds ``(src, tgt, beads)``;
    ``embed_texts(texts)`` returns unit vectors by text (each distinct text embedded once per round);
    ``length_weight``: the weight of the length ratio's change beside the cosine's (:func:`join_round`)."""
    misfits = [length_misfit(src, tgt) for src, tgt, _ in documents]
    return in_rounds(documents, embed_texts,
                     lambda beads: [b for _, n, joined in candidates(beads) for b in (joined, beads[n])],
                     lambda d, beads, cosine: join_round(beads, cosine, tolerance, misfits[d], length_weight), rounds)
