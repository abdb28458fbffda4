"""Training loop of the lightweight sentence encoder, readable top to bottom.

Every random choice of a step (batch order of its epoch, the masked side and token,
dropout) derives from (seed, step), so ``--resume`` from a checkpoint continues
exactly where an uninterrupted run would be.

Under torchrun (or ``accelerate launch --multi_gpu``) each of W processes takes a
contiguous share of every batch; the masked side and tokens are still drawn for the
whole batch, the alignment and similarity losses see every process's vectors (gathered,
differentiable), and gradients are averaged: a step equals one process holding the
whole batch, dropout masks aside (each process draws its own). A language pair's last
batch is dropped when it holds fewer pairs than there are processes.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from tqdm.auto import tqdm

from ..errors import HmdeError
from ..encoders.precision import autocast_context
from ..training import distributed
from ..training.checkpoint import JsonlLog, load_checkpoint, resolve_bf16, save_checkpoint, seed_step
from ..training.time_budget import BudgetProbe, fit_steps_to_budget  # noqa: F401 (public here too)
from .losses import alignment_loss, similarity_loss, ugt_loss, ugt_targets
from .model import LightweightConfig, LightweightEncoder
from .parallel_data import ParallelCorpus

CHECKPOINT_DIR = "checkpoint"


@dataclass
class LightweightTrainingConfig:
    """Training settings (paper: Adam lr 1e-3 with warm-up, batch 128, weights 1:2:2)."""

    model: LightweightConfig = field(default_factory=LightweightConfig)
    batch_size: int = 128
    lr: float = 1e-3
    warmup: int = 1000
    epochs: float = 1.0
    max_steps: int | None = None
    save_every: int = 1000
    log_every: int = 10
    seed: int = 0
    batching: str = "pair"  # "pair": one language pair per batch; "mix": any pairs together
    ugt_weight: float = 1.0
    ugt_reduction: str = "mean"  # the paper sums the two KL terms ("sum"); "mean": earlier hmde
    warmup_epochs: float | None = None  # set: warm-up of this many epochs instead of `warmup` steps (paper: 3 of 12)
    align_weight: float = 2.0
    sim_weight: float = 2.0
    align_cosine: bool = False
    temperature: float = 0.05
    bf16: str = "auto"  # auto | on | off
    grad_clip: float = 1.0
    tokenizer_sentences_per_language: int = 30000
    train_max_length: int = 64  # training sentences are truncated to this many tokens (speed)
    time_budget_minutes: float | None = None  # size the run to end after about this long (see fit_steps_to_budget)
    budget_steps: int | None = None  # the step count the budget resolved to (kept so --resume agrees)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "LightweightTrainingConfig":
        data = dict(data)
        data["model"] = LightweightConfig(**data["model"])
        return cls(**data)


BUDGET_WARMUP_STEPS = 50  # first steps are slow (allocator, kernel autotuning): not timed
BUDGET_PROBE_STEPS = 100


def epoch_batches(corpus_pair_of: np.ndarray, batch_size: int, batching: str, seed: int, epoch: int,
                  min_size: int = 2) -> list[np.ndarray]:
    """The batches of one epoch, a pure function of (seed, epoch).

    Batches smaller than ``min_size`` (2: an in-batch loss needs a negative; under W
    processes max(2, W), so that no process gets an empty share) are dropped.
    """
    rng = np.random.default_rng([seed, epoch])
    if batching == "mix":
        order = rng.permutation(len(corpus_pair_of))
        return [order[i : i + batch_size] for i in range(0, len(order), batch_size)
                if len(order[i:i + batch_size]) >= min_size]
    if batching != "pair":
        raise HmdeError(f"unknown batching '{batching}' (pair or mix)")
    batches = []
    for pair in np.unique(corpus_pair_of):
        members = rng.permutation(np.flatnonzero(corpus_pair_of == pair))
        batches.extend(members[i : i + batch_size] for i in range(0, len(members), batch_size)
                       if len(members[i:i + batch_size]) >= min_size)
    return [batches[i] for i in rng.permutation(len(batches))]


class LightweightTrainer:
    def __init__(self, corpus: ParallelCorpus, config: LightweightTrainingConfig, output: str | Path,
                 tokenizer=None, device: str = "cpu", evaluate: Callable | None = None, eval_every: int = 0,
                 show_progress: bool = True):
        self.corpus, self.config, self.output = corpus, config, Path(output)
        self.device = torch.device(device)
        self.tokenizer = tokenizer
        self.evaluate, self.eval_every, self.show_progress = evaluate, eval_every, show_progress

    # -- data ---------------------------------------------------------------------------
    def _tokenize(self) -> None:
        tok, max_len = self.tokenizer, min(self.config.train_max_length, self.config.model.max_length)
        encode = lambda texts: [np.asarray(x, dtype=np.int32) for x in  # noqa: E731
                                tok(texts, truncation=True, max_length=max_len, add_special_tokens=True)["input_ids"]]
        self.src_ids = encode(self.corpus.src)
        self.tgt_ids = encode(self.corpus.tgt)
        self.pair_of = np.asarray(self.corpus.pair_of)
        self.special = torch.tensor(sorted(set(tok.all_special_ids)))

    def _collate(self, ids: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        length = max(len(x) for x in ids)
        out = torch.full((len(ids), length), self.tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros(len(ids), length, dtype=torch.long)
        for i, x in enumerate(ids):
            out[i, : len(x)] = torch.from_numpy(x.astype(np.int64))
            mask[i, : len(x)] = 1
        return out.to(self.device), mask.to(self.device)

    # -- one step -----------------------------------------------------------------------
    def losses(self, model: LightweightEncoder, batch: np.ndarray, step: int) -> dict[str, torch.Tensor]:
        """This process's losses for the (global) ``batch`` of ``step``.

        With W processes the returned losses sum, over processes, to W times the whole
        batch's losses (see :mod:`hmde.training.distributed`); alone, they are the whole
        batch's losses.
        """
        cfg = self.config
        rank, world = distributed.rank_and_world()
        gen = torch.Generator().manual_seed(cfg.seed * 7919 + step)
        a_ids, a_mask = self._collate([self.src_ids[i] for i in batch])
        b_ids, b_mask = self._collate([self.tgt_ids[i] for i in batch])
        if torch.randint(2, (1,), generator=gen).item():  # which side carries the masked token
            a_ids, a_mask, b_ids, b_mask = b_ids, b_mask, a_ids, a_mask
        special = self.special.to(self.device)
        a_keep = a_mask.bool() & ~torch.isin(a_ids, special)
        b_keep = b_mask.bool() & ~torch.isin(b_ids, special)
        position = torch.multinomial(a_keep.float().cpu() + 1e-9, 1, generator=gen).to(self.device)
        masked_token = a_ids.gather(1, position).squeeze(1)
        a_masked = a_ids.scatter(1, position, self.tokenizer.mask_token_id)
        share = 1.0
        if world > 1:  # this process's contiguous rows, padding trimmed to their longest
            rows = np.array_split(np.arange(len(batch)), world)[rank]
            lo, hi = int(rows[0]), int(rows[-1]) + 1
            a_len, b_len = int(a_mask[lo:hi].sum(1).max()), int(b_mask[lo:hi].sum(1).max())
            a_ids, a_masked, a_mask, a_keep = (t[lo:hi, :a_len] for t in (a_ids, a_masked, a_mask, a_keep))
            b_ids, b_mask, b_keep = (t[lo:hi, :b_len] for t in (b_ids, b_mask, b_keep))
            masked_token = masked_token[lo:hi]
            share = world * (hi - lo) / len(batch)
        u = model.pool(a_masked, a_mask)
        v = model.pool(b_ids, b_mask)
        out = {}
        if cfg.ugt_weight:  # a per-pair loss: this process's pairs, weighted by its share of the batch
            t_masked, t_other = ugt_targets(masked_token, a_ids, a_keep, b_ids, b_keep, model.config.vocab_size)
            out["ugt"] = share * ugt_loss(model.head(u), model.head(v), t_masked, t_other,
                                                 cfg.ugt_reduction)
        if cfg.align_weight or cfg.sim_weight:  # in-batch losses: over every process's vectors
            u_all, v_all = distributed.gather_all(u), distributed.gather_all(v)
        if cfg.align_weight:
            out["align"] = alignment_loss(u_all, v_all, cosine=cfg.align_cosine, temperature=cfg.temperature)
        if cfg.sim_weight:
            out["sim"] = similarity_loss(u_all, v_all)
        weights = {"ugt": cfg.ugt_weight, "align": cfg.align_weight, "sim": cfg.sim_weight}
        out["loss"] = sum(weights[k] * out[k] for k in list(out))
        return out

    def warmup_steps(self, steps_per_epoch: int) -> int:
        cfg = self.config
        if cfg.warmup_epochs is not None:
            return int(round(cfg.warmup_epochs * steps_per_epoch))
        return cfg.warmup

    # -- the loop -----------------------------------------------------------------------
    def train(self, resume: bool = False, stop_at_step: int | None = None) -> LightweightEncoder:
        """Train (or continue); ``stop_at_step`` ends early after that step's checkpoint, as a kill would."""
        from transformers import AutoTokenizer, get_linear_schedule_with_warmup

        cfg, ckpt_dir = self.config, self.output / CHECKPOINT_DIR
        rank, world = distributed.setup()
        main = distributed.is_main()
        state = None
        if resume:
            state = load_checkpoint(ckpt_dir)
            cfg = self.config = LightweightTrainingConfig.from_dict(state["config"])
            self.tokenizer = AutoTokenizer.from_pretrained(str(ckpt_dir / "tokenizer"))
        elif self.tokenizer is None and main:  # other processes load process 0's below
            raise HmdeError("a tokenizer is needed to start training")
        else:  # process 0's vocabulary is everyone's
            if main:
                self.tokenizer.save_pretrained(str(ckpt_dir / "tokenizer"))
            distributed.barrier()
            if not main:
                self.tokenizer = AutoTokenizer.from_pretrained(str(ckpt_dir / "tokenizer"))
        cfg.model.vocab_size = len(self.tokenizer)
        self._tokenize()
        min_size = max(2, world)
        batches_of = lambda epoch: epoch_batches(self.pair_of, cfg.batch_size, cfg.batching, cfg.seed, epoch,  # noqa: E731
                                                 min_size)
        steps_per_epoch = len(batches_of(0))
        if steps_per_epoch == 0:
            raise HmdeError(f"not enough sentence pairs for one batch of at least {min_size}")
        total = cfg.max_steps or max(1, math.ceil(cfg.epochs * steps_per_epoch))
        if cfg.budget_steps:
            total = min(total, cfg.budget_steps)
        torch.manual_seed(cfg.seed)
        model = LightweightEncoder(cfg.model, pad_token_id=self.tokenizer.pad_token_id).to(self.device)
        optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
        scheduler = get_linear_schedule_with_warmup(optimizer, min(self.warmup_steps(steps_per_epoch), total), total)
        step = 0
        if state is not None:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            step = state["step"]
        use_bf16 = resolve_bf16(cfg.bf16, self.device)
        log = JsonlLog(self.output / "train_log.jsonl") if main else None
        if state is None and main:
            (self.output / "training_config.json").write_text(json.dumps(cfg.to_dict(), indent=2) + "\n")
            log.write(event="start", pairs=len(self.corpus), language_pairs=self.corpus.counts(),
                      steps=total, steps_per_epoch=steps_per_epoch, bf16=use_bf16, processes=world)
        bar = tqdm(total=total, initial=step, desc="train-sentence-encoder", unit="step",
                   disable=not (self.show_progress and main))
        epoch, batches = -1, []
        model.train()
        t0, pairs_seen = time.time(), 0
        budget = BudgetProbe(cfg.time_budget_minutes, step, t0, BUDGET_WARMUP_STEPS, BUDGET_PROBE_STEPS) \
            if cfg.time_budget_minutes and not cfg.budget_steps else None
        while step < total:
            if step // steps_per_epoch != epoch:
                epoch = step // steps_per_epoch
                batches = batches_of(epoch)
            batch = batches[step % steps_per_epoch]
            seed_step(cfg.seed + rank, step)
            with autocast_context(self.device.type, torch.bfloat16 if use_bf16 else None):
                losses = self.losses(model, batch, step)
            optimizer.zero_grad(set_to_none=True)
            losses["loss"].backward()
            distributed.average_gradients(model.parameters())
            if cfg.grad_clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            optimizer.step()
            scheduler.step()
            step += 1
            pairs_seen += len(batch)
            bar.update(1)
            if step % cfg.log_every == 0 or step == total:
                record = {k: round(float(distributed.mean_over_processes(v.detach().float())), 5)
                          for k, v in losses.items()}
                if main:
                    rate = pairs_seen / max(time.time() - t0, 1e-9)
                    log.write(step=step, lr=scheduler.get_last_lr()[0], pairs_per_s=round(rate, 1), epoch=epoch,
                              **record)
                    bar.set_postfix(loss=f"{record['loss']:.3f}", pairs_s=f"{rate:.0f}")
            fitted = budget.fitted_total(step, total) if budget is not None else None
            if fitted is not None:
                total = cfg.budget_steps = distributed.min_over_processes(fitted)  # every process stops together
                scheduler = get_linear_schedule_with_warmup(optimizer, min(self.warmup_steps(steps_per_epoch), total), total,
                                                            last_epoch=step - 1)
                bar.total = total
                if main:
                    log.write(event="time_budget", minutes=cfg.time_budget_minutes, steps=total,
                              epochs=round(total / steps_per_epoch, 3))
            if main and self.evaluate and self.eval_every and step % self.eval_every == 0:
                self._run_eval(model, log, step)
            if main and ((cfg.save_every and step % cfg.save_every == 0) or step == total):
                save_checkpoint(ckpt_dir, {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                           "scheduler": scheduler.state_dict(), "step": step, "config": cfg.to_dict()})
            if stop_at_step is not None and step >= stop_at_step:
                bar.close()
                return model
        bar.close()
        model.eval()
        if main:
            model.save_sentence_transformer(self.tokenizer, self.output)
            if self.evaluate:
                self._run_eval(model, log, step, final=True)
        distributed.barrier()  # the saved model exists before any process returns
        return model

    def _run_eval(self, model, log, step, final=False):
        was = model.training
        model.eval()
        result = self.evaluate(model, self.tokenizer)
        model.train(was)
        log.write(event="eval", step=step, final=final, **result)
        if final:
            (self.output / "eval_results.json").write_text(json.dumps(result, indent=2) + "\n")
