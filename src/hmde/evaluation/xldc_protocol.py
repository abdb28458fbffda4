"""Zero-shot cross-lingual document classification run end to end (the MLDoc protocol, and
MasakhaNEWS): train on English, test on every target; frozen (a logistic regression on the
document vectors) and fine-tuned (a softmax head, the whole method updated), over several seeds.
``hmde eval xldc`` parses its flags into these calls."""

from __future__ import annotations

from typing import Callable, Sequence

from ..errors import HmdeError
from . import classification as cls


def masakhanews_data(folder: str, targets: Sequence[str]):
    """(train, dev, targets): train is English dev+test (MasakhaNEWS has no English train split here)."""
    train = cls.read_masakhanews_split(folder, "eng", "dev") + cls.read_masakhanews_split(folder, "eng", "test")
    return train, None, [cls.read_masakhanews_split(folder, t, "test") for t in targets if t]


def checked_targets(train, targets, warn: Callable[[str], None]) -> list:
    """Targets restricted to the training labels, each dropped document said."""
    checked = []
    for t in targets:
        t2, warnings = cls.align_labels(train.labels, t)
        for w in warnings:
            warn(w)
        checked.append(t2)
    return checked


def protocols_for(requested: str, document_method, warn: Callable[[str], None]) -> list[str]:
    """The protocols to run: ``both`` is frozen then fine-tuned; a method whose statistics are fitted,
    not trained (LAWDR), runs frozen only, and refuses a fine-tune-only request."""
    protocols = ["frozen", "finetune"] if requested == "both" else [requested]
    if "finetune" in protocols and not document_method.fine_tunable:
        name = document_method.name
        if protocols == ["finetune"]:
            raise HmdeError(f"LAWDR's statistics are fitted, not trained: --method {name} needs --protocol frozen")
        warn(f"LAWDR's statistics are fitted, not trained: --method {name} is evaluated with the frozen protocol only")
        protocols = ["frozen"]
    return protocols


def run_seeds(encoder_for_seed: Callable[[int], object], train, dev, targets: list, protocols: Sequence[str],
              seeds: Sequence[int], finetune: dict, show_progress: bool = True,
              log: Callable[[dict], None] = print) -> dict:
    """Each protocol over ``seeds``, combined (mean and standard deviation). ``encoder_for_seed``: the
    evaluation encoder of a seed, loaded from the saved model (fine-tuning changes the loaded one).
    ``finetune``: :class:`~hmde.evaluation.classification.FinetuneConfig` fields besides the seed."""
    runs: dict[str, list[dict]] = {p: [] for p in protocols}
    for seed in seeds:
        enc = encoder_for_seed(seed)
        if "frozen" in protocols:
            enc.prepare([(train.texts, train.lang)] + [(t.texts, t.lang) for t in targets])
            runs["frozen"].append({"targets": cls.frozen_protocol(enc.documents, train, targets, seed)})
        if "finetune" in protocols:
            tr, dv = (train, dev) if dev else cls.split_dev(train, 0.1, seed)
            config = cls.FinetuneConfig(**finetune, seed=seed)
            runs["finetune"].append(cls.finetune_protocol(enc.vectorizer, tr, dv, targets, config,
                                                          show_progress=show_progress, log=log))
    return {p: cls.combine_seeds(r, list(seeds)) for p, r in runs.items()}
