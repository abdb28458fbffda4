import gzip
import json
import re
import math

import numpy as np
import pytest
import torch

from hmde import InputError
from hmde.cli.main import main
from hmde.lightweight.losses import alignment_loss, bag_of_tokens, kl_to_target, similarity_loss, ugt_loss, ugt_targets
from hmde.lightweight.model import LightweightConfig
from hmde.lightweight.parallel_data import read_aligned_files, read_tsv_pairs
from hmde.lightweight.tokenizer import train_unigram_tokenizer
from hmde.lightweight.trainer import LightweightTrainer, LightweightTrainingConfig, epoch_batches, fit_steps_to_budget
from hmde.training.checkpoint import load_checkpoint


def test_bag_of_tokens_counts_repeats():
    bag = bag_of_tokens(torch.tensor([[5, 5, 7, 0]]), torch.tensor([[1, 1, 1, 0]]), 8)
    expected = torch.zeros(1, 8)
    expected[0, 5], expected[0, 7] = 2 / 3, 1 / 3
    assert torch.allclose(bag, expected)


def test_ugt_targets_hand_computed():
    masked, other = ugt_targets(
        masked_token=torch.tensor([3]), masked_side_ids=torch.tensor([[1, 3, 4, 4]]),
        masked_side_keep=torch.tensor([[0, 1, 1, 1]]), other_ids=torch.tensor([[2, 6, 6, 1]]),
        other_keep=torch.tensor([[1, 1, 1, 0]]), vocab_size=8,
    )
    assert torch.allclose(masked, torch.tensor([[0, 0, 1 / 6, 0.5, 0, 0, 1 / 3, 0]]))
    assert torch.allclose(other, torch.tensor([[0, 0, 0, 1 / 3, 2 / 3, 0, 0, 0]]))
    assert torch.allclose(masked.sum(), torch.tensor(1.0)) and torch.allclose(other.sum(), torch.tensor(1.0))


def test_kl_and_ugt_hand_computed():
    target = torch.tensor([[0.5, 0.5, 0.0, 0.0]])
    assert math.isclose(kl_to_target(torch.zeros(1, 4), target).item(), math.log(2), rel_tol=1e-6)
    assert math.isclose(ugt_loss(torch.zeros(1, 4), torch.zeros(1, 4), target, torch.full((1, 4), 0.25)).item(),
                        0.5 * math.log(2), rel_tol=1e-6)


def test_alignment_loss_hand_computed():
    u = torch.eye(2)
    assert math.isclose(alignment_loss(u, u).item(), 2 * math.log(1 + math.exp(-1)), rel_tol=1e-6)
    # cosine variant: same vectors scaled -> same loss; temperature 0.5 doubles the logits
    assert math.isclose(alignment_loss(3 * u, u, cosine=True, temperature=0.5).item(),
                        2 * math.log(1 + math.exp(-2)), rel_tol=1e-6)


def test_similarity_loss_hand_computed():
    u = torch.eye(2)
    assert similarity_loss(u, u).item() == pytest.approx(0.0, abs=1e-7)
    v = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    a = math.e / (math.e + 1) - 0.5
    assert similarity_loss(u, v).item() == pytest.approx(-2 * math.log(math.cos(math.pi * a / 2)), rel=1e-5)


def test_epoch_batches_one_pair_per_batch_and_deterministic():
    pair_of = np.array([0] * 10 + [1] * 7)
    batches = epoch_batches(pair_of, 4, "pair", seed=1, epoch=0)
    assert all(len(set(pair_of[b])) == 1 for b in batches)
    assert sorted(np.concatenate(batches)) == list(range(17))
    again = epoch_batches(pair_of, 4, "pair", seed=1, epoch=0)
    assert all(np.array_equal(x, y) for x, y in zip(batches, again))
    assert not all(np.array_equal(x, y) for x, y in zip(batches, epoch_batches(pair_of, 4, "pair", 1, 1)))


PAIRS = [
    ("Der Hund läuft.", "The dog runs."), ("Die Katze schläft.", "The cat sleeps."),
    ("Ich trinke Wasser.", "I drink water."), ("Das Haus ist groß.", "The house is big."),
    ("Wir essen Brot.", "We eat bread."), ("Er liest ein Buch.", "He reads a book."),
    ("Sie singt gern.", "She likes to sing."), ("Es regnet heute.", "It rains today."),
]


@pytest.fixture()
def tsv(tmp_path):
    path = tmp_path / "deu-eng.tsv.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(f"{a}\t{b}\n" for a, b in PAIRS * 4)
    return path


def _trainer(tsv, out, tokenizer=None):
    corpus = read_tsv_pairs([tsv])
    cfg = LightweightTrainingConfig(model=LightweightConfig(layers=1, hidden=32, heads=2, ffn=64, max_length=32),
                                    batch_size=8, warmup=2, max_steps=6, save_every=3, seed=3, bf16="off")
    tok = tokenizer or train_unigram_tokenizer([t for p in PAIRS for t in p] * 5, vocab_size=120)
    return LightweightTrainer(corpus, cfg, out, tokenizer=tok, show_progress=False), tok


def test_resume_ends_with_the_same_weights(tsv, tmp_path):
    straight, tok = _trainer(tsv, tmp_path / "a")
    full = straight.train()
    half, _ = _trainer(tsv, tmp_path / "b", tokenizer=tok)
    half.train(stop_at_step=3)
    resumed, _ = _trainer(tsv, tmp_path / "b", tokenizer=tok)
    continued = resumed.train(resume=True)
    for (k, a), (_, b) in zip(full.state_dict().items(), continued.state_dict().items()):
        assert torch.equal(a, b), k


def test_fit_steps_to_budget_hand_computed():
    # 10 steps/s; 95% of 60 s = 57 s, 10 s gone, 47 s left -> 470 more steps
    assert fit_steps_to_budget(100, 10.0, 10.0, 60.0, total=10_000) == 570
    assert fit_steps_to_budget(100, 10.0, 10.0, 60.0, total=300) == 300  # never past the steps asked for
    assert fit_steps_to_budget(100, 10.0, 80.0, 60.0, total=10_000) == 101  # over budget: stop next step


def test_time_budget_shrinks_the_run_and_is_kept_for_resume(tsv, tmp_path, monkeypatch):
    import hmde.lightweight.trainer as trainer_module

    monkeypatch.setattr(trainer_module, "BUDGET_WARMUP_STEPS", 1)
    monkeypatch.setattr(trainer_module, "BUDGET_PROBE_STEPS", 2)
    import threading

    clock = iter(range(0, 10_000, 10))  # every time.time() call of this thread advances 10 s
    real_time, this_thread = trainer_module.time.time, threading.get_ident()
    # time.time is global: another test's server thread (gRPC, uvicorn) must keep its real clock
    monkeypatch.setattr(trainer_module.time, "time",
                        lambda: float(next(clock)) if threading.get_ident() == this_thread else real_time())
    trainer, _ = _trainer(tsv, tmp_path / "a")
    trainer.config.max_steps = 50
    trainer.config.time_budget_minutes = 1.0
    trainer.train()
    log = [json.loads(x) for x in (tmp_path / "a" / "train_log.jsonl").read_text().splitlines()]
    budget = [r for r in log if r.get("event") == "time_budget"]
    assert budget and all(2 < r["steps"] < 50 for r in budget)  # fitted after the probe, maybe again later
    assert max(r.get("step", 0) for r in log) == budget[-1]["steps"]
    assert load_checkpoint(tmp_path / "a" / "checkpoint")["config"]["budget_steps"] == budget[-1]["steps"]


def test_saved_folder_is_a_plain_sentence_transformer(tsv, tmp_path):
    trainer, _ = _trainer(tsv, tmp_path / "m")
    model = trainer.train()
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(tmp_path / "m"), device="cpu")
    assert [type(m).__name__ for m in st] == ["Transformer", "Pooling"]
    enc = trainer.tokenizer(["The dog runs."], return_tensors="pt")
    with torch.no_grad():
        expected = model.pool(enc["input_ids"], enc["attention_mask"]).numpy()
    np.testing.assert_allclose(st.encode(["The dog runs."]), expected, atol=1e-5)
    assert not any("head" in k for k in st.state_dict())  # the UGT head is training-only
    from hmde import HierarchicalEncoder

    assert HierarchicalEncoder.from_sentence_encoder(str(tmp_path / "m")).encode_documents(["Der Hund läuft."]).shape == (1, 32)


@pytest.mark.parametrize("content, message", [
    ("only one column\n", "line 1: expected 'source<TAB>target', found no tab"),
    ("a\tb\n\tb\n", "line 2: the first (source) side is empty"),
    ("a\t \n", "line 1: the second (target) side is empty"),
    ("", "the file holds no sentence pairs"),
])
def test_bad_parallel_input(tmp_path, content, message):
    path = tmp_path / "deu-eng.tsv"
    path.write_text(content)
    with pytest.raises(InputError, match=re.escape(message)):
        read_tsv_pairs([path])


def test_bad_lines_can_be_counted_and_skipped(tmp_path):
    path = tmp_path / "deu-eng.tsv"
    path.write_text("a\tb\nno tab\n\tx\nc\td\n")
    corpus = read_tsv_pairs([path], skip_bad=True)
    assert len(corpus) == 2 and corpus.skipped == {"no tab": 1, "empty side": 1}


def test_file_name_must_name_a_language_pair(tmp_path):
    path = tmp_path / "sentences.tsv"
    path.write_text("a\tb\n")
    with pytest.raises(InputError, match="names no language pair"):
        read_tsv_pairs([path])


def test_two_file_input(tmp_path):
    (tmp_path / "x.de").write_text("Hund\nKatze\n")
    (tmp_path / "x.en").write_text("dog\ncat\n")
    corpus = read_aligned_files(tmp_path / "x.de", tmp_path / "x.en", ("deu", "eng"))
    assert corpus.src == ["Hund", "Katze"] and corpus.counts() == {"deu-eng": 2}
    (tmp_path / "y.en").write_text("dog\n")
    with pytest.raises(InputError, match="has 2 lines but"):
        read_aligned_files(tmp_path / "x.de", tmp_path / "y.en", ("deu", "eng"))


def test_cli_trains_and_reports_bad_input(tsv, tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["train-sentence-encoder", str(tsv), "-o", str(out), "--vocab-size", "100", "--layers", "1",
                 "--hidden", "32", "--heads", "2", "--ffn", "64", "--batch-size", "8", "--max-steps", "2",
                 "--no-progress", "--bf16", "off"]) == 0
    assert (out / "modules.json").exists() and (out / "train_log.jsonl").exists()
    bad = tmp_path / "fra-eng.tsv"
    bad.write_text("no tab here\n")
    assert main(["train-sentence-encoder", str(bad), "-o", str(tmp_path / "x")]) == 2
    assert "fra-eng.tsv, line 1: expected 'source<TAB>target'" in capsys.readouterr().err


def test_tied_ugt_head_is_dense_then_the_input_embeddings():
    """Issue 16, item 9: the paper's generative head: a fully connected layer followed by a softmax
    over the tied input embeddings (the untied Linear(hidden, V) stays the default)."""
    from hmde.lightweight.model import LightweightEncoder

    cfg = LightweightConfig(vocab_size=50, layers=1, hidden=16, heads=2, ffn=32, max_length=16, head="tied")
    tied = LightweightEncoder(cfg)
    untied = LightweightEncoder(LightweightConfig(**{**cfg.__dict__, "head": "untied"}))
    emb = tied.bert.embeddings.word_embeddings.weight
    h = torch.randn(3, 16)
    expected = (h @ tied.head.dense.weight.T + tied.head.dense.bias) @ emb.T + tied.head.bias
    assert torch.allclose(tied.head(h), expected, atol=1e-6)
    n_head = lambda m: sum(p.numel() for n, p in m.named_parameters() if n.startswith("head."))  # noqa: E731
    assert n_head(tied) == 16 * 16 + 16 + 50 and n_head(untied) == 16 * 50 + 50  # the V x H matrix is shared
    tied.head(h).sum().backward()
    assert emb.grad is not None and emb.grad.abs().sum() > 0  # the generative loss trains the embeddings
    with torch.no_grad():
        emb[7] += 1.0
    assert not torch.allclose(tied.head(h)[:, 7], expected[:, 7])  # tied: the very same matrix


def test_paper_loss_weights_against_a_hand_computation(tsv, tmp_path):
    """Paper: 1 x (KL_a + KL_b) + 2 x align + 2 x sim; earlier hmde averaged the KL terms (0.5:2:2)."""
    logits_a, logits_b = torch.tensor([[0.0, 1.0, 2.0]]), torch.tensor([[1.0, 0.0, 0.0]])
    t_a, t_b = torch.tensor([[0.5, 0.5, 0.0]]), torch.tensor([[0.0, 0.0, 1.0]])

    def kl(logits, t):
        logp = torch.log_softmax(logits, -1)
        return sum(float(t[0, i] * (math.log(t[0, i]) - logp[0, i])) for i in range(3) if t[0, i] > 0)

    by_hand = kl(logits_a, t_a) + kl(logits_b, t_b)
    assert math.isclose(ugt_loss(logits_a, logits_b, t_a, t_b, "sum").item(), by_hand, rel_tol=1e-6)
    assert math.isclose(ugt_loss(logits_a, logits_b, t_a, t_b).item(), by_hand / 2, rel_tol=1e-6)
    trainer, _ = _trainer(tsv, tmp_path / "w")
    trainer.config.ugt_reduction = "sum"
    trainer.config.model.head = "tied"
    model = trainer.train()
    losses = trainer.losses(model, np.arange(8), step=0)
    assert torch.allclose(losses["loss"], losses["ugt"] + 2 * losses["align"] + 2 * losses["sim"])


def test_paper_preset_schedule_and_head(tmp_path):
    from hmde.cli.main import build_parser
    from hmde.cli.train_sentence_encoder import schedule_and_loss

    parse = lambda *extra: schedule_and_loss(build_parser().parse_args(["train-sentence-encoder", "x", "-o", "o",  # noqa: E731
                                                                        *extra]))
    assert parse("--preset", "paper") == {"head": "tied", "ugt_reduction": "sum", "epochs": 12.0, "warmup": 1000,
                                          "warmup_epochs": 3.0}
    assert parse() == {"head": "untied", "ugt_reduction": "mean", "epochs": 1.0, "warmup": 1000, "warmup_epochs": None}
    assert parse("--preset", "paper", "--warmup", "5")["warmup_epochs"] is None
    corpus = read_tsv_pairs([_write_tsv(tmp_path)])
    trainer = LightweightTrainer(corpus, LightweightTrainingConfig(warmup_epochs=3.0), tmp_path / "o", tokenizer=None,
                                 show_progress=False)
    assert trainer.warmup_steps(steps_per_epoch=7) == 21


def _write_tsv(tmp_path):
    path = tmp_path / "deu-eng.tsv"
    path.write_text("".join(f"{a}\t{b}\n" for a, b in PAIRS))
    return path
