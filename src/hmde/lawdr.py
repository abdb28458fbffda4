"""LAWDR: unsupervised document vectors from sentence vectors (Gong et al. 2021).

Three statistics are fitted once on a corpus and then applied unchanged to every
document encoded later, so that documents encoded on different days stay comparable:

1. per language, the top-``m`` right singular vectors of that language's sentence
   matrix (the "language subspace"); their projection is removed from every vector.
   ``m`` is given, or chosen as the smallest value on a grid that brings a linear
   language classifier (scikit-learn logistic regression, 5-fold CV) below 55%;
2. a 16-dimensional PCA of the cleaned vectors and a tophat kernel density on it,
   bandwidth by 5-fold cross-validated likelihood (scikit-learn ``GridSearchCV``);
3. ``b`` = half the mean density of the fitting sentences.

A document is the sum of its cleaned sentence vectors weighted by ``b / (b + P(s))``:
sentences of dense, generic regions (boilerplate, "Thank you.") count less.

Choices where the paper is silent (documented in docs/model.md): the SVD is of the
uncentred matrix (its first direction is then the language's mean direction, the
largest language signal); PCA and KDE are fitted on all languages pooled, after
cleaning, so that a document and its translation are weighted on one scale; KDE is
fitted on at most ``max_kde_points`` sentences.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from .atomic import atomic_dir
from .errors import HmdeError
from .io.tagged_json import read_tagged_json

STATS_FORMAT = "hmde-lawdr/1"
M_GRID = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


@dataclass
class LawdrStats:
    """Everything LAWDR fitted; ``save``/``load`` round-trip it exactly."""

    directions: dict[str, np.ndarray]  # lang -> (m, dim), orthonormal rows
    pca_mean: np.ndarray
    pca_components: np.ndarray  # (k, dim)
    kde_points: np.ndarray  # (n, k) the KDE's fitting points
    bandwidth: float
    b: float
    m: int
    info: dict = field(default_factory=dict)

    # -- application --------------------------------------------------------------------
    def clean(self, vectors: np.ndarray, lang: str) -> np.ndarray:
        """Remove ``lang``'s language subspace from ``vectors`` (n, dim)."""
        if lang not in self.directions:
            known = ", ".join(sorted(self.directions))
            raise HmdeError(f"LAWDR statistics have no language '{lang}' (fitted on: {known}); refit with it")
        d = self.directions[lang]
        vectors = np.asarray(vectors, dtype=np.float64)
        return vectors - (vectors @ d.T) @ d if len(d) else vectors

    def _kde(self):
        from sklearn.neighbors import KernelDensity

        if getattr(self, "_kde_cache", None) is None:
            self._kde_cache = KernelDensity(kernel="tophat", bandwidth=self.bandwidth).fit(self.kde_points)
        return self._kde_cache

    def density(self, cleaned: np.ndarray) -> np.ndarray:
        projected = (cleaned - self.pca_mean) @ self.pca_components.T
        return np.exp(self._kde().score_samples(projected))

    def weights(self, cleaned: np.ndarray) -> np.ndarray:
        return self.b / (self.b + self.density(cleaned))

    def document_vectors(self, per_doc: Sequence[np.ndarray], langs: Sequence[str]) -> np.ndarray:
        """Weighted sums of cleaned sentence vectors; an empty document gives zeros."""
        dim = self.pca_mean.shape[0]
        out = np.zeros((len(per_doc), dim), dtype=np.float32)
        for i, (sents, lang) in enumerate(zip(per_doc, langs)):
            if len(sents) == 0:
                continue
            cleaned = self.clean(sents, lang)
            out[i] = (self.weights(cleaned)[:, None] * cleaned).sum(axis=0)
        return out

    # -- persistence --------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write ``path/lawdr.npz`` and ``path/lawdr.json`` as one atomic folder."""
        arrays = {"pca_mean": self.pca_mean, "pca_components": self.pca_components, "kde_points": self.kde_points}
        arrays.update({f"dir_{lang}": d for lang, d in self.directions.items()})
        meta = {"format": STATS_FORMAT, "bandwidth": self.bandwidth, "b": self.b, "m": self.m,
                "languages": sorted(self.directions), "info": self.info}
        with atomic_dir(path) as tmp:
            np.savez(tmp / "lawdr.npz", **arrays)
            (tmp / "lawdr.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> "LawdrStats":
        path = Path(path)
        meta = read_tagged_json(path / "lawdr.json", STATS_FORMAT, "LAWDR statistics")
        with np.load(path / "lawdr.npz") as data:
            directions = {lang: data[f"dir_{lang}"] for lang in meta["languages"]}
            return cls(directions, data["pca_mean"], data["pca_components"], data["kde_points"],
                       float(meta["bandwidth"]), float(meta["b"]), int(meta["m"]), meta.get("info", {}))


def language_directions(vectors: np.ndarray, m: int) -> np.ndarray:
    """Top-``m`` right singular vectors of one language's (uncentred) sentence matrix."""
    if m == 0:
        return np.zeros((0, vectors.shape[1]))
    _, _, vt = np.linalg.svd(np.asarray(vectors, dtype=np.float64), full_matrices=False)
    return vt[: min(m, vt.shape[0])]


def language_classifier_accuracy(by_lang: dict[str, np.ndarray], seed: int = 0) -> float:
    """5-fold cross-validated accuracy of a linear classifier predicting the language."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_score

    x = np.concatenate(list(by_lang.values()))
    y = np.concatenate([[i] * len(v) for i, v in enumerate(by_lang.values())])
    folds = min(5, min(len(v) for v in by_lang.values()))
    if folds < 2:
        raise HmdeError("choosing m needs at least 2 sentences per language; give --lawdr-m")
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    clf = LogisticRegression(max_iter=200, random_state=seed)
    with warnings.catch_warnings():  # a not fully converged classifier still answers "is language separable?"
        warnings.simplefilter("ignore", ConvergenceWarning)
        return float(cross_val_score(clf, x, y, cv=folds).mean())


def choose_m(by_lang: dict[str, np.ndarray], threshold: float = 0.55, max_per_language: int = 300,
             seed: int = 0) -> tuple[int, list[tuple[int, float]]]:
    """Smallest ``m`` of :data:`M_GRID` whose cleaning brings the classifier below ``threshold``."""
    rng = np.random.default_rng(seed)
    sample = {lang: v[rng.permutation(len(v))[:max_per_language]] for lang, v in by_lang.items()}
    dim = next(iter(by_lang.values())).shape[1]
    trace: list[tuple[int, float]] = []
    for m in [m for m in M_GRID if m < dim]:
        cleaned = {}
        for lang, v in sample.items():
            d = language_directions(by_lang[lang], m)
            cleaned[lang] = v - (v @ d.T) @ d if len(d) else v
        acc = language_classifier_accuracy(cleaned, seed)
        trace.append((m, acc))
        if acc < threshold:
            return m, trace
    return trace[-1][0], trace


def fit_lawdr(
    per_doc: Sequence[np.ndarray],
    langs: Sequence[str],
    m: int | None = None,
    pca_dim: int = 16,
    max_kde_points: int = 20000,
    seed: int = 0,
) -> LawdrStats:
    """Fit LAWDR's statistics on the sentence vectors of a corpus (grouped by document)."""
    from sklearn.decomposition import PCA
    from sklearn.model_selection import GridSearchCV
    from sklearn.neighbors import KernelDensity

    if any(lang is None for lang in langs):
        raise HmdeError("LAWDR needs the language of every document (its language subspace is per language)")
    by_lang: dict[str, list[np.ndarray]] = {}
    for sents, lang in zip(per_doc, langs):
        if len(sents):
            by_lang.setdefault(lang, []).append(np.asarray(sents, dtype=np.float64))
    if not by_lang:
        raise HmdeError("LAWDR found no sentences to fit on")
    stacked = {lang: np.concatenate(v) for lang, v in by_lang.items()}
    info: dict = {"sentences": {lang: int(len(v)) for lang, v in stacked.items()}}
    if m is None:
        if len(stacked) < 2:
            raise HmdeError("choosing m by language classification needs two or more languages; give m explicitly")
        m, trace = choose_m(stacked, seed=seed)
        info["m_search"] = [{"m": k, "accuracy": round(a, 4)} for k, a in trace]
    directions = {lang: language_directions(v, m) for lang, v in stacked.items()}
    cleaned = np.concatenate([v - (v @ directions[lang].T) @ directions[lang] if m else v
                              for lang, v in stacked.items()])
    rng = np.random.default_rng(seed)
    if len(cleaned) > max_kde_points:
        cleaned = cleaned[rng.permutation(len(cleaned))[:max_kde_points]]
    k = max(1, min(pca_dim, cleaned.shape[1], len(cleaned)))
    pca = PCA(n_components=k, random_state=seed).fit(cleaned)
    projected = pca.transform(cleaned)
    spread = float(np.median(np.linalg.norm(projected - projected.mean(0), axis=1))) or 1.0
    # a tophat kernel gives held-out points outside every kernel's support a log-likelihood
    # of -inf, so the grid reaches well above the typical spread (where every fold is finite)
    grid = {"bandwidth": spread * np.logspace(-1, 1, 16)}
    folds = min(5, len(projected))
    if folds >= 2:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # -inf fold scores of too-small bandwidths are expected
            search = GridSearchCV(KernelDensity(kernel="tophat"), grid, cv=folds).fit(projected)
        bandwidth = float(search.best_params_["bandwidth"])
    else:
        bandwidth = spread
    kde = KernelDensity(kernel="tophat", bandwidth=bandwidth).fit(projected)
    b = 0.5 * float(np.exp(kde.score_samples(projected)).mean())
    info.update({"pca_dim": k, "kde_points": int(len(projected))})
    stats = LawdrStats(directions, pca.mean_, pca.components_, projected, bandwidth, b, int(m), info)
    stats._kde_cache = kde
    return stats
