"""Continue masked-language-model training of a converted Longformer on long documents.

The Longformer authors continue MLM (15% of tokens) after conversion so that the tiled
positions and the sliding-window attention adapt to long inputs. The training loop is
Hugging Face's ``Trainer`` (checkpoints every ``save_steps``, exact resume); the
language-model head is tied to the input embeddings. The updated encoder weights are
written back into the sentence-transformers folder, whose pooling and heads are kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..errors import HmdeError


@dataclass
class MlmSettings:
    """The paper's continued MLM of mLongformer (lr 1e-5, weight decay 0.01, 500 warm-up steps,
    batch 2 x accumulation 32, one epoch); the public code used lr 3e-5."""

    max_length: int = 4096
    batch_size: int = 2
    grad_accum: int = 32
    lr: float = 1e-5
    weight_decay: float = 0.01
    warmup: int = 500
    epochs: float = 1.0
    max_steps: int | None = None  # set: stop after this many optimizer steps instead of the epochs
    save_steps: int = 200
    mlm_probability: float = 0.15
    seed: int = 0

    def training_arguments(self, work: Path, show_progress: bool, use_cpu: bool):
        from transformers import TrainingArguments

        return TrainingArguments(
            output_dir=str(work), per_device_train_batch_size=self.batch_size,
            gradient_accumulation_steps=self.grad_accum, learning_rate=self.lr, weight_decay=self.weight_decay,
            num_train_epochs=self.epochs, max_steps=self.max_steps if self.max_steps else -1,
            warmup_steps=self.warmup, save_steps=self.save_steps, logging_steps=10, seed=self.seed, report_to=[],
            disable_tqdm=not show_progress, use_cpu=use_cpu, save_total_limit=2)


def continue_mlm(folder: str | Path, texts: Sequence[str], output: str | Path, settings: MlmSettings | None = None,
                 resume: bool = False, show_progress: bool = True) -> Path:
    import torch
    from transformers import AutoTokenizer, DataCollatorForLanguageModeling, LongformerForMaskedLM, Trainer

    cfg = settings or MlmSettings()

    folder, output = Path(folder), Path(output)
    work = output.with_name(output.name + ".mlm-work")  # Trainer checkpoints, for --resume
    if not (folder / "config.json").exists():
        raise HmdeError(f"{folder} is not a converted Longformer folder (run `hmde longformer convert` first)")
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    if tokenizer.mask_token is None:
        raise HmdeError("the tokenizer has no mask token: masked-language-model training is impossible")
    model = LongformerForMaskedLM.from_pretrained(str(folder))
    model.tie_weights()
    # a converted folder has no LM head: transformers initialises its dense layers but can
    # leave the (tied) output bias as uninitialised memory, NaN included; start it at zero
    with torch.no_grad():
        model.lm_head.bias.zero_()
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise HmdeError("no text to train on")
    encoded = tokenizer(list(texts), truncation=True, max_length=cfg.max_length)
    dataset = [{"input_ids": ids} for ids in encoded["input_ids"]]
    args = cfg.training_arguments(work, show_progress, use_cpu=not torch.cuda.is_available())
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=cfg.mlm_probability, pad_to_multiple_of=8)
    trainer = Trainer(model=model, args=args, train_dataset=dataset, data_collator=collator)
    trainer.train(resume_from_checkpoint=True if resume else None)
    # the output is the input folder (pooling and heads kept) with the adapted encoder weights
    import shutil

    from ..ground.atomic import atomic_dir

    with atomic_dir(output) as tmp:
        shutil.copytree(folder, tmp, dirs_exist_ok=True)
        model.longformer.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    return output
