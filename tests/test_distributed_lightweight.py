"""The lightweight trainer under 2 processes (gloo) equals 1 process on the same global batch."""

import gzip
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from hmde.lightweight.model import LightweightConfig, LightweightEncoder
from hmde.lightweight.parallel_data import read_tsv_pairs
from hmde.lightweight.tokenizer import train_unigram_tokenizer
from hmde.lightweight.trainer import LightweightTrainer, LightweightTrainingConfig
from hmde.training import distributed

PAIRS = [
    ("Der Hund läuft schnell über die große Wiese.", "The dog runs fast across the big meadow."),
    ("Die Katze schläft.", "The cat sleeps."), ("Ich trinke jeden Morgen ein Glas Wasser.", "I drink a glass of water every morning."),
    ("Das Haus ist groß.", "The house is big."), ("Wir essen Brot.", "We eat bread."),
    ("Er liest ein Buch über alte Schiffe.", "He reads a book about old ships."), ("Sie singt gern.", "She likes to sing."),
    ("Es regnet heute.", "It rains today."),
]
BATCH = np.array([5, 0, 3, 7, 2, 6, 1])  # 7 pairs: shares of 4 and 3, rows of different lengths
STEP = 5


@pytest.fixture()
def setup(tmp_path):
    tsv = tmp_path / "deu-eng.tsv.gz"
    with gzip.open(tsv, "wt", encoding="utf-8") as f:
        f.writelines(f"{a}\t{b}\n" for a, b in PAIRS)
    tok_dir = tmp_path / "tok"
    train_unigram_tokenizer([t for p in PAIRS for t in p] * 5, vocab_size=120).save_pretrained(str(tok_dir))
    return tsv, tok_dir


def _step(tsv, tok_dir):
    """Losses and averaged gradients of one training step on BATCH (dropout off, so it is deterministic)."""
    from transformers import AutoTokenizer

    cfg = LightweightTrainingConfig(model=LightweightConfig(layers=1, hidden=32, heads=2, ffn=64, dropout=0.0,
                                                            max_length=32), seed=3, bf16="off")
    tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
    trainer = LightweightTrainer(read_tsv_pairs([tsv]), cfg, tok_dir.parent / "unused", tokenizer=tokenizer,
                                 show_progress=False)
    cfg.model.vocab_size = len(tokenizer)
    trainer._tokenize()
    torch.manual_seed(0)
    model = LightweightEncoder(cfg.model, pad_token_id=tokenizer.pad_token_id)
    losses = trainer.losses(model, BATCH, STEP)
    losses["loss"].backward()
    distributed.average_gradients(model.parameters())
    values = {k: float(distributed.mean_over_processes(v.detach())) for k, v in losses.items()}
    return values, {name: p.grad.clone() for name, p in model.named_parameters()}


def _worker(rank, world, port, tsv, tok_dir, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    out[rank] = _step(tsv, tok_dir)
    dist.destroy_process_group()


def test_two_processes_equal_one_on_the_global_batch(setup, free_port):
    tsv, tok_dir = setup
    out = mp.Manager().dict()
    mp.spawn(_worker, args=(2, free_port, tsv, tok_dir, out), nprocs=2, join=True)
    want_losses, want_grads = _step(tsv, tok_dir)
    assert set(want_losses) == {"ugt", "align", "sim", "loss"}
    for rank in (0, 1):
        got_losses, got_grads = out[rank]
        for name, value in want_losses.items():
            assert got_losses[name] == pytest.approx(value, rel=1e-5, abs=1e-6), (rank, name)
        for name, grad in want_grads.items():
            # A gradient summed over every token (token-type embeddings: values near 3) carries
            # summation-order error of about 1e-6 of its largest entry on every entry, near-zero
            # ones included, so the absolute tolerance scales with the tensor; a wrong average
            # (a missing process, a factor of two) is off by a whole part of it.
            atol = max(1e-6, 1e-5 * float(grad.abs().max()))
            assert torch.allclose(got_grads[name], grad, atol=atol, rtol=1e-4), (rank, name)


def test_torchrun_two_processes_share_one_vocabulary_and_save_once(setup, tmp_path, free_port):
    """`torchrun --nproc_per_node 2 -m hmde.cli.main train-sentence-encoder ...` on CPU (gloo)."""
    tsv, _ = setup
    out = tmp_path / "m"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", free_port,
           "-m", "hmde.cli.main", "train-sentence-encoder", str(tsv), "-o", str(out), "--vocab-size", "100",
           "--layers", "1", "--hidden", "32", "--heads", "2", "--ffn", "64", "--batch-size", "4", "--max-steps", "3",
           "--log-every", "1", "--no-progress", "--bf16", "off", "--device", "cpu"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("saved the sentence encoder") == 1
    assert done.stdout.count("vocabulary on") == 1  # process 0 trains it, process 1 loads it
    log = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]
    assert log[0]["event"] == "start" and log[0]["processes"] == 2
    assert [r["step"] for r in log if "loss" in r] == [1, 2, 3]  # one log: process 0 only
    from sentence_transformers import SentenceTransformer

    assert SentenceTransformer(str(out), device="cpu").encode(["Der Hund."]).shape == (1, 32)
