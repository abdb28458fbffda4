"""A sentence-level alignment stage for the lower encoder (issue 64): LaBSE's objective on the shared parallel
sentences, so that a sentence query finds its translation's document as well as its own language's.

The loss is LaBSE's bidirectional in-batch translation ranking with an additive margin (Feng et al., 2022): for a
batch of translation pairs (x_i, y_i), with cosines s_ij = cos(x_i, y_j),

    L = -1/N sum_i [ log softmax_j(scale * (s_ij - m [i = j]))_i + log softmax_j(scale * (s_ji - m [i = j]))_i ]

(:func:`translation_ranking_loss`): every other pair of the batch is a negative, in both directions, and the true pair
must win by the margin ``m``. The x side is embedded as a query (e5's ``query:`` prompt), the y side as a document
sentence (``passage:``): the two roles a cross-lingual search gives them. Pairs come from the shared data's
``parallel/`` files (Tatoeba, WMT, Multi30k), each file (language pair) sampled in proportion to its size to the
power ``alpha`` (0.3, as the document stage's Bible pairs), so that low-resource pairs count; the direction of each
pair is drawn at random. The languages held out of document training stay out.

Resumable exactly: a checkpoint (trainable weights, optimizer, scheduler, the sampler's position, random state) every
``checkpoint_every`` steps, and a rerun continues from the last. The trained lower encoder is saved with the model
(``save_pretrained``), to be measured by ``benchmarks/crosslingual_gap.py --model``.
"""

from __future__ import annotations

import gzip
import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import HmdeError

HELD_OUT = ("swh", "guj", "est", "ukr", "lav", "lvs", "eus")  # held out of document training: kept out here too


@dataclass
class SentenceStageConfig:
    sources: list = field(default_factory=lambda: ["tatoeba", "wmt", "multi30k"])
    pairs: int = 50_000  # pairs drawn for the run (without replacement within a file while it lasts)
    alpha: float = 0.3  # a file's share is proportional to its size ** alpha
    batch_size: int = 32
    steps: int = 1_000
    lr: float = 1e-5
    warmup: int = 20
    margin: float = 0.3
    scale: float = 20.0
    lower_trainable: str = "all"
    max_tokens: int = 64
    seed: int = 0
    checkpoint_every: int = 50

    def check(self) -> None:
        for name in ("pairs", "batch_size", "steps", "max_tokens", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise HmdeError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.batch_size < 2:
            raise HmdeError("batch_size must be >= 2: a pair needs another pair of the batch to rank against")
        if not 0 <= self.alpha <= 1:
            raise HmdeError(f"alpha must be in [0, 1], got {self.alpha}")


def translation_ranking_loss(a: torch.Tensor, b: torch.Tensor, margin: float = 0.3, scale: float = 20.0) -> torch.Tensor:
    """LaBSE's additive-margin softmax over the batch, both directions summed (module docstring)."""
    if len(a) != len(b) or len(a) < 2:
        raise HmdeError("translation ranking needs two equal batches of at least 2 vectors")
    sims = F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T
    logits = scale * (sims - margin * torch.eye(len(a), dtype=sims.dtype, device=sims.device))
    target = torch.arange(len(a), device=a.device)
    return F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)


def pair_files(data: Path, sources) -> list[tuple[Path, str, str]]:
    """The parallel files of ``sources`` (``parallel/<source>/<xxx>-<yyy>.tsv.gz``) without a held-out language."""
    out = []
    for source in sources:
        for path in sorted((Path(data) / "parallel" / source).glob("*.tsv.gz")):
            x, y = path.name[:-len(".tsv.gz")].split("-", 1)
            if x not in HELD_OUT and y not in HELD_OUT:
                out.append((path, x, y))
    if not out:
        raise HmdeError(f"no parallel files of {', '.join(sources)} under {Path(data) / 'parallel'}")
    return out


def sample_pairs(data: Path, config: SentenceStageConfig) -> list[tuple[str, str]]:
    """``config.pairs`` translation pairs, each file's share proportional to its size ** alpha, shuffled (seeded)."""
    files = pair_files(data, config.sources)
    rows = []
    for path, _, _ in files:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            pairs = [tuple(line.rstrip("\n").split("\t")[:2]) for line in f if "\t" in line]
        rows.append([p for p in pairs if p[0].strip() and p[1].strip()])
    sizes = np.array([len(r) for r in rows], np.float64)
    weights = sizes ** config.alpha
    quota = np.minimum(np.floor(config.pairs * weights / weights.sum()).astype(int), sizes.astype(int))
    rng = np.random.default_rng(config.seed)
    out = []
    for pairs, n in zip(rows, quota):
        picked = rng.choice(len(pairs), int(n), replace=False) if n else []
        out += [pairs[i] if rng.random() < 0.5 else pairs[i][::-1] for i in picked]
    order = rng.permutation(len(out))
    return [out[i] for i in order]


class SentenceStageTrainer:
    """Trains ``model.lower`` (a model of :func:`hmde.encoders.model_loading.load_model`) on ``pairs``."""

    def __init__(self, model, pairs: list[tuple[str, str]], config: SentenceStageConfig, output: str | Path):
        config.check()
        if len(pairs) < config.batch_size:
            raise HmdeError(f"{len(pairs)} pairs for batches of {config.batch_size}")
        self.model, self.pairs, self.config, self.output = model, pairs, config, Path(output)
        self.lower = model.lower if hasattr(model, "lower") else model
        self.module = self.lower.model  # the lower encoder's torch module: what this stage trains and checkpoints

    def batch(self, step: int) -> list[tuple[str, str]]:
        """The pairs of ``step`` (0-based): consecutive slices of the shuffled pairs, again from the start."""
        n, size = len(self.pairs), self.config.batch_size
        start = (step * size) % (n - n % size or n)
        return self.pairs[start:start + size]

    def loss(self, batch) -> torch.Tensor:
        lower, cfg = self.lower, self.config
        query = lower.token_ids([x for x, _ in batch], prompt=lower.prompt_for("query"))
        passage = lower.token_ids([y for _, y in batch], prompt=lower.prompt_for(None))
        cut = [ids[:cfg.max_tokens] for ids in query], [ids[:cfg.max_tokens] for ids in passage]
        a, b = lower.embed_ids(cut[0], normalized=True), lower.embed_ids(cut[1], normalized=True)
        return translation_ranking_loss(a, b, cfg.margin, cfg.scale)

    def train(self, resume: bool = True, log=print, stop_at_step: int | None = None):
        """Train to ``config.steps`` (from the last checkpoint where ``resume``); ``stop_at_step``: stop there, as a
        run cut off after a checkpoint would (the schedule stays the whole run's)."""
        from ..training.checkpoint import STATE_FILE, load_checkpoint, save_checkpoint
        from .lower_parts import freeze_lower_parts

        cfg = self.config
        self.output.mkdir(parents=True, exist_ok=True)
        freeze_lower_parts(self.module, cfg.lower_trainable)
        params = [p for p in self.module.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=cfg.lr)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / max(1, cfg.warmup)) *
                                                     max(0.0, 1 - s / cfg.steps))
        start = 0
        folder = self.output / "checkpoint"
        if resume and (folder / STATE_FILE).is_file():
            state = load_checkpoint(folder)  # the random states too
            if state["config"] != asdict(cfg):
                raise HmdeError(f"{folder} was written with other settings; remove it or train with those")
            missing = set(self._trainable_names()) - set(state["model"])
            if missing:
                raise HmdeError(f"{folder} lacks {len(missing)} trainable weights (e.g. {sorted(missing)[0]})")
            self.module.load_state_dict(state["model"], strict=False)
            optimizer.load_state_dict(state["optimizer"])
            schedule.load_state_dict(state["schedule"])
            start = state["step"]
        (self.output / "config.json").write_text(json.dumps(asdict(cfg), indent=1))
        self.module.train()
        started = time.perf_counter()
        for step in range(start, min(cfg.steps, stop_at_step or cfg.steps)):
            optimizer.zero_grad(set_to_none=True)
            loss = self.loss(self.batch(step))
            if not math.isfinite(loss.item()):
                raise HmdeError(f"the loss is {loss.item()} at step {step + 1}")
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            schedule.step()
            with open(self.output / "log.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps({"step": step + 1, "loss": round(loss.item(), 5),
                                    "seconds": round(time.perf_counter() - started, 1)}) + "\n")
            if (step + 1) % cfg.checkpoint_every == 0 or step + 1 == cfg.steps:
                names = self._trainable_names()
                trainable = {k: v for k, v in self.module.state_dict().items() if k in names}
                save_checkpoint(folder, {"model": trainable, "optimizer": optimizer.state_dict(),
                                         "schedule": schedule.state_dict(), "step": step + 1, "config": asdict(cfg)})
                log(f"step {step + 1}/{cfg.steps}: loss {loss.item():.4f}")
        self.module.eval()
        return self.model

    def _trainable_names(self) -> set[str]:
        return {n for n, p in self.module.named_parameters() if p.requires_grad}


def apply_checkpoint(model, folder: str | Path) -> int:
    """Load a stage checkpoint's trained weights into ``model``'s lower encoder (a run measured before its end);
    returns the step it was written at."""
    from ..training.checkpoint import load_checkpoint

    state = load_checkpoint(folder)
    lower = model.lower if hasattr(model, "lower") else model
    lower.model.load_state_dict(state["model"], strict=False)
    return int(state["step"])
