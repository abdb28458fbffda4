"""What one training step of HMDE works on: the run's settings, the deterministic order of pairs,
each pair's anchor side, the document groups of a micro-batch and this process's share of a step.

Why a module of its own: the trainer (:mod:`hmde.pretraining.trainer`) and the DataLoader that
prepares its steps (:mod:`hmde.pretraining.loader`) both need these pure functions; kept in the
trainer, the two modules imported each other.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import HmdeError
from ..training import distributed


@dataclass
class PretrainingConfig:
    batch_size: int = 2
    grad_accum: int = 64
    lr: float = 1e-5
    weight_decay: float = 0.0  # paper: none given; public code 1e-5
    warmup: int = 1000
    epochs: float = 1.0
    max_steps: int | None = None
    temperature: float = 0.05
    symmetric: bool = False
    negatives_across_processes: bool = False  # True: a micro-batch's candidates come from every process
    anchor_side: str = "random"  # random: each pair's anchor side drawn per step (seeded); "a": always doc_a
    hard_negatives: bool = True
    freeze_lower: bool = False
    # which lower-encoder weights a joint run updates: "all" (the paper), "no-embeddings" (token, position
    # and type embeddings frozen) or "top-N" (the last N transformer layers only); see lower_parts.py
    lower_trainable: str = "all"
    cache_chunk: int | None = None  # GradCache: one contrastive batch of batch_size*grad_accum pairs
    gradient_checkpointing: bool = True
    sparse_embedding_gradients: bool = True  # same gradients, one dense sum per step (hmde.training.sparse_embeddings)
    bf16: str = "auto"
    save_every: int = 500
    log_every: int = 10
    validation_pairs: int = 0
    # training documents: their first N sentences; None: the model's max_sentences (the paper: 32,
    # and the memory of one upper-encoder window); 0: every sentence, in windows
    max_units: int | None = None
    query_weight: float = 0.0  # not in the paper: weight of the sentence-query -> document loss (see query_loss)
    sentence_weight: float = 0.0  # not in the paper: weight of the contextualised-sentence loss (see sentence_loss)
    loader_workers: int | None = None  # DataLoader worker processes preparing steps (None: 2 on a GPU, 0 on CPUs)
    seed: int = 0
    start_model: str | None = None  # the model training started from (a resume must name the same)
    time_budget_minutes: float | None = None  # size the run to end after about this long (training/time_budget.py)
    budget_steps: int | None = None  # the step count the budget resolved to (recorded, so that --resume agrees)


class PairBatches:
    """Deterministic epochs over pair indices: a pure function of (seed, epoch)."""

    def __init__(self, n: int, pairs_per_step: int, seed: int):
        self.n, self.per_step, self.seed = n, pairs_per_step, seed
        self.steps_per_epoch = n // pairs_per_step

    def step(self, step: int) -> np.ndarray:
        epoch, i = divmod(step, self.steps_per_epoch)
        order = np.random.default_rng([self.seed, epoch]).permutation(self.n)
        return order[i * self.per_step : (i + 1) * self.per_step]


def orient(pairs: list[dict], seed: int, step: int, anchor_side: str = "random") -> list[dict]:
    """Each pair with its anchor side drawn per (seed, step): pairs are stored with
    ``lang_a < lang_b``, so always anchoring on ``doc_a`` would never let the alphabetically
    last language of a corpus be an anchor, nor the first a candidate. Drawn on the global
    batch, so every process of a multi-process run agrees."""
    if anchor_side == "a":
        return pairs
    if anchor_side != "random":
        raise HmdeError(f"unknown anchor side '{anchor_side}' (random or a)")
    flips = np.random.default_rng([seed, step, 0xA9C]).random(len(pairs)) < 0.5
    out = []
    for p, flip in zip(pairs, flips):
        if flip:
            p = {**p, "doc_a": p["doc_b"], "doc_b": p["doc_a"], "neg_a": p.get("neg_b"), "neg_b": p.get("neg_a"),
                 **({"lang_a": p["lang_b"], "lang_b": p["lang_a"]} if "lang_a" in p and "lang_b" in p else {})}
        out.append(p)
    return out


def roles(batch: list[dict], cfg: PretrainingConfig) -> list[list[str]]:
    """The document groups one micro-batch encodes: anchors, positives, and hard negatives."""
    groups = [[p["doc_a"] for p in batch], [p["doc_b"] for p in batch]]
    if cfg.hard_negatives:
        # every hard negative of the batch is a candidate for every anchor, so a pair kept
        # without one (build-pairs --no-negative keep) simply adds no candidate
        groups.append([p["neg_a"] for p in batch if p["neg_a"]])
        if cfg.symmetric:
            groups.append([p["neg_b"] for p in batch if p["neg_b"]])
    return [g for g in groups if g]


def micro_batches(global_batch: list[dict], cfg: PretrainingConfig, rank: int, world: int,
                  gather: bool) -> list[tuple[int, list[dict]]]:
    """This process's micro-batches of the step, with their index in the step.

    Per-micro-batch contrast: the step's pairs are cut into micro-batches of
    ``batch_size`` exactly as one process would, and process r takes micro-batches
    r, r + W, ... . Contrast across processes: each process takes every W-th pair."""
    if gather:
        mine = distributed.shard(global_batch, rank, world)
        return [(rank + world * i, mine[s: s + cfg.batch_size])
                for i, s in enumerate(range(0, len(mine), cfg.batch_size))]
    cuts = [global_batch[s: s + cfg.batch_size] for s in range(0, len(global_batch), cfg.batch_size)]
    return [(i, cut) for i, cut in enumerate(cuts)][rank::world]
