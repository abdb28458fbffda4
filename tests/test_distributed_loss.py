"""Negatives gathered across processes: two processes equal one process with the whole batch."""

import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from hmde.pretraining.loss import contrastive_loss

N, DIM, IN = 6, 8, 5


def _data():
    g = torch.Generator().manual_seed(0)
    x_a, x_b = torch.randn(N, IN, generator=g), torch.randn(N, IN, generator=g)
    x_neg = torch.randn(N, IN, generator=g)
    weight = torch.randn(DIM, IN, generator=g)
    return x_a, x_b, x_neg, weight


def _worker(rank, world, port, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    x_a, x_b, x_neg, weight = _data()
    w = weight.clone().requires_grad_(True)
    half = slice(rank * N // 2, (rank + 1) * N // 2)
    # unequal hard-negative counts across processes: rank 1 has one fewer
    negs = x_neg[half] if rank == 0 else x_neg[half][:-1]
    loss = contrastive_loss(x_a[half] @ w.T, x_b[half] @ w.T, negs @ w.T, None, 0.05)
    loss.backward()
    grad = w.grad.clone()
    dist.all_reduce(grad)
    grad /= world
    total = loss.detach().clone()
    dist.all_reduce(total)
    out[rank] = (float(total) / world, grad)
    dist.destroy_process_group()


def test_two_processes_equal_one_with_the_whole_batch(free_port):
    port = int(free_port)
    manager = mp.Manager()
    out = manager.dict()
    mp.spawn(_worker, args=(2, port, out), nprocs=2, join=True)
    x_a, x_b, x_neg, weight = _data()
    w = weight.clone().requires_grad_(True)
    negs = torch.cat([x_neg[: N // 2], x_neg[N // 2:][:-1]])
    loss = contrastive_loss(x_a @ w.T, x_b @ w.T, negs @ w.T, None, 0.05)
    loss.backward()
    for rank in (0, 1):
        got_loss, got_grad = out[rank]
        assert got_loss == pytest.approx(float(loss.detach()), rel=1e-5)
        assert torch.allclose(got_grad, w.grad, atol=1e-5)


def test_torchrun_two_processes_train_and_save_once(labse_dir, tmp_path, free_port):
    """`torchrun --nproc_per_node 2 -m hmde.cli.main train ...` on CPU (gloo)."""
    import json
    import subprocess
    import sys

    from hmde import HierarchicalEncoder
    from hmde.pretraining.pairs import PairOptions, build_pairs

    pages = tmp_path / "pages.jsonl"
    rows = [{"doc_id": f"{lang}/{c}", "concept": f"c{c}", "lang": lang, "categories": ["news"],
             "text": f"{word} number {c}. Another sentence {c}."}
            for c in range(8) for lang, word in (("eng", "Story"), ("deu", "Geschichte"))]
    pages.write_text("".join(json.dumps(r) + "\n" for r in rows))
    build_pairs([pages], tmp_path / "p.parquet", PairOptions(), show_progress=False)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", free_port,
           "-m", "hmde.cli.main", "train", str(labse_dir), str(tmp_path / "p.parquet"), "-o", str(tmp_path / "m"),
           "--batch-size", "4", "--grad-accum", "1", "--max-steps", "2", "--device", "cpu", "--no-progress",
           "--bf16", "off"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("saved the trained hmde model") == 1
    log = [json.loads(x) for x in (tmp_path / "m" / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if "loss" in r] == [2]  # one log: process 0 only
    assert HierarchicalEncoder.from_pretrained(tmp_path / "m").encode_documents(["Story."]).shape[0] == 1


def test_torchrun_two_processes_with_accumulation_equal_one_process(labse_dir, tmp_path, free_port):
    """Issue 16, item 3: W = 2 processes, accumulation 4, equal one process (the paper's per-micro-batch
    contrast; dropout on, seeded per micro-batch). Before, each process contrasted every W-th pair
    and the step's batches were others."""
    import json
    import subprocess
    import sys

    from safetensors.torch import load_file

    from hmde.pretraining.pairs import PairOptions, build_pairs

    pages = tmp_path / "pages.jsonl"
    rows = [{"doc_id": f"{lang}/{c}", "concept": f"c{c}", "lang": lang, "categories": ["news"],
             "text": f"{word} number {c}. Another sentence {c}. {word} ends."}
            for c in range(12) for lang, word in (("eng", "Story"), ("deu", "Geschichte"), ("fra", "Histoire"))]
    pages.write_text("".join(json.dumps(r) + "\n" for r in rows))
    build_pairs([pages], tmp_path / "p.parquet", PairOptions(), show_progress=False)
    train = ["train", str(labse_dir), str(tmp_path / "p.parquet"), "--batch-size", "2", "--grad-accum", "4",
             "--max-steps", "2", "--warmup", "1", "--lr", "1e-3", "--device", "cpu", "--no-progress", "--bf16", "off"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                          free_port, "-m", "hmde.cli.main", *train, "-o", str(tmp_path / "two")],
                         capture_output=True, text=True, timeout=300, env=env)
    assert two.returncode == 0, two.stderr[-2000:]
    one = subprocess.run([sys.executable, "-m", "hmde.cli.main", *train, "-o", str(tmp_path / "one")],
                         capture_output=True, text=True, timeout=300, env=env)
    assert one.returncode == 0, one.stderr[-2000:]
    for part in ("model.safetensors", "lower/model.safetensors"):
        a, b = load_file(str(tmp_path / "one" / part)), load_file(str(tmp_path / "two" / part))
        start = load_file(str(labse_dir / "model.safetensors")) if part.startswith("lower") else None
        for k in a:
            assert torch.allclose(a[k], b[k], atol=2e-6), (part, k)
        if start is not None:  # the lower encoder did train (the comparison is not of two untouched copies)
            assert any(not torch.equal(a[k], start[k]) for k in a if k in start)
    log = [json.loads(x) for x in (tmp_path / "one" / "train_log.jsonl").read_text().splitlines()]
    log2 = [json.loads(x) for x in (tmp_path / "two" / "train_log.jsonl").read_text().splitlines()]
    assert [r["loss"] for r in log if "loss" in r] == pytest.approx([r["loss"] for r in log2 if "loss" in r], rel=1e-4)
