"""Aligning the sentences of document pairs: the embedding around the search of
:mod:`hmde.align.sentence_alignment`. Single sentences are embedded (or taken from a document step), the first
step finds each pair's anchors, and only then are the merged spans embedded that the windowed search can
reach: each distinct text once, in one call per group of pairs. After the search, the skipped sentences' joins
(:mod:`hmde.align.joins`) embed only the joined texts not embedded already, a round of the group at a time."""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from .boundaries import move_boundaries
from .joins import join_skips
from .sentence_alignment import AlignmentOptions, Bead, align_vectors, first_step, span_text
from .similarity import normalize


def align_sentences(src: Sequence[str], tgt: Sequence[str], embed: Callable[[list[str]], np.ndarray],
                    options: AlignmentOptions | None = None, src_singles: np.ndarray | None = None,
                    tgt_singles: np.ndarray | None = None) -> list[Bead]:
    """Align two documents' sentences; ``embed(texts) -> vectors`` is the sentence encoder."""
    return align_many([(src, tgt, src_singles, tgt_singles)], embed, options)[0]


def _embed_distinct(texts: list[str], embed: Callable[[list[str]], np.ndarray]) -> dict[str, np.ndarray]:
    """Unit vectors of ``texts``, each distinct text embedded once, in one call."""
    distinct = list(dict.fromkeys(texts))
    return dict(zip(distinct, normalize(embed(distinct)))) if distinct else {}


def _spans(sentences: Sequence[str], singles: np.ndarray, longest: int, starts: Callable[[int], np.ndarray],
           vectors: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Every span's vector (``out[k-1][i]``: sentences i .. i+k-1); spans no search reaches stay zero."""
    out = [singles]
    for k in range(2, longest + 1):
        block = np.zeros((max(0, len(sentences) - k + 1), singles.shape[1]), np.float32)
        for i in starts(k):
            block[i] = vectors[span_text(sentences, i, k)]
        out.append(block)
    return out


def align_many(pairs: Sequence[tuple], embed: Callable[[list[str]], np.ndarray],
               options: AlignmentOptions | None = None, group_sentences: int = 20_000,
               progress: Callable[[int], None] | None = None) -> list[list[Bead]]:
    """Align many document pairs: ``pairs`` holds ``(src, tgt, src_singles, tgt_singles)`` (sentences, and
    their vectors where a document step has them, else None). Embedding is batched across the pairs of a
    group (about ``group_sentences`` sentences): the missing single sentences in one call, then every merged
    span that the windowed search can reach (:meth:`Anchors.span_starts`), each distinct text once.
    ``progress(k)`` is called as each group's ``k`` pairs are aligned."""
    options = (options or AlignmentOptions()).check()
    out: list[list[Bead]] = []
    group: list[tuple] = []
    size = 0
    for pair in pairs:
        group.append(pair)
        size += len(pair[0]) + len(pair[1])
        if size >= group_sentences:
            out += _align_group(group, embed, options)
            if progress:
                progress(len(group))
            group, size = [], 0
    if group:
        out += _align_group(group, embed, options)
        if progress:
            progress(len(group))
    return out


def _align_group(pairs: Sequence[tuple], embed, options: AlignmentOptions) -> list[list[Bead]]:
    longest = options.max_merge - 1
    missing = [t for src, tgt, vs, vt in pairs for side, v in ((src, vs), (tgt, vt)) if v is None for t in side]
    singles = _embed_distinct(missing, embed)

    def vectors_of(side, given):
        if given is not None:
            return normalize(given)
        return np.stack([singles[t] for t in side]) if side else np.zeros((0, 1), np.float32)

    prepared = []
    for src, tgt, vs, vt in pairs:
        s1, t1 = vectors_of(src, vs), vectors_of(tgt, vt)
        lengths = [len(x) for x in src], [len(x) for x in tgt]
        plan = first_step(s1, t1, options, *lengths) if len(src) and len(tgt) else None
        prepared.append((src, tgt, s1, t1, lengths, plan))
    wanted = [span_text(side, i, k) for src, tgt, _, _, _, plan in prepared if plan
              for name, side in (("src", src), ("tgt", tgt)) for k in range(2, longest + 1)
              for i in plan.anchors.span_starts(name, k)]
    spans = _embed_distinct(wanted, embed)
    results = []
    for src, tgt, s1, t1, lengths, plan in prepared:
        if plan is None:
            results.append(align_vectors([s1], [t1], options))
            continue
        results.append(align_vectors(_spans(src, s1, longest, lambda k: plan.anchors.span_starts("src", k), spans),
                                     _spans(tgt, t1, longest, lambda k: plan.anchors.span_starts("tgt", k), spans),
                                     options, *lengths, plan=plan))
    known = singles | spans

    def embed_texts(texts: list[str]) -> dict[str, np.ndarray]:  # only what the steps before did not embed
        known.update(_embed_distinct([t for t in texts if t not in known], embed))
        return known

    def documents(results):
        return [(src, tgt, beads) for (src, tgt, *_), beads in zip(pairs, results)]

    if options.join_tolerance is not None:
        results = join_skips(documents(results), embed_texts, options.join_tolerance,
                             length_weight=options.join_length_weight)
    if options.boundary_gain is not None:
        results = move_boundaries(documents(results), embed_texts, options.boundary_gain)
    return results
