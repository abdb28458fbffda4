"""A document classifier of one's own labels: logistic regression (scikit-learn) on frozen, L2-normalised
document vectors, as the frozen XLDC protocol (:func:`hmde.evaluation.classification.frozen_protocol`)
trains it, saved as a folder that holds no pickle.

Layout of ``CLF_DIR``::

    classifier.json   format, the model (bundled name or folder) and its hash, the method, the labels,
                      C, the training count and the cross-validated accuracy
    weights.npz       ``coef`` (classes x dim, or 1 x dim for two classes) and ``intercept``, float64

Prediction is the logistic model's own arithmetic on the saved weights (softmax over ``x @ coef.T +
intercept``; two classes: the sigmoid), which equals scikit-learn's ``predict_proba``: the test pins it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import HmdeError, InputError

FORMAT = "hmde-classifier/1"
FILES = {"classifier.json", "weights.npz"}


@dataclass
class Classifier:
    labels: list[str]
    coef: np.ndarray  # (k, dim); k = 1 for two classes
    intercept: np.ndarray  # (k,)
    info: dict = field(default_factory=dict)

    @classmethod
    def fit(cls, vectors: np.ndarray, labels: Sequence[str], c: float = 10.0, seed: int = 0,
            info: dict | None = None) -> "Classifier":
        from sklearn.linear_model import LogisticRegression
        from sklearn.model_selection import cross_val_score

        from ..align.similarity import normalize

        if not (isinstance(c, (int, float)) and np.isfinite(c) and c > 0):
            raise HmdeError(f"c (the inverse regularisation strength) must be a finite number > 0, got {c!r}")
        classes = sorted(set(labels))
        if len(classes) < 2:
            raise HmdeError(f"a classifier needs at least two labels; the training documents have {classes}")
        x = normalize(np.asarray(vectors, np.float32))
        clf = LogisticRegression(max_iter=2000, C=c, random_state=seed).fit(x, list(labels))
        smallest = min(list(labels).count(k) for k in classes)
        folds = min(5, smallest)
        accuracy = float(cross_val_score(LogisticRegression(max_iter=2000, C=c, random_state=seed), x, list(labels),
                                         cv=folds).mean()) if folds >= 2 else None
        meta = {**(info or {}), "C": c, "seed": seed, "documents": len(labels), "cv_folds": folds if folds >= 2 else 0,
                "cv_accuracy": accuracy}
        return cls([str(k) for k in clf.classes_], clf.coef_.astype(np.float64), clf.intercept_.astype(np.float64),
                   meta)

    def restricted(self, probabilities: np.ndarray, allowed: Sequence[str] | None) -> np.ndarray:
        """The probabilities renormalised over the ``allowed`` labels (the others 0): a target whose label set
        is smaller than the training set's (MasakhaNEWS: each language its own) is never given a label it lacks.
        An unknown label is refused, naming the labels the classifier knows."""
        if not allowed:
            return probabilities
        unknown = [x for x in allowed if x not in self.labels]
        if unknown:
            raise HmdeError(f"--labels: the classifier has no label '{unknown[0]}' (it knows "
                            f"{', '.join(self.labels)})")
        mask = np.isin(np.asarray(self.labels, dtype=object), list(allowed))
        kept = np.where(mask, probabilities, 0.0)
        return kept / np.maximum(kept.sum(axis=1, keepdims=True), 1e-300)

    def probabilities(self, vectors: np.ndarray) -> np.ndarray:
        """(n, classes) probabilities of each label, in :attr:`labels` order."""
        from ..align.similarity import normalize

        scores = normalize(np.asarray(vectors, np.float32)).astype(np.float64) @ self.coef.T + self.intercept
        if len(self.labels) == 2:  # scikit-learn's binary model: one score, the second class's log-odds
            p = 1.0 / (1.0 + np.exp(-scores[:, 0]))
            return np.stack([1.0 - p, p], axis=1)
        scores -= scores.max(axis=1, keepdims=True)
        e = np.exp(scores)
        return e / e.sum(axis=1, keepdims=True)

    def save(self, path: str | Path, overwrite: bool = False) -> None:
        from ..ground.atomic import atomic_dir, carry_foreign_entries
        from ..ground.output_dirs import check_replaceable

        check_replaceable(path, "hmde classifier", is_classifier, overwrite)
        meta = {"format": FORMAT, "labels": self.labels, **self.info}
        with atomic_dir(path) as tmp:
            np.savez(tmp / "weights.npz", coef=self.coef, intercept=self.intercept)
            (tmp / "classifier.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            carry_foreign_entries(path, tmp, FILES)

    @classmethod
    def load(cls, path: str | Path) -> "Classifier":
        import zipfile

        from ..io.tagged_json import read_tagged_json

        path = Path(path)
        if not path.is_dir():
            raise InputError("not a classifier folder (train one with `hmde classify train`)", str(path))
        meta = read_tagged_json(path / "classifier.json", FORMAT, "classifier")
        labels = meta.get("labels")
        if not isinstance(labels, list) or len(labels) < 2 or not all(isinstance(x, str) for x in labels):
            raise InputError("must be a list of two or more labels", str(path / "classifier.json"), field="labels")
        try:
            with np.load(path / "weights.npz", allow_pickle=False) as data:
                coef, intercept = np.asarray(data["coef"], np.float64), np.asarray(data["intercept"], np.float64)
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            raise InputError(f"not readable weights ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); "
                             "train the classifier again", str(path / "weights.npz")) from None
        rows = 1 if len(labels) == 2 else len(labels)
        if coef.ndim != 2 or coef.shape[0] != rows or intercept.shape != (rows,):
            raise InputError(f"weights of shape {coef.shape} / {intercept.shape} do not fit {len(labels)} labels",
                             str(path / "weights.npz"))
        return cls(labels, coef, intercept, {k: v for k, v in meta.items() if k not in ("format", "labels")})


def is_classifier(path: Path) -> bool:
    return (Path(path) / "classifier.json").is_file()


def document_vectors(vectorizer, texts: Sequence, langs: Sequence, progress: bool = True,
                     desc: str = "documents") -> np.ndarray:
    """The documents' vectors, ``vectorizer.options.batch_size`` at a time, with a progress bar over the
    documents (issue 57: 1,420 news documents took 42 silent minutes)."""
    from tqdm.auto import tqdm

    step = max(1, vectorizer.options.batch_size)
    parts = []
    with tqdm(total=len(texts), desc=desc, unit="doc", disable=not progress) as bar:
        for start in range(0, len(texts), step):
            parts.append(np.asarray(vectorizer.encode(list(texts[start:start + step]), list(langs[start:start + step])),
                                    np.float32))
            bar.update(len(parts[-1]))
    return np.concatenate(parts) if parts else np.zeros((0, vectorizer.lower.dim), np.float32)
