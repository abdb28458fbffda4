"""LAWDR: unsupervised document vectors from sentence vectors (Gong et al. 2021).

Three statistics are fitted once on a corpus and then applied unchanged to every
document encoded later, so that documents encoded on different days stay comparable:

1. per language, the top-``m`` right singular vectors of that language's sentence
   matrix (the "language subspace"); their projection is removed from every vector.
   ``m`` is given, or chosen as the smallest value on a grid that brings a linear
   language classifier below 55% accuracy: the paper's linear SVM on an 8:2 split
   (``m_selection="svm"``, default) or a 5-fold cross-validated logistic regression
   (``"logreg-cv"``, earlier hmde);
2. per language (the paper; ``kde="pooled"`` fits one on all languages), a
   16-dimensional PCA of the cleaned vectors and a tophat kernel density on it,
   bandwidth by 5-fold cross-validated likelihood (scikit-learn ``GridSearchCV``);
3. per density, ``b`` = half the mean density of its fitting sentences.

A document is the sum of its cleaned sentence vectors weighted by ``b / (b + P(s))``:
sentences of dense, generic regions (boilerplate, "Thank you.") count less.

Choices where the paper is silent (documented in docs/model.md): the SVD is of the
uncentred matrix (its first direction is then the language's mean direction, the
largest language signal); each KDE is fitted on at most ``max_kde_points`` sentences and
its bandwidth chosen on at most ``max_bandwidth_points`` of them (the cross-validated
search is quadratic in the points: 30,000 took over ten minutes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ..ground.atomic import atomic_dir, carry_foreign_entries
from ..errors import HmdeError, InputError
from ..io.tagged_json import read_tagged_json

STATS_FORMAT = "hmde-lawdr/2"
OLD_FORMATS = ("hmde-lawdr/1",)  # one pooled density, stored flat
M_GRID = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
M_SELECTIONS = ("svm", "logreg-cv")
KDE_MODES = ("per-language", "pooled")
POOLED = "*"  # the key of the density fitted on all languages
STATS_FILES = {"lawdr.npz", "lawdr.json"}  # what save writes; anything else in the folder is the user's


def is_lawdr_stats(path: Path) -> bool:
    return (Path(path) / "lawdr.json").is_file()


def check_stats_output(path: str | Path) -> None:
    """``path`` may receive LAWDR statistics: absent, an empty folder, or statistics already (refitted);
    never a file (an input given as ``--lawdr-stats``) or a folder of the user's."""
    from ..ground.output_dirs import check_replaceable

    if Path(path).exists() and not Path(path).is_dir():
        raise HmdeError(f"{path}: --lawdr-stats names a folder for LAWDR statistics; this is a file")
    check_replaceable(path, "hmde LAWDR statistics folder (lawdr.json)", is_lawdr_stats, overwrite=True)


@dataclass
class Density:
    """A PCA projection and a tophat KDE on it, with LAWDR's ``b`` for that density."""

    pca_mean: np.ndarray
    pca_components: np.ndarray  # (k, dim)
    kde_points: np.ndarray  # (n, k) the KDE's fitting points
    bandwidth: float
    b: float

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


@dataclass
class LawdrStats:
    """Everything LAWDR fitted; ``save``/``load`` round-trip it exactly."""

    directions: dict[str, np.ndarray]  # lang -> (m, dim), orthonormal rows
    densities: dict[str, Density]  # lang -> its density, or POOLED -> one for all
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

    def density_of(self, lang: str) -> Density:
        return self.densities[lang] if lang in self.densities else self.densities[POOLED]

    def weights(self, cleaned: np.ndarray, lang: str) -> np.ndarray:
        return self.density_of(lang).weights(cleaned)

    def document_vectors(self, per_doc: Sequence[np.ndarray], langs: Sequence[str]) -> np.ndarray:
        """Weighted sums of cleaned sentence vectors; an empty document gives zeros."""
        dim = next(iter(self.densities.values())).pca_mean.shape[0]
        out = np.zeros((len(per_doc), dim), dtype=np.float32)
        for i, (sents, lang) in enumerate(zip(per_doc, langs)):
            if len(sents) == 0:
                continue
            cleaned = self.clean(sents, lang)
            out[i] = (self.weights(cleaned, lang)[:, None] * cleaned).sum(axis=0)
        return out

    # -- persistence --------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write ``path/lawdr.npz`` and ``path/lawdr.json`` as one atomic folder."""
        arrays = {f"dir_{lang}": d for lang, d in self.directions.items()}
        for key, d in self.densities.items():
            arrays.update({f"pca_mean_{key}": d.pca_mean, f"pca_components_{key}": d.pca_components,
                           f"kde_points_{key}": d.kde_points})
        meta = {"format": STATS_FORMAT, "m": self.m, "languages": sorted(self.directions),
                "densities": {key: {"bandwidth": d.bandwidth, "b": d.b} for key, d in self.densities.items()},
                "info": self.info}
        check_stats_output(path)  # a folder of the user's is never replaced (the swap would delete it)
        with atomic_dir(path) as tmp:
            np.savez(tmp / "lawdr.npz", **arrays)
            (tmp / "lawdr.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
            carry_foreign_entries(path, tmp, STATS_FILES)

    @classmethod
    def load(cls, path: str | Path) -> "LawdrStats":
        """Read statistics saved by :meth:`save`; a damaged or inconsistent folder is one line naming the
        file and field (never unpickled: object arrays are refused)."""
        import zipfile

        path = Path(path)
        meta = read_tagged_json(path / "lawdr.json", (STATS_FORMAT, *OLD_FORMATS), "LAWDR statistics")
        json_path, npz = str(path / "lawdr.json"), path / "lawdr.npz"
        if not npz.is_file():
            raise InputError("missing: the statistics' arrays are not there (refit with --method lawdr)", str(npz))

        def number(value, field_name):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
                raise InputError(f"must be a finite number, got {value!r}", json_path, field=field_name)
            return float(value)

        languages, densities_meta = meta.get("languages"), meta.get("densities", {})
        if not isinstance(languages, list) or not all(isinstance(x, str) for x in languages):
            raise InputError("must be a list of language codes", json_path, field="languages")
        if meta["format"] not in OLD_FORMATS and (not isinstance(densities_meta, dict) or not densities_meta
                                                  or not all(isinstance(v, dict) for v in densities_meta.values())):
            raise InputError("must map each density to its bandwidth and b", json_path, field="densities")
        try:
            with np.load(npz, allow_pickle=False) as data:
                def array(key):
                    if key not in data.files:
                        raise InputError(f"lawdr.json needs the array '{key}', which lawdr.npz lacks; refit", str(npz))
                    value = data[key]
                    if not np.issubdtype(value.dtype, np.number):
                        raise InputError(f"array '{key}' is not numeric ({value.dtype}); refit", str(npz))
                    return value

                directions = {lang: array(f"dir_{lang}") for lang in languages}
                if meta["format"] in OLD_FORMATS:
                    densities = {POOLED: Density(array("pca_mean"), array("pca_components"), array("kde_points"),
                                                 number(meta.get("bandwidth"), "bandwidth"), number(meta.get("b"), "b"))}
                else:
                    densities = {key: Density(array(f"pca_mean_{key}"), array(f"pca_components_{key}"),
                                              array(f"kde_points_{key}"),
                                              number(v.get("bandwidth"), f"densities.{key}.bandwidth"),
                                              number(v.get("b"), f"densities.{key}.b"))
                                 for key, v in densities_meta.items()}
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:  # truncated, not a zip, pickled objects
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(f"not readable LAWDR arrays ({first}); refit with --method lawdr", str(npz)) from None
        return cls(directions, densities, int(number(meta.get("m"), "m")), meta.get("info", {}))


def language_directions(vectors: np.ndarray, m: int) -> np.ndarray:
    """Top-``m`` right singular vectors of one language's (uncentred) sentence matrix."""
    if m == 0:
        return np.zeros((0, vectors.shape[1]))
    _, _, vt = np.linalg.svd(np.asarray(vectors, dtype=np.float64), full_matrices=False)
    return vt[: min(m, vt.shape[0])]


def language_classifier_accuracy(by_lang: dict[str, np.ndarray], seed: int = 0, method: str = "svm") -> float:
    """Accuracy of a linear classifier predicting the language: the paper's linear SVM trained on
    80% and scored on 20% (``svm``), or a 5-fold cross-validated logistic regression (``logreg-cv``)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    x = np.concatenate(list(by_lang.values()))
    y = np.concatenate([[i] * len(v) for i, v in enumerate(by_lang.values())])
    smallest = min(len(v) for v in by_lang.values())
    if method == "svm":
        from sklearn.model_selection import train_test_split
        from sklearn.svm import LinearSVC

        if smallest < 5:
            raise HmdeError("choosing m needs at least 5 sentences per language (8:2 split); give --lawdr-m")
        x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)
        with warnings.catch_warnings():  # a not fully converged classifier still answers "is language separable?"
            warnings.simplefilter("ignore", ConvergenceWarning)
            return float(LinearSVC(random_state=seed).fit(x_train, y_train).score(x_test, y_test))
    if method != "logreg-cv":
        raise HmdeError(f"unknown m selection '{method}' ({', '.join(M_SELECTIONS)})")
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_score

    folds = min(5, smallest)
    if folds < 2:
        raise HmdeError("choosing m needs at least 2 sentences per language; give --lawdr-m")
    clf = LogisticRegression(max_iter=200, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return float(cross_val_score(clf, x, y, cv=folds).mean())


def choose_m(by_lang: dict[str, np.ndarray], threshold: float = 0.55, max_per_language: int = 300,
             seed: int = 0, method: str = "svm") -> tuple[int, list[tuple[int, float]]]:
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
        acc = language_classifier_accuracy(cleaned, seed, method)
        trace.append((m, acc))
        if acc < threshold:
            return m, trace
    return trace[-1][0], trace


def fit_density(cleaned: np.ndarray, pca_dim: int, max_kde_points: int, max_bandwidth_points: int,
                seed: int) -> Density:
    """PCA to ``pca_dim`` dimensions, a tophat KDE with a cross-validated bandwidth, and b."""
    import warnings

    from sklearn.decomposition import PCA
    from sklearn.model_selection import GridSearchCV
    from sklearn.neighbors import KernelDensity

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
    search_on = projected[rng.permutation(len(projected))[:max_bandwidth_points]]
    folds = min(5, len(search_on))
    if folds >= 2:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # -inf fold scores of too-small bandwidths are expected
            search = GridSearchCV(KernelDensity(kernel="tophat"), grid, cv=folds).fit(search_on)
        bandwidth = float(search.best_params_["bandwidth"])
    else:
        bandwidth = spread
    kde = KernelDensity(kernel="tophat", bandwidth=bandwidth).fit(projected)
    b = 0.5 * float(np.exp(kde.score_samples(projected)).mean())
    density = Density(pca.mean_, pca.components_, projected, bandwidth, b)
    density._kde_cache = kde
    return density


def fit_lawdr(
    per_doc: Sequence[np.ndarray],
    langs: Sequence[str],
    m: int | None = None,
    pca_dim: int = 16,
    max_kde_points: int = 20000,
    seed: int = 0,
    m_selection: str = "svm",
    kde: str = "per-language",
    max_bandwidth_points: int = 2000,
) -> LawdrStats:
    """Fit LAWDR's statistics on the sentence vectors of a corpus (grouped by document)."""
    if any(lang is None for lang in langs):
        raise HmdeError("LAWDR needs the language of every document (its language subspace is per language)")
    if kde not in KDE_MODES:
        raise HmdeError(f"unknown KDE mode '{kde}' ({', '.join(KDE_MODES)})")
    by_lang: dict[str, list[np.ndarray]] = {}
    for sents, lang in zip(per_doc, langs):
        if len(sents):
            by_lang.setdefault(lang, []).append(np.asarray(sents, dtype=np.float64))
    if not by_lang:
        raise HmdeError("LAWDR found no sentences to fit on")
    stacked = {lang: np.concatenate(v) for lang, v in by_lang.items()}
    info: dict = {"sentences": {lang: int(len(v)) for lang, v in stacked.items()}, "kde": kde}
    if m is None:
        if len(stacked) < 2:
            raise HmdeError("choosing m by language classification needs two or more languages; give m explicitly")
        m, trace = choose_m(stacked, seed=seed, method=m_selection)
        info["m_search"] = [{"m": k, "accuracy": round(a, 4)} for k, a in trace]
        info["m_selection"] = m_selection
    directions = {lang: language_directions(v, m) for lang, v in stacked.items()}
    cleaned = {lang: v - (v @ directions[lang].T) @ directions[lang] if m else v for lang, v in stacked.items()}
    if kde == "pooled":
        densities = {POOLED: fit_density(np.concatenate(list(cleaned.values())), pca_dim, max_kde_points,
                                         max_bandwidth_points, seed)}
    else:
        densities = {lang: fit_density(v, pca_dim, max_kde_points, max_bandwidth_points, seed)
                     for lang, v in cleaned.items()}
    info.update({"pca_dim": int(next(iter(densities.values())).pca_components.shape[0]),
                 "kde_points": {key: int(len(d.kde_points)) for key, d in densities.items()}})
    return LawdrStats(directions, densities, int(m), info)
