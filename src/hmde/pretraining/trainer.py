"""``hmde train``: contrastive pretraining of HMDE on (page, translation, hard negative) triples.

Paper defaults: AdamW lr 1e-5, linear schedule with 1,000 warm-up steps, 2 pairs per
micro-batch x 64 accumulation, 1 epoch, temperature 0.05 (public code). With
``cache_chunk`` the whole accumulated batch is one contrastive batch (GradCache):
more in-batch negatives at the memory of one chunk. Every random choice derives from
(seed, step), so ``--resume`` continues exactly.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ..errors import HmdeError
from ..encoders.precision import autocast_context
from ..training.checkpoint import JsonlLog, load_checkpoint, resolve_bf16, save_checkpoint, seed_step, trim_log
from ..training import distributed
from .frozen_vectors import check_seed_vectors, load_frozen_vectors, save_frozen_vectors
from .lower_parts import freeze_lower_parts
from ..training.sparse_embeddings import densify, sparse_embedding_gradients
from ..training.time_budget import BudgetProbe
from .loss import cached_backward, contrastive_loss
from .steps import PairBatches, PretrainingConfig, micro_batches, orient, roles  # noqa: F401 (public here too)

CHECKPOINT_DIR = "checkpoint"
LOG_FILE, CONFIG_FILE = "train_log.jsonl", "training_config.json"
RUN_ENTRIES = (CHECKPOINT_DIR, LOG_FILE, CONFIG_FILE)  # what a run writes besides the model
# --time-budget: an HMDE step is batch x accumulation documents (128 in the paper), seconds each, so a few
# untimed steps (allocator, kernels) and a few timed ones measure the rate
BUDGET_WARMUP_STEPS, BUDGET_PROBE_STEPS = 2, 3


class HmdeTrainer:
    def __init__(self, model, pairs: list[dict], docs: dict, config: PretrainingConfig, output: str | Path,
                 show_progress: bool = True, prepared=None):
        self.model, self.config, self.output = model, config, Path(output)
        self.docs, self.show_progress = docs, show_progress
        self.prepared = prepared  # hmde.pretraining.prepared.PreparedUnits: units and token ids made once
        self.units_cache: dict[str, list[str]] = {}
        self.stopped_at: int | None = None  # set when train() stopped early (stop_at_step)
        self.vector_cache: dict[str, torch.Tensor] = {}
        n_val = min(config.validation_pairs, len(pairs) // 2)
        self.validation, self.pairs = pairs[:n_val], pairs[n_val:]
        if len(self.pairs) < 2:
            raise HmdeError("fewer than 2 training pairs: nothing to contrast")

    def units(self, doc_id: str) -> list[str]:
        if self.prepared is not None:
            return self.prepared.units[doc_id]
        if doc_id not in self.units_cache:
            text, lang = self.docs[doc_id]
            units = self.model.segment(text, lang)
            limit = self.model.config.max_sentences if self.config.max_units is None else self.config.max_units
            self.units_cache[doc_id] = units[:limit] if limit else units
        return self.units_cache[doc_id]

    def token_ids_of(self, picks) -> list[list[int]]:
        """Token ids of (document, unit index) pairs: from the units cache, else tokenised now."""
        if self.prepared is not None:
            return [self.prepared.ids[d][i] for d, i in picks]
        return self.model.lower.token_ids([self.units(d)[i] for d, i in picks])

    def unit_ids(self, doc_ids) -> list | None:
        return [self.prepared.ids[d] for d in doc_ids] if self.prepared is not None else None

    def encode(self, doc_ids, plan=None) -> torch.Tensor:
        """Document vectors with gradients; ``plan``: the group's lower-encoder batches, made by a loader worker."""
        if self.config.freeze_lower:
            return self.model.contextualize(self.frozen_sentence_vectors(doc_ids))
        return self.model.encode_units([self.units(d) for d in doc_ids], unit_ids=self.unit_ids(doc_ids),
                                       plan=plan).documents

    def encode_contextual(self, doc_ids, plan=None) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
        """(document vectors, each document's contextualised and lower-encoder sentence vectors)."""
        if self.config.freeze_lower:
            lower = self.frozen_sentence_vectors(doc_ids)
            documents, contextual = self.model.contextualize(lower, return_sentences=True)
            return documents, contextual, lower
        encoded = self.model.encode_units([self.units(d) for d in doc_ids], with_contextual=True,
                                          unit_ids=self.unit_ids(doc_ids), plan=plan)
        return encoded.documents, encoded.contextual, encoded.sentences

    def aligned(self, a: str, b: str) -> bool:
        """Whether two pages' units translate each other one to one: both were given as sentence
        lists of one length (read_pairs(presplit=True)) and segmentation split none of them."""
        (text_a, _), (text_b, _) = self.docs[a], self.docs[b]
        if not isinstance(text_a, (list, tuple)) or not isinstance(text_b, (list, tuple)) or len(text_a) != len(text_b):
            return False
        limit = len(self.units(a))
        return len(self.units(b)) == limit and list(self.units(a)) == list(text_a[:limit]) \
            and list(self.units(b)) == list(text_b[:limit])

    def sentence_loss(self, pairs: list[dict], a: tuple, b: tuple) -> torch.Tensor | None:
        """Not in the paper (off by default): the contextualised sentence vectors of aligned pairs.

        InfoNCE (both directions, summed) between each contextualised sentence of one side and its
        translation's, against the batch's other sentences, keeps them cross-lingual; the cosine
        distance to the sentence's own lower-encoder vector (a fixed target) keeps them in the
        space of the lower encoder's query vectors. None when no pair of the batch is aligned."""
        import torch.nn.functional as F

        rows = [i for i, p in enumerate(pairs) if self.aligned(p["doc_a"], p["doc_b"])]
        if not rows:
            return None
        ctx_a, ctx_b = torch.cat([a[1][i] for i in rows]), torch.cat([b[1][i] for i in rows])
        low_a, low_b = torch.cat([a[2][i] for i in rows]).detach(), torch.cat([b[2][i] for i in rows]).detach()
        # the sentences of this micro-batch are the contrast (counts differ between processes: no gather)
        cross = contrastive_loss(ctx_a, ctx_b, temperature=self.config.temperature, symmetric=True, gather=False)
        own = (2 - F.cosine_similarity(ctx_a, low_a.to(ctx_a.dtype)).mean()
               - F.cosine_similarity(ctx_b, low_b.to(ctx_b.dtype)).mean()) / 2
        return cross + own

    def frozen_sentence_vectors(self, doc_ids) -> list[torch.Tensor]:
        """With a frozen lower encoder a document's sentence vectors never change: embed
        each document once (dropout off) and reuse the vectors in every later step."""
        missing = list(dict.fromkeys(d for d in doc_ids if d not in self.vector_cache))
        if missing:
            lower = self.model.lower
            was = lower.training
            lower.eval()
            with torch.no_grad():
                flat = lower.embed_ids(self.token_ids_of([(d, i) for d in missing for i in range(len(self.units(d)))]),
                                       batch_size=32)
            lower.train(was)
            for d, v in zip(missing, torch.split(flat, [len(self.units(d)) for d in missing])):
                self.vector_cache[d] = v.detach()
        return [self.vector_cache[d] for d in doc_ids]

    def _embed_again(self, doc_ids) -> list[torch.Tensor]:
        """The documents' frozen vectors made now, bypassing the cache (to check a seeded one)."""
        cache, self.vector_cache = self.vector_cache, {}
        try:
            return self.frozen_sentence_vectors(doc_ids)
        finally:
            self.vector_cache = cache

    def roles(self, batch: list[dict]) -> list[list[str]]:
        return roles(batch, self.config)

    def loss_fn(self, a, b, *negatives):
        neg_a = negatives[0] if len(negatives) > 0 else None
        neg_b = negatives[1] if len(negatives) > 1 else None
        return contrastive_loss(a, b, neg_a, neg_b, self.config.temperature, self.config.symmetric, self.gather)

    def query_vectors(self, batch: list[dict]) -> torch.Tensor:
        """Lower-encoder vectors of one random sentence of each pair's translation (``doc_b``)."""
        docs = [p["doc_b"] for p in batch]
        picks = [int(torch.randint(len(self.units(d)), (1,))) for d in docs]
        if self.config.freeze_lower:
            return torch.stack([v[i] for v, i in zip(self.frozen_sentence_vectors(docs), picks)])
        return self.model.lower.embed_ids(self.token_ids_of(list(zip(docs, picks))))

    def query_loss(self, batch: list[dict], docs_a: torch.Tensor) -> torch.Tensor:
        """Not in the paper (off by default): InfoNCE from a sentence of the translation, through the
        lower encoder alone, to the document, against the batch's other documents.

        The CLIR protocol compares a lower-encoder query with upper-encoder documents, but the
        paper's loss only ever compares documents with documents, so nothing keeps document vectors
        in the sentence space the queries live in; this term does, cross-lingually.
        """
        return contrastive_loss(self.query_vectors(batch), docs_a, temperature=self.config.temperature,
                                gather=self.gather)

    @property
    def gather(self) -> bool:
        """Whether a contrastive batch spans processes: GradCache's whole-step batch always does;
        otherwise only with ``negatives_across_processes`` (the paper's batch is one micro-batch)."""
        return bool(self.config.cache_chunk or self.config.negatives_across_processes)

    def micro_batches(self, global_batch: list[dict], rank: int, world: int) -> list[tuple[int, list[dict]]]:
        return micro_batches(global_batch, self.config, rank, world, self.gather)

    def train_step(self, batch: list[dict], step: int = 0, rank: int = 0, world: int = 1, plans=None) -> float:
        """Forward and backward for this process's share of one optimizer step; returns the loss
        of the whole step (mean over its micro-batches, as one process holding it would log).

        Losses are scaled so the processes' gradients, averaged, equal one process's (the
        rule in :mod:`hmde.training.distributed`); each micro-batch's dropout is seeded by
        its index in the step, so it does not depend on the number of processes. ``plans``: the lower
        encoder's batches of each (micro-batch, role), made ahead by :mod:`hmde.pretraining.loader`."""
        cfg = self.config
        if cfg.cache_chunk:
            seed_step(cfg.seed + rank, step)
            mine = distributed.shard(batch, rank, world)
            return float(cached_backward(self.encode, self.roles(mine), cfg.cache_chunk, self.loss_fn))
        total = torch.zeros(())
        scale = 1.0 if self.gather else float(world)  # a gathered loss is already whole on every process
        for index, pairs in self.micro_batches(batch, rank, world):
            seed_step(cfg.seed, step, index)
            groups = self.roles(pairs)
            plan = (lambda role: plans.get((index, role))) if plans else (lambda role: None)
            sentence_term = None
            if cfg.sentence_weight:
                sides = [self.encode_contextual(g, plan(r)) for r, g in enumerate(groups[:2])]
                vectors = [side[0] for side in sides] + [self.encode(g, plan(r)) for r, g in enumerate(groups[2:], 2)]
                sentence_term = self.sentence_loss(pairs, *sides)
            else:
                vectors = [self.encode(g, plan(r)) for r, g in enumerate(groups)]
            loss = self.loss_fn(*vectors)
            if sentence_term is not None:
                loss = loss + cfg.sentence_weight * sentence_term
            if cfg.query_weight:
                loss = loss + cfg.query_weight * self.query_loss(pairs, vectors[0])
            loss = loss / cfg.grad_accum
            (loss * scale).backward()
            total += loss.detach().float().cpu()
        return float(distributed.mean_over_processes(total) * (1 if self.gather else world))

    @torch.no_grad()
    def validate(self) -> dict:
        """In-batch retrieval accuracy on the validation pairs (translation among all translations)."""
        if not self.validation:
            return {}
        was = self.model.training
        self.model.eval()
        a = torch.nn.functional.normalize(self.encode([p["doc_a"] for p in self.validation]), dim=-1)
        b = torch.nn.functional.normalize(self.encode([p["doc_b"] for p in self.validation]), dim=-1)
        self.model.train(was)
        target = torch.arange(len(a), device=a.device)
        return {"val_acc_a2b": float(((a @ b.T).argmax(1) == target).float().mean()),
                "val_acc_b2a": float(((b @ a.T).argmax(1) == target).float().mean())}

    def step_loader(self, batches: PairBatches, start: int, total: int, rank: int, world: int):
        """Steps ``start..total-1`` from a DataLoader (:mod:`hmde.pretraining.loader`); with prepared
        units and a trained lower encoder, workers also pad and bucket its token batches."""
        from .loader import StepDataset, step_loader

        cfg, lower = self.config, self.model.lower
        cuda = self.model.device.type == "cuda"
        workers = cfg.loader_workers if cfg.loader_workers is not None else (2 if cuda else 0)
        plan = self.prepared is not None and not cfg.freeze_lower and not cfg.cache_chunk
        dataset = StepDataset(self, batches, start, total, rank, world, plan, lower.padding(),
                              lower.default_batch_size() * lower.max_tokens)
        return step_loader(dataset, workers, pin_memory=cuda and plan)

    def _write_config(self) -> None:
        (self.output / CONFIG_FILE).write_text(json.dumps(dataclasses.asdict(self.config), indent=2) + "\n")

    def _recorded_budget_steps(self) -> int | None:
        """The step count an interrupted time-budgeted run fitted (its training_config.json), if it got so far."""
        try:
            recorded = json.loads((self.output / CONFIG_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        steps = recorded.get("budget_steps") if isinstance(recorded, dict) else None
        return steps if isinstance(steps, int) and steps > 0 else None

    def train(self, resume: bool = False, stop_at_step: int | None = None, seed_vectors: str | Path | None = None):
        """``seed_vectors`` (with ``freeze_lower``): another run's frozen sentence vectors to start the
        cache from, checked on a sample; they are saved with this run's first checkpoint, so a resume
        is exact."""
        from transformers import get_linear_schedule_with_warmup

        cfg, model, ckpt = self.config, self.model, self.output / CHECKPOINT_DIR
        rank, world = distributed.setup()
        main = distributed.is_main()
        pairs_per_step = cfg.batch_size * cfg.grad_accum
        batches = PairBatches(len(self.pairs), min(pairs_per_step, len(self.pairs)), cfg.seed)
        total = cfg.max_steps or max(1, math.ceil(cfg.epochs * batches.steps_per_epoch))
        if resume and cfg.time_budget_minutes and cfg.budget_steps is None:
            cfg.budget_steps = self._recorded_budget_steps()
        if cfg.budget_steps:
            total = min(total, cfg.budget_steps)
        if cfg.freeze_lower:
            for p in model.lower.parameters():
                p.requires_grad_(False)
        else:
            freeze_lower_parts(model.lower.model, cfg.lower_trainable)
        if cfg.gradient_checkpointing and not cfg.freeze_lower:
            auto = getattr(model.lower.model[0], "auto_model", None)
            if auto is not None and getattr(auto, "supports_gradient_checkpointing", False):
                import warnings

                with warnings.catch_warnings():  # renamed in newer transformers; same behaviour
                    warnings.simplefilter("ignore", FutureWarning)
                    auto.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        scheduler = get_linear_schedule_with_warmup(optimizer, min(cfg.warmup, total), total)
        step = 0
        seeded = {}
        use_bf16 = resolve_bf16(cfg.bf16, model.device)
        if seed_vectors is not None and cfg.freeze_lower:
            seeded = load_frozen_vectors(ckpt, self.units, model.device, path=seed_vectors)
            # embedded again in the precision the run embeds in (the seed run's too, when it ran here): under bf16
            # autocast the vectors are bf16's, which fp32 ones miss by ~1e-3, over the check's tolerance
            with autocast_context(model.device.type, torch.bfloat16 if use_bf16 else None):
                check_seed_vectors(Path(seed_vectors), seeded, self._embed_again)
            self.vector_cache = dict(seeded)
        if resume:
            if cfg.freeze_lower:  # before the checkpoint restores the RNG states; loading draws nothing
                self.vector_cache = {**seeded, **load_frozen_vectors(ckpt, self.units, model.device)}
            state = load_checkpoint(ckpt)
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            step = state["step"]
            if main:
                trim_log(self.output / LOG_FILE, step)
            planned = state.get("total")
            if planned is not None and planned != total:
                print(f"hmde: warning: the checkpoint's run planned {planned} steps, this one {total}: the learning-rate "
                              f"schedule changes at step {step}, so the result will not equal a straight {total}-step "
                              "run (to split one run in parts, give the same length and --stop-at-step)", file=sys.stderr)
        log = JsonlLog(self.output / LOG_FILE) if main else None
        if not resume and main:
            self.output.mkdir(parents=True, exist_ok=True)
            self._write_config()
            log.write(event="start", pairs=len(self.pairs), steps=total, pairs_per_step=pairs_per_step, bf16=use_bf16,
                      **self.validate())
        model.train()
        bar = tqdm(total=total, initial=step, desc="train", unit="step", disable=not (self.show_progress and main))
        t0, seen, saved_vectors = time.time(), 0, -1 if seeded else len(self.vector_cache)
        budget = BudgetProbe(cfg.time_budget_minutes, step, t0, BUDGET_WARMUP_STEPS, BUDGET_PROBE_STEPS) \
            if cfg.time_budget_minutes and cfg.budget_steps is None else None
        with sparse_embedding_gradients(model.lower, params, enabled=cfg.sparse_embedding_gradients and not cfg.freeze_lower):
            for item in self.step_loader(batches, step, total, rank, world):
                global_batch = item.batch
                optimizer.zero_grad(set_to_none=True)
                with autocast_context(model.device.type, torch.bfloat16 if use_bf16 else None):
                    loss = self.train_step(global_batch, step, rank, world, item.plans)
                if not math.isfinite(loss):
                    bar.close()
                    raise HmdeError(f"the loss became {loss} at step {step + 1}: training diverged (learning rate or "
                                    "temperature too extreme?); nothing was saved after the last checkpoint"
                                    + (f" in {ckpt}" if ckpt.exists() else ""))
                densify(params)
                distributed.average_gradients(params)
                torch.nn.utils.clip_grad_norm_(params, 1.0)
                optimizer.step()
                scheduler.step()
                step += 1
                seen += len(global_batch)
                bar.update(1)
                fitted = budget.fitted_total(step, total) if budget is not None else None
                if fitted is not None:
                    total = cfg.budget_steps = distributed.min_over_processes(fitted)  # all stop together
                    scheduler = get_linear_schedule_with_warmup(optimizer, min(cfg.warmup, total), total,
                                                                last_epoch=step - 1)
                    bar.total = total
                    if main:
                        log.write(event="time_budget", minutes=cfg.time_budget_minutes, steps=total)
                        self._write_config()  # the fitted count, for --resume
                if main and (step % cfg.log_every == 0 or step == total):
                    rate = seen / max(time.time() - t0, 1e-9)
                    log.write(step=step, loss=round(loss, 5), lr=scheduler.get_last_lr()[0], pairs_per_s=round(rate, 2))
                    bar.set_postfix(loss=f"{loss:.3f}", pairs_s=f"{rate:.1f}")
                if (cfg.save_every and step % cfg.save_every == 0) or step in (total, stop_at_step):
                    if main:
                        if self.validation:
                            log.write(event="validation", step=step, **self.validate())
                        if cfg.freeze_lower and len(self.vector_cache) != saved_vectors:
                            save_frozen_vectors(ckpt, self.vector_cache)
                            saved_vectors = len(self.vector_cache)
                        save_checkpoint(ckpt, {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                               "scheduler": scheduler.state_dict(), "step": step, "total": total,
                                               "config": dataclasses.asdict(cfg)})
                    if stop_at_step is not None and step >= stop_at_step and step < total:
                        bar.close()
                        self.stopped_at = step
                        return model
                if step >= total:  # a time budget can end the run before the loader's planned steps
                    break
        bar.close()
        model.eval()
        if main:
            model.save_pretrained(self.output)
        return model
