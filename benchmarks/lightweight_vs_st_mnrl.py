"""Training throughput of hmde's lightweight trainer against sentence-transformers' trainer.

Both train the same 2-layer encoder (same width, vocabulary, batch size, sequence length)
on the same sentence pairs; sentence-transformers uses MultipleNegativesRankingLoss, the
usual in-batch contrastive baseline. hmde computes three losses (UGT over the vocabulary,
alignment, similarity) on the same forward pass. Prints pairs per second of each and
their ratio, measured side by side. Needs `pip install datasets` (the ST trainer's input).

    python benchmarks/lightweight_vs_st_mnrl.py --data ../shared/data/parallel/tatoeba/deu-eng.tsv.gz --steps 30
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="one xxx-yyy.tsv(.gz) file of sentence pairs")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--ffn", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab-size", type=int, default=16000)
    ap.add_argument("--max-length", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from hmde.lightweight.model import LightweightConfig, LightweightEncoder
    from hmde.lightweight.parallel_data import read_tsv_pairs
    from hmde.lightweight.tokenizer import train_unigram_tokenizer
    from hmde.lightweight.trainer import LightweightTrainer, LightweightTrainingConfig

    corpus = read_tsv_pairs([args.data])
    n = args.steps * args.batch_size
    if len(corpus) < n:
        raise SystemExit(f"{args.data} has {len(corpus)} pairs, {n} are needed")
    tokenizer = train_unigram_tokenizer(corpus.src[:20000] + corpus.tgt[:20000], args.vocab_size, model="bpe")
    model_cfg = LightweightConfig(vocab_size=len(tokenizer), hidden=args.hidden, heads=args.heads, ffn=args.ffn,
                                  max_length=args.max_length)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = LightweightTrainingConfig(model=model_cfg, batch_size=args.batch_size, max_steps=args.steps, warmup=1,
                                        save_every=0, log_every=args.steps, train_max_length=args.max_length,
                                        batching="mix", bf16="off")
        trainer = LightweightTrainer(corpus, cfg, Path(tmp) / "hmde", tokenizer=tokenizer, show_progress=False)
        trainer.train()
        # the trainer's own rate: the training loop only, not tokenizing the corpus or saving
        log = [json.loads(x) for x in (Path(tmp) / "hmde" / "train_log.jsonl").read_text().splitlines()]
        hmde_rate = [r for r in log if "pairs_per_s" in r][-1]["pairs_per_s"]

        folder = Path(tmp) / "st-init"
        LightweightEncoder(model_cfg, pad_token_id=tokenizer.pad_token_id).save_sentence_transformer(tokenizer, folder)
        st = SentenceTransformer(str(folder), device="cpu")
        st.max_seq_length = args.max_length
        data = Dataset.from_dict({"anchor": corpus.src[:n], "positive": corpus.tgt[:n]})
        st_args = SentenceTransformerTrainingArguments(
            output_dir=str(Path(tmp) / "st"), per_device_train_batch_size=args.batch_size, max_steps=args.steps,
            learning_rate=1e-3, warmup_steps=1, save_strategy="no", report_to=[], disable_tqdm=True, use_cpu=True,
            logging_steps=args.steps, dataloader_drop_last=True)
        st_trainer = SentenceTransformerTrainer(model=st, args=st_args, train_dataset=data,
                                                loss=MultipleNegativesRankingLoss(st))
        st_rate = st_trainer.train().metrics["train_samples_per_second"]  # the training loop only
    print(f"pairs/s  hmde (UGT + alignment + similarity): {hmde_rate:.1f}")
    print(f"pairs/s  sentence-transformers (MNRL):       {st_rate:.1f}")
    print(f"ratio hmde / sentence-transformers: {hmde_rate / st_rate:.2f}x")


if __name__ == "__main__":
    main()
