"""Zero-shot cross-lingual document classification (the MLDoc protocol).

Train on English only, test on each target language with no target-language data.
Two protocols:

* ``finetune`` (HMDE paper, eq. 2): a softmax head on the document vector, the whole
  model updated; AdamW lr 2e-5, 200 warm-up steps, batch 4 x 8 accumulation, up to 50
  epochs, early stopping on English dev loss with patience 7 (the paper's settings are
  the defaults of :class:`FinetuneConfig`);
* ``frozen`` (lightweight-encoder paper): a logistic-regression classifier
  (scikit-learn) on frozen document vectors.

Loaders: MLDoc's files (``label<TAB>text`` per line) and MasakhaNEWS (``category, headline,
text, url`` with a header; train = English dev+test as its README prescribes, since
English has no train split). Labels are mapped by name; target documents whose label
English lacks are dropped with a warning, never scored as silent misses.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..errors import InputError
from ..align.similarity import normalize


@dataclass
class LabelledDocuments:
    texts: list[str]
    labels: list[str]
    lang: str | None
    files: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.texts)

    def __add__(self, other: "LabelledDocuments") -> "LabelledDocuments":
        return LabelledDocuments(self.texts + other.texts, self.labels + other.labels, self.lang, self.files + other.files)

    def subset(self, idx) -> "LabelledDocuments":
        return LabelledDocuments([self.texts[i] for i in idx], [self.labels[i] for i in idx], self.lang, self.files)


def _open(path: Path):
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def read_masakhanews_split(folder: str | Path, lang: str, split: str) -> LabelledDocuments:
    folder = Path(folder) / lang
    path = next((p for p in (folder / f"{split}.tsv.gz", folder / f"{split}.tsv") if p.exists()), None)
    if path is None:
        raise InputError(f"MasakhaNEWS has no {split} split for '{lang}'", path=str(folder))
    texts, labels = [], []
    with _open(path) as f:
        reader = csv.DictReader(f, delimiter="\t")
        for rec in reader:
            line = reader.line_num
            if not rec.get("category") or rec.get("text") is None:
                raise InputError("missing category or text", str(path), line, "category")
            texts.append(" ".join(x for x in (rec.get("headline"), rec["text"]) if x))
            labels.append(rec["category"].strip())
    return LabelledDocuments(texts, labels, lang, [str(path)])


def read_masakhanews_headlines(folder: str | Path, lang: str, split: str, limit: int | None = None
                               ) -> list[tuple[str, str]]:
    """``(headline, text)`` of a MasakhaNEWS split, the first ``limit`` rows that have both (headline -> article
    search: ``benchmarks/languages.py``, a routed encoder's validation); [] where the split is missing."""
    path = next((p for p in (Path(folder) / lang / f"{split}.tsv.gz", Path(folder) / lang / f"{split}.tsv")
                 if p.exists()), None)
    if path is None:
        return []
    with _open(path) as f:
        rows = [(r.get("headline") or "", r.get("text") or "") for r in csv.DictReader(f, delimiter="\t")]
    return [(h, t) for h, t in rows if h.strip() and t.strip()][:limit]


def read_mldoc(path: str | Path, lang: str | None = None) -> LabelledDocuments:
    """MLDoc's ``label<TAB>text`` files (as produced by its scripts from RCV1/RCV2)."""
    texts, labels = [], []
    with _open(Path(path)) as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            label, sep, text = line.rstrip("\n").partition("\t")
            if not sep:
                raise InputError("expected label<TAB>text", str(path), line_no)
            texts.append(text.replace("\\n", " "))
            labels.append(label)
    return LabelledDocuments(texts, labels, lang, [str(path)])


def align_labels(train_labels: Sequence[str], target: LabelledDocuments) -> tuple[LabelledDocuments, list[str]]:
    """Drop target documents whose label the training data lacks; say so."""
    known = set(train_labels)
    keep = [i for i, lab in enumerate(target.labels) if lab in known]
    dropped = sorted(set(target.labels) - known)
    warnings = []
    if dropped:
        warnings.append(f"{target.lang}: {len(target) - len(keep)} test document(s) with label(s) absent from the "
                        f"training data were ignored: {', '.join(dropped)}")
    if not keep:
        raise InputError(f"no test document of '{target.lang}' has a label of the training data")
    return target.subset(keep), warnings


def split_dev(train: LabelledDocuments, fraction: float = 0.1, seed: int = 0) -> tuple[LabelledDocuments, LabelledDocuments]:
    """A stratified dev split for early stopping (scikit-learn)."""
    from sklearn.model_selection import train_test_split

    idx = np.arange(len(train))
    tr, dev = train_test_split(idx, test_size=fraction, random_state=seed, stratify=train.labels)
    return train.subset(sorted(tr)), train.subset(sorted(dev))


# -- frozen protocol ------------------------------------------------------------------------
def frozen_protocol(encode: Callable[[Sequence[str], str | None], np.ndarray], train: LabelledDocuments,
                    targets: Sequence[LabelledDocuments], seed: int = 0) -> dict:
    """Logistic regression on frozen (L2-normalised) document vectors."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import accuracy_score

    def vec(docs):
        return normalize(encode(docs.texts, docs.lang))

    clf = LogisticRegression(max_iter=2000, C=10.0, random_state=seed).fit(vec(train), train.labels)
    return {t.lang: {"accuracy": float(accuracy_score(t.labels, clf.predict(vec(t)))), "documents": len(t)}
            for t in targets}


# -- fine-tuning protocol --------------------------------------------------------------------
@dataclass
class FinetuneConfig:
    lr: float = 2e-5
    warmup: int = 200
    batch_size: int = 4
    accumulation: int = 8
    max_epochs: int = 50
    patience: int = 7
    weight_decay: float = 0.0
    seed: int = 0
    max_sentences: int | None = None  # optional cap for CPU runs (None: the model's own limit)


def finetune_protocol(model, train: LabelledDocuments, dev: LabelledDocuments, targets: Sequence[LabelledDocuments],
                      config: FinetuneConfig | None = None, show_progress: bool = True, log=None) -> dict:
    """Fine-tune a document encoder with a softmax head (eq. 2) on English, test zero-shot.

    ``model`` is a :class:`~hmde.methods.vectorizer.DocumentVectorizer` (HMDE, or the paper's
    fine-tuned baselines: ``first``, ``seg``, ``mean``, ``longformer``) or an HMDE. The
    state of the epoch with the lowest English dev loss is restored before testing.
    Returns accuracy per target language, the training history and the chosen epoch.
    """
    from ..methods.vectorizer import DocumentVectorizer
    from ..training.sparse_embeddings import densify, sparse_embedding_gradients

    vectorizer = model if isinstance(model, DocumentVectorizer) else DocumentVectorizer(model, "hmde")
    import copy

    import torch
    from sklearn.metrics import accuracy_score
    from tqdm.auto import tqdm
    from transformers import get_linear_schedule_with_warmup

    cfg = config or FinetuneConfig()
    torch.manual_seed(cfg.seed)
    labels = sorted(set(train.labels))
    label_id = {lab: i for i, lab in enumerate(labels)}
    lower = vectorizer.lower
    trained = vectorizer.trainable()
    modules = [m for m in (vectorizer.model, getattr(vectorizer.longformer, "model", None)) if m is not None]
    head = torch.nn.Linear(lower.dim, len(labels)).to(lower.device)
    params = trained + list(head.parameters())
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    steps_per_epoch = math.ceil(len(train) / (cfg.batch_size * cfg.accumulation))
    scheduler = get_linear_schedule_with_warmup(optimizer, cfg.warmup, steps_per_epoch * cfg.max_epochs)

    def logits_of(docs, idx):
        return head(vectorizer.document_tensor([docs.texts[i] for i in idx], [docs.lang] * len(idx),
                                               max_units=cfg.max_sentences))

    def train_mode(on: bool):
        for m in (*modules, head):
            m.train(on)

    def state():
        return [copy.deepcopy(m.state_dict()) for m in (*modules, head)]

    @torch.no_grad()
    def evaluate(docs):
        train_mode(False)
        all_logits = []
        for s in range(0, len(docs), 16):
            all_logits.append(logits_of(docs, range(s, min(s + 16, len(docs)))).float().cpu())
        logits = torch.cat(all_logits)
        gold = torch.tensor([label_id.get(lab, -100) for lab in docs.labels])
        loss = torch.nn.functional.cross_entropy(logits, gold, ignore_index=-100).item()
        return loss, [labels[i] for i in logits.argmax(1).tolist()]

    best_loss, best_state, best_epoch, bad, history = float("inf"), None, 0, 0, []
    rng = np.random.default_rng(cfg.seed)
    with sparse_embedding_gradients(modules, params):  # one dense embedding gradient per step
        for epoch in range(cfg.max_epochs):
            train_mode(True)
            order = rng.permutation(len(train))
            micro = [order[i:i + cfg.batch_size] for i in range(0, len(order), cfg.batch_size)]
            for m, idx in enumerate(tqdm(micro, desc=f"finetune epoch {epoch + 1}", disable=not show_progress)):
                gold = torch.tensor([label_id[train.labels[i]] for i in idx], device=lower.device)
                loss = torch.nn.functional.cross_entropy(logits_of(train, idx), gold) / cfg.accumulation
                loss.backward()
                if (m + 1) % cfg.accumulation == 0 or m + 1 == len(micro):
                    densify(params)
                    torch.nn.utils.clip_grad_norm_(params, 1.0)
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad(set_to_none=True)
            dev_loss, dev_pred = evaluate(dev)
            dev_acc = float(accuracy_score(dev.labels, dev_pred))
            history.append({"epoch": epoch + 1, "dev_loss": dev_loss, "dev_accuracy": dev_acc})
            if log:
                log(history[-1])
            if dev_loss < best_loss:
                best_loss, best_epoch, bad = dev_loss, epoch + 1, 0
                best_state = state()
            else:
                bad += 1
                if bad >= cfg.patience:
                    break
    if best_state is not None:
        for m, s in zip((*modules, head), best_state):
            m.load_state_dict(s)
    results = {}
    for t in targets:
        _, pred = evaluate(t)
        results[t.lang] = {"accuracy": float(accuracy_score(t.labels, pred)), "documents": len(t)}
    train_mode(False)
    return {"targets": results, "history": history, "best_dev_loss": best_loss, "best_epoch": best_epoch,
            "epochs_run": len(history), "method": vectorizer.method}


def combine_seeds(runs: Sequence[dict], seeds: Sequence[int]) -> dict:
    """One protocol's runs over several seeds: per target the mean accuracy, its standard
    deviation and every seed's; one run is returned as it is (with its seed)."""
    if len(runs) == 1:
        return {**runs[0], "seeds": list(seeds)}
    targets = {}
    for lang in runs[0]["targets"]:
        accs = [r["targets"][lang]["accuracy"] for r in runs]
        targets[lang] = {"accuracy": float(np.mean(accs)), "std": float(np.std(accs)), "per_seed": accs,
                         "documents": runs[0]["targets"][lang]["documents"]}
    out = {"targets": targets, "seeds": list(seeds)}
    if "best_epoch" in runs[0]:
        out.update(best_epoch=[r["best_epoch"] for r in runs], epochs_run=[r["epochs_run"] for r in runs])
    return out
