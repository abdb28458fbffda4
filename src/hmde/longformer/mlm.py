"""Continue masked-language-model training of a converted Longformer on long documents.

The Longformer authors continue MLM (15% of tokens) after conversion so that the tiled
positions and the sliding-window attention adapt to long inputs. The training loop is
Hugging Face's ``Trainer`` (checkpoints every ``save_steps``, exact resume); the
language-model head is tied to the input embeddings. The updated encoder weights are
written back into the sentence-transformers folder, whose pooling and heads are kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ..errors import HmdeError


def continue_mlm(folder: str | Path, texts: Sequence[str], output: str | Path, max_length: int = 4096,
                 batch_size: int = 1, grad_accum: int = 8, lr: float = 3e-5, max_steps: int = 1000,
                 warmup: int = 100, save_steps: int = 200, seed: int = 0, resume: bool = False,
                 mlm_probability: float = 0.15, show_progress: bool = True) -> Path:
    import torch
    from transformers import (AutoTokenizer, DataCollatorForLanguageModeling, LongformerForMaskedLM, Trainer,
                              TrainingArguments)

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
    encoded = tokenizer(list(texts), truncation=True, max_length=max_length)
    dataset = [{"input_ids": ids} for ids in encoded["input_ids"]]
    args = TrainingArguments(
        output_dir=str(work), per_device_train_batch_size=batch_size, gradient_accumulation_steps=grad_accum,
        learning_rate=lr, max_steps=max_steps, warmup_steps=warmup, save_steps=save_steps, logging_steps=10,
        seed=seed, report_to=[], disable_tqdm=not show_progress, use_cpu=not torch.cuda.is_available(),
        save_total_limit=2,
    )
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=mlm_probability, pad_to_multiple_of=8)
    trainer = Trainer(model=model, args=args, train_dataset=dataset, data_collator=collator)
    trainer.train(resume_from_checkpoint=True if resume else None)
    # the output is the input folder (pooling and heads kept) with the adapted encoder weights
    import shutil

    from ..atomic import atomic_dir

    with atomic_dir(output) as tmp:
        shutil.copytree(folder, tmp, dirs_exist_ok=True)
        model.longformer.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    return output
