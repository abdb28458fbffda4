"""Training steps assembled ahead of time by DataLoader workers.

Why: with every document's units and token ids prepared once (:mod:`hmde.pretraining.prepared`),
what is left of a step's CPU work is choosing its pairs, orienting them, and turning each
role's sentences into padded, length-bucketed token batches
(:func:`hmde.encoders.sentence_encoder.plan_batches`). Worker processes do that for the next steps
while the accelerator runs this one, and hand the batches over in pinned memory. A step's
content is a pure function of (seed, step), so workers, resumes and process counts change
nothing in what is trained (tested bit for bit).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..encoders.sentence_encoder import BatchPlan, Padding, plan_batches


@dataclass
class StepInput:
    step: int
    batch: list[dict]  # the step's global batch, oriented
    plans: dict[tuple[int, int], BatchPlan]  # (micro-batch index, role) -> lower-encoder batches of this process

    def pin_memory(self) -> "StepInput":  # DataLoader(pin_memory=True) calls this
        return StepInput(self.step, self.batch, {k: v.pin_memory() for k, v in self.plans.items()})


class StepDataset(torch.utils.data.Dataset):
    """Item i: step ``start + i`` of the run. Holds pairs, settings and token ids, not the model."""

    def __init__(self, trainer, batches, start: int, total: int, rank: int, world: int, plan: bool,
                 padding: Padding, token_budget: int):
        self.pairs, self.config, self.batches = trainer.pairs, trainer.config, batches
        self.start, self.total, self.rank, self.world = start, total, rank, world
        self.plan, self.padding, self.token_budget = plan, padding, token_budget
        self.ids = trainer.prepared.ids if trainer.prepared is not None else None
        self.gather = trainer.gather

    def __len__(self) -> int:
        return max(0, self.total - self.start)

    def __getitem__(self, i: int) -> StepInput:
        from .steps import micro_batches, orient, roles

        step = self.start + i
        cfg = self.config
        batch = orient([self.pairs[j] for j in self.batches.step(step)], cfg.seed, step, cfg.anchor_side)
        plans = {}
        if self.plan and self.ids is not None:
            for index, pairs in micro_batches(batch, cfg, self.rank, self.world, self.gather):
                for role, group in enumerate(roles(pairs, cfg)):
                    flat = [ids for doc in group for ids in self.ids[doc]]
                    plans[(index, role)] = plan_batches(flat, self.token_budget, self.padding)
        return StepInput(step, batch, plans)


def step_loader(dataset: StepDataset, workers: int, pin_memory: bool):
    """Steps in order; ``workers`` processes prepare the next ones (0: in this process)."""
    return torch.utils.data.DataLoader(dataset, batch_size=None, shuffle=False, num_workers=workers,
                                       pin_memory=pin_memory, prefetch_factor=2 if workers else None,
                                       persistent_workers=False)
