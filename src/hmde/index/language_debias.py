"""Searching a mixed-language collection by meaning, not by the query's language (issue 56).

In one vector space for every language, each language still has its own mean direction: a query is nearer the
documents of its own language before any meaning counts (XQuAD paragraphs in six languages, questions in one:
the query's language held 27-47% of the top-1 hits for 17% of the answers). LAWDR removes a language's mean and
its dominant directions from its vectors; hmde removes the span ``B`` of the collection's centred language means
(the directions in which the indexed languages differ on average) from the query and from every vector it is
scored against. The stored vectors stay as written: since the projected query is orthogonal to ``B``, the
cosine of the two projections is ``q' . s / |s - B^T B s|`` (:func:`residual_norms`), computed for the candidates
FAISS finds with the projected query. The index records each language's count and sum of sentence vectors
(``languages.npz``), kept up to date by every write; the basis is made when the index opens.

Measured with exact scores on XQuAD (benchmarks/language_bias.py, docs/defaults.md): mixed-pool MRR@10 +0.029 on
average over seven query languages (paragraphs) and +0.009 (articles; Hindi -0.010 there); a collection in one
language is unchanged (its basis is empty).

What the subspace leaves: a right answer in another language still scores below the same answer in the query's
language, and a neighbour on the same subject in the query's language outranks it. ``subspace+calibrate`` (the
default since stop 61) lowers the documents in the query's own language by :data:`CALIBRATION_WEIGHT` times the
query's match strength (:func:`calibrate`; what a search reads for it: :mod:`hmde.index.calibration`): XQuAD
paragraphs' mixed minus single -0.021 -> -0.006 (first questions, where it was chosen), -0.015 -> -0.005 and
-0.012 -> -0.001 (second and third questions); the Bible's chapters no worse (-0.028 -> -0.027).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

STATS_FILE = "languages.npz"
# "subspace+calibrate": the default of a new index (stop 61); "subspace": the subspace alone (indexes built in stops
# 57-60); "": none (indexes built before issue 56). Each index keeps what it recorded.
MODES = ("subspace+calibrate", "subspace", "")
CALIBRATION_WEIGHT = 0.15  # G of :func:`calibrate`, measured (docs/defaults.md: XQuAD's three question sets, the Bible)
CALIBRATION_SAMPLE = 256  # documents whose mean score is a query's baseline (all of them in a smaller collection)
MIN_SENTENCES = 20  # a language with fewer indexed sentences gives no direction (its mean is noise)


def debias_mode(choice: str | None) -> str:
    """The mode an index records for a ``--language-debias`` choice (None: the default; "none": "")."""
    if choice is None:
        return MODES[0]
    if choice == "none":
        return ""
    if choice not in MODES:
        from ..errors import HmdeError

        raise HmdeError(f"unknown --language-debias {choice!r} ({', '.join(MODES[:2])} or none)")
    return choice


class LanguageStats:
    """Per language: how many vectors and their sum (float64), updated by adds and deletes."""

    def __init__(self, dim: int, langs=(), counts=(), sums=None):
        self.dim = dim
        self.counts = {str(k): int(c) for k, c in zip(langs, counts)}
        self.sums = {str(k): np.asarray(s, np.float64) for k, s in zip(langs, sums if sums is not None else [])}

    @classmethod
    def load(cls, folder: Path, dim: int) -> "LanguageStats":
        """The statistics an index that records a language debiasing keeps (every write saves them): a missing
        file is refused in one line, as a garbled one is (it was read as no statistics: other scores, silently)."""
        from ..errors import InputError

        path = Path(folder) / STATS_FILE
        if not path.is_file():
            raise InputError("missing: the index records a language debiasing, whose statistics this file holds; put "
                             "it back, or rebuild the index (hmde index build ... --overwrite)", path=str(path))
        try:
            with np.load(path, allow_pickle=False) as data:
                langs, counts, sums = [str(x) for x in data["langs"]], data["counts"], data["sums"]
        except (ValueError, OSError, KeyError, EOFError) as exc:
            raise InputError(f"not readable language statistics ({exc}); rebuild the index", path=str(path)) from None
        if sums.shape != (len(langs), dim) or len(counts) != len(langs):
            raise InputError(f"language statistics of shape {sums.shape} for {len(langs)} languages of dimension {dim}; "
                             "rebuild the index", path=str(path))
        return cls(dim, langs, counts, sums)

    def save(self, folder: Path) -> None:
        langs = sorted(self.counts)
        np.savez(Path(folder) / STATS_FILE, langs=np.array(langs, dtype=str),
                 counts=np.array([self.counts[k] for k in langs], np.int64),
                 sums=np.stack([self.sums[k] for k in langs]) if langs else np.zeros((0, self.dim)))

    def update(self, langs, vectors_per_doc, sign: int = 1) -> None:
        """Add (``sign`` 1) or remove (-1) each document's vectors under its language (None: not counted)."""
        for lang, vectors in zip(langs, vectors_per_doc):
            vectors = np.asarray(vectors, np.float64).reshape(-1, self.dim)
            if lang is None or not len(vectors):
                continue
            key = str(lang)
            self.counts[key] = self.counts.get(key, 0) + sign * len(vectors)
            self.sums[key] = self.sums.get(key, np.zeros(self.dim)) + sign * vectors.sum(0)
            if self.counts[key] <= 0:
                del self.counts[key], self.sums[key]

    def basis(self) -> np.ndarray:
        """An orthonormal (k, dim) basis of the span of the languages' centred mean vectors (k < languages)."""
        keys = [k for k in sorted(self.counts) if self.counts[k] >= MIN_SENTENCES]
        if len(keys) < 2:
            return np.zeros((0, self.dim), np.float32)
        means = np.stack([self.sums[k] / self.counts[k] for k in keys])
        return orthonormal_rows(means - means.mean(0))


def recorded_basis(folder: Path, meta) -> np.ndarray:
    """The basis an index at ``folder`` searches with: from its recorded statistics where it records a mode (every
    store keeps ``languages.npz`` in the index's folder), else none."""
    if not meta.language_debias:
        return np.zeros((0, meta.dim), np.float32)
    return LanguageStats.load(folder, meta.dim).basis()


def orthonormal_rows(m: np.ndarray) -> np.ndarray:
    """An orthonormal basis (rows) of the span of ``m``'s rows; directions under 1e-6 of the largest are dropped."""
    _, s, vt = np.linalg.svd(m, full_matrices=False)
    return vt[s > 1e-6 * max(float(s.max()), 1e-12)].astype(np.float32)


def residual_norms(vectors: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """The lengths of unit ``vectors`` with the rows of ``basis`` projected out: the cosine of a projected query
    and a projected vector is their dot product divided by this (the stored vectors stay as written)."""
    vectors = np.asarray(vectors, np.float32).reshape(-1, basis.shape[1])
    inside = np.square(vectors @ basis.T).sum(1)
    return np.sqrt(np.maximum(np.square(vectors).sum(1) - inside, 1e-6)).astype(np.float32)


def project_out(x: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """``x`` without its components in the rows of ``basis`` (orthonormal)."""
    return x - (x @ basis.T) @ basis if len(basis) else x


def calibrate(scores: np.ndarray, mine: np.ndarray, baseline: float, weight: float = CALIBRATION_WEIGHT) -> np.ndarray:
    """One query's candidate ``scores`` with those of the documents in the query's own language (``mine``) lowered
    by ``weight`` times the query's match strength: its top score over ``baseline``, its mean score over (a sample
    of) all documents. Why: a right answer in another language scores below the same answer in the query's
    language (0.046 on XQuAD, 0.011 on the Bible's weaker matches), so a neighbour on the same subject in the
    query's language outranks it; the gap grows with how well the query matches, hence the scale. Within one
    language it is a constant, so a collection in one language ranks as before (a search applies it only where
    the index holds other languages too)."""
    scores = np.asarray(scores, np.float32)
    mine = np.asarray(mine, bool)
    if not len(scores) or not mine.any():
        return scores
    strength = max(float(scores.max()) - float(baseline), 0.0)
    return scores - np.float32(weight * strength) * mine
