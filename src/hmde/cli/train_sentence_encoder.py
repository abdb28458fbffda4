"""``hmde train-sentence-encoder``: the lightweight cross-lingual encoder from parallel text."""

from __future__ import annotations

import argparse
import random
from collections import defaultdict
from pathlib import Path

from ..errors import HmdeError
from .common import add_device_argument, pick_device, warn


def register(sub) -> None:
    p = sub.add_parser(
        "train-sentence-encoder",
        help="train the lightweight cross-lingual sentence encoder on parallel sentences",
        description="Train a 2-layer dual transformer from scratch on sentence pairs (TSV files named "
        "xxx-yyy.tsv[.gz], or folders of them; or --src-file/--tgt-file line-aligned files) and save it as a "
        "sentence-transformers folder (BERT + mean pooling) that hmde uses as a lower encoder.",
    )
    p.add_argument("parallel", nargs="*", metavar="PARALLEL", help="TSV files or folders searched for **/*.tsv.gz")
    p.add_argument("--src-file", help="line-aligned source file (with --tgt-file and --pair)")
    p.add_argument("--tgt-file", help="line-aligned target file")
    p.add_argument("--pair", help="languages of --src-file/--tgt-file, e.g. deu-eng")
    p.add_argument("--output", "-o", required=True)
    p.add_argument("--languages", help="comma-separated language codes: keep only pairs whose languages are all listed")
    p.add_argument("--min-pairs", type=int, default=1, help="drop language pairs with fewer sentence pairs")
    p.add_argument("--skip-bad-lines", action="store_true", help="count and skip malformed lines instead of failing")
    p.add_argument("--vocab-size", type=int, default=32000)
    p.add_argument("--tokenizer-model", choices=["unigram", "bpe"], default="unigram",
                   help="subword model of the vocabulary (unigram: the paper's; bpe: far faster to train)")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--ffn", type=int, default=1024)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--max-length", type=int, default=128, help="tokens per sentence in training and in the saved model")
    p.add_argument("--train-max-length", type=int, default=64, help="truncate training sentences to this many tokens")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=None, help="warm-up steps (default 1000)")
    p.add_argument("--warmup-epochs", type=float, default=None, help="warm-up of this many epochs instead (paper: 3)")
    p.add_argument("--epochs", type=float, default=None, help="default 1 (paper: 12)")
    p.add_argument("--ugt-head", choices=["tied", "untied"], default=None,
                   help="UGT head: tied (the paper: a dense layer, then a softmax over the tied input embeddings) or "
                   "untied (default: one Linear(hidden, vocabulary))")
    p.add_argument("--ugt-reduction", choices=["sum", "mean"], default=None,
                   help="the two UGT KL terms: sum (the paper) or mean (default; effective weights 0.5:2:2)")
    p.add_argument("--preset", choices=sorted(LIGHTWEIGHT_PRESETS),
                   help="paper: tied head, summed KL terms, 12 epochs with 3 of warm-up; explicit flags still win")
    p.add_argument("--max-steps", type=int)
    p.add_argument("--time-budget", type=float, default=None, metavar="MINUTES",
                   help="end the optimisation after about this many minutes: the step count and learning-rate "
                        "schedule are fitted to the rate of steps 51-150, and again at a quarter, a half and three quarters of "
                        "the run (capped by --epochs/--max-steps)")
    p.add_argument("--save-every", type=int, default=1000)
    p.add_argument("--log-every", type=int, default=10, help="steps between lines of OUTPUT/train_log.jsonl")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batching", choices=["pair", "mix"], default="pair",
                   help="pair: each batch holds one language pair (harder negatives); mix: any pairs together")
    p.add_argument("--ugt-weight", type=float, default=1.0)
    p.add_argument("--align-weight", type=float, default=2.0)
    p.add_argument("--sim-weight", type=float, default=2.0)
    p.add_argument("--align-cosine", action="store_true", help="alignment loss on cosine/temperature instead of dot")
    p.add_argument("--temperature", type=float, default=0.05)
    p.add_argument("--bf16", choices=["auto", "on", "off"], default="auto")
    p.add_argument("--tokenizer-sentences-per-language", type=int, default=30000,
                   help="sentences per language used to train the vocabulary (balances languages)")
    p.add_argument("--eval-tatoeba", help="Tatoeba folder: report P@1 during and after training")
    p.add_argument("--eval-languages", help="comma-separated Tatoeba languages (default: trained ones present)")
    p.add_argument("--eval-every", type=int, default=0)
    add_device_argument(p)
    p.add_argument("--resume", action="store_true", help="continue from OUTPUT/checkpoint")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run)


# the lightweight encoder paper's settings (Mao et al., 2021): hmde's defaults differ (one
# epoch for CPU budgets; the untied head and averaged KL terms of earlier hmde versions)
LIGHTWEIGHT_PRESETS = {"paper": {"head": "tied", "ugt_reduction": "sum", "epochs": 12.0, "warmup_epochs": 3.0}}
LIGHTWEIGHT_DEFAULTS = {"head": "untied", "ugt_reduction": "mean", "epochs": 1.0, "warmup": 1000, "warmup_epochs": None}


def schedule_and_loss(args: argparse.Namespace) -> dict:
    """Head, UGT reduction and schedule: explicit flags, else the preset's, else hmde's defaults."""
    out = {**LIGHTWEIGHT_DEFAULTS, **LIGHTWEIGHT_PRESETS.get(args.preset or "", {})}
    explicit = {"head": args.ugt_head, "ugt_reduction": args.ugt_reduction, "epochs": args.epochs,
                "warmup": args.warmup, "warmup_epochs": args.warmup_epochs}
    out.update({k: v for k, v in explicit.items() if v is not None})
    if args.warmup is not None and args.warmup_epochs is None:
        out["warmup_epochs"] = None  # warm-up given in steps wins over the preset's epochs
    return out


def collect_files(inputs: list[str]) -> list[Path]:
    files: list[Path] = []
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            found = sorted(path.glob("**/*.tsv.gz")) + sorted(path.glob("**/*.tsv"))
            if not found:
                raise HmdeError(f"{path}: no *.tsv or *.tsv.gz files in this folder")
            files.extend(found)
        else:
            files.append(path)
    return files


def load_corpus(args):
    from ..lightweight.parallel_data import ParallelCorpus, languages_from_name, read_aligned_files, read_tsv_pairs

    corpus = ParallelCorpus()
    files = collect_files(args.parallel)
    keep = set(args.languages.split(",")) if args.languages else None
    if keep:
        files = [f for f in files if set(languages_from_name(f)) <= keep]
    read_tsv_pairs(files, skip_bad=args.skip_bad_lines, corpus=corpus)
    if args.src_file or args.tgt_file:
        if not (args.src_file and args.tgt_file and args.pair):
            raise HmdeError("--src-file needs --tgt-file and --pair (e.g. --pair deu-eng)")
        langs = tuple(args.pair.split("-"))
        if len(langs) != 2:
            raise HmdeError(f"--pair must look like deu-eng, got '{args.pair}'")
        read_aligned_files(args.src_file, args.tgt_file, langs, skip_bad=args.skip_bad_lines, corpus=corpus)
    if len(corpus) == 0:
        raise HmdeError("no sentence pairs to train on (give TSV files/folders or --src-file/--tgt-file)")
    if args.min_pairs > 1:
        counts = corpus.counts()
        small = {k for k, v in counts.items() if v < args.min_pairs}
        if small:
            corpus = filter_pairs(corpus, small)
    if corpus.skipped:
        warn(f"skipped lines: {dict(corpus.skipped)}")
    return corpus


def filter_pairs(corpus, drop: set[str]):
    from ..lightweight.parallel_data import ParallelCorpus

    out = ParallelCorpus()
    for s, t, p in zip(corpus.src, corpus.tgt, corpus.pair_of):
        pair = corpus.pairs[p]
        if f"{pair[0]}-{pair[1]}" not in drop:
            out.add(pair, s, t)
    out.skipped = corpus.skipped
    return out


def tokenizer_texts(corpus, per_language: int, seed: int) -> list[str]:
    """A language-balanced sample: at most ``per_language`` sentences of every language."""
    by_lang: dict[str, list[str]] = defaultdict(list)
    for s, t, p in zip(corpus.src, corpus.tgt, corpus.pair_of):
        a, b = corpus.pairs[p]
        by_lang[a].append(s)
        by_lang[b].append(t)
    rng = random.Random(seed)
    texts: list[str] = []
    for lang in sorted(by_lang):
        sentences = sorted(set(by_lang[lang]))
        rng.shuffle(sentences)
        texts.extend(sentences[:per_language])
    return texts


def make_encode_fn(model, tokenizer, max_length: int, batch_size: int = 256):
    import numpy as np
    import torch

    def encode(texts):
        out = []
        with torch.inference_mode():
            for i in range(0, len(texts), batch_size):
                enc = tokenizer(list(texts[i:i + batch_size]), padding=True, truncation=True,
                                max_length=max_length, return_tensors="pt")
                dev = next(model.parameters()).device
                out.append(model.pool(enc["input_ids"].to(dev), enc["attention_mask"].to(dev)).float().cpu().numpy())
        return np.concatenate(out)
    return encode


def run(args: argparse.Namespace) -> int:
    from ..evaluation.tatoeba import evaluate_tatoeba, tatoeba_languages
    from ..lightweight.model import LightweightConfig
    from ..lightweight.tokenizer import train_unigram_tokenizer
    from ..lightweight.trainer import LightweightTrainer, LightweightTrainingConfig
    from ..training import distributed

    distributed.setup()  # under torchrun: join the process group; process 0 trains the vocabulary
    output = Path(args.output)
    if output.exists() and any(output.iterdir()) and not args.resume and (output / "checkpoint").exists():
        raise HmdeError(f"{output} holds a training run; pass --resume to continue it or choose another --output")
    distributed.barrier()  # every process has looked at OUTPUT before process 0 writes there
    corpus = load_corpus(args)
    say = print if distributed.is_main() else (lambda *a, **k: None)
    say(f"{len(corpus)} sentence pairs in {len(corpus.pairs)} language pairs")
    config = LightweightTrainingConfig(
        model=LightweightConfig(vocab_size=args.vocab_size, layers=args.layers, hidden=args.hidden, heads=args.heads,
                                ffn=args.ffn, dropout=args.dropout, max_length=args.max_length,
                                head=schedule_and_loss(args)["head"]),
        batch_size=args.batch_size, lr=args.lr, max_steps=args.max_steps,
        **{k: v for k, v in schedule_and_loss(args).items() if k != "head"},
        save_every=args.save_every, log_every=args.log_every, seed=args.seed, batching=args.batching, ugt_weight=args.ugt_weight,
        align_weight=args.align_weight, sim_weight=args.sim_weight, align_cosine=args.align_cosine,
        temperature=args.temperature, bf16=args.bf16, tokenizer_sentences_per_language=args.tokenizer_sentences_per_language,
        train_max_length=args.train_max_length, time_budget_minutes=args.time_budget,
    )
    tokenizer = None
    if not args.resume and distributed.is_main():
        texts = tokenizer_texts(corpus, args.tokenizer_sentences_per_language, args.seed)
        say(f"training a {args.vocab_size}-piece {args.tokenizer_model} vocabulary on {len(texts)} sentences")
        tokenizer = train_unigram_tokenizer(texts, vocab_size=args.vocab_size, model=args.tokenizer_model)
    evaluate = None
    if args.eval_tatoeba:
        trained = {lang for pair in corpus.pairs for lang in pair}
        langs = args.eval_languages.split(",") if args.eval_languages else [
            lang for lang in tatoeba_languages(args.eval_tatoeba) if lang in trained]
        if not langs:
            raise HmdeError("no Tatoeba language matches a trained language; pass --eval-languages")

        def evaluate(model, tok):
            return evaluate_tatoeba(make_encode_fn(model, tok, args.max_length), args.eval_tatoeba, langs)
    device = distributed.local_device(pick_device(args.device))  # under torchrun: this process's GPU
    trainer = LightweightTrainer(corpus, config, output, tokenizer=tokenizer, device=device,
                                 evaluate=evaluate, eval_every=args.eval_every, show_progress=not args.no_progress)
    trainer.train(resume=args.resume)
    say(f"saved the sentence encoder to {output}")
    return 0
