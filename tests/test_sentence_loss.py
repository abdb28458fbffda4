"""hmde train --sentence-loss-weight: contextualised sentence vectors trained on aligned parallel pages."""

import json

import pytest

import torch
import torch.nn.functional as F

from hmde import HierarchicalEncoder
from hmde.cli.main import main
from hmde.pretraining.loss import contrastive_loss
from hmde.pretraining.pairs import PairOptions, build_pairs, read_pairs
from hmde.pretraining.trainer import HmdeTrainer, PretrainingConfig


def page(lang, concept, cats, sentences, split=True):
    record = {"doc_id": f"{lang}/{concept}", "concept": concept, "lang": lang, "text": " ".join(sentences),
              "categories": cats}
    if split:
        record["verses"] = sentences  # a Bible chapter's own units
    return record


PAGES = [
    page("eng", "Q1", ["a"], ["The cat sleeps.", "It is small.", "It likes milk."]),
    page("deu", "Q1", ["a"], ["Die Katze schläft.", "Sie ist klein.", "Sie mag Milch."]),
    page("eng", "Q2", ["a"], ["The dog runs.", "It is fast."]),
    page("deu", "Q2", ["a"], ["Der Hund rennt.", "Er ist schnell."]),
    page("eng", "Q3", ["a"], ["Paris is a city.", "It is big."], split=False),  # no list: no sentence term
    page("deu", "Q3", ["a"], ["Paris ist eine Stadt.", "Sie ist groß."], split=False),
    page("eng", "Q4", ["a"], ["One.", "Two."]),
    page("deu", "Q4", ["a"], ["Eins.", "Zwei.", "Drei."]),  # lists of other lengths: not aligned
]


def pairs_file(tmp_path):
    src = tmp_path / "pages.jsonl"
    src.write_text("".join(json.dumps(p) + "\n" for p in PAGES))
    build_pairs([src], tmp_path / "p.parquet", PairOptions(seed=0, no_negative="keep"), show_progress=False)
    return tmp_path / "p.parquet"


def test_pairs_keep_sentence_lists_and_alignment_is_detected(labse_dir, tmp_path):
    path = pairs_file(tmp_path)
    _, plain, _ = read_pairs(path)
    pairs, docs, _ = read_pairs(path, presplit=True)
    assert plain["eng/Q1"][0] == "The cat sleeps. It is small. It likes milk."  # unchanged without presplit
    assert docs["eng/Q1"][0] == ["The cat sleeps.", "It is small.", "It likes milk."]
    assert isinstance(docs["eng/Q3"][0], str)
    model = HierarchicalEncoder.from_sentence_encoder(str(labse_dir), device="cpu", residual_sentences=True)
    trainer = HmdeTrainer(model, pairs, docs, PretrainingConfig(sentence_weight=1.0), tmp_path / "out",
                          show_progress=False)
    assert [trainer.aligned(f"deu/{c}", f"eng/{c}") for c in ("Q1", "Q2", "Q3", "Q4")] == [True, True, False, False]


def test_sentence_loss_equals_its_definition(labse_dir, tmp_path):
    pairs, docs, _ = read_pairs(pairs_file(tmp_path), presplit=True)
    model = HierarchicalEncoder.from_sentence_encoder(str(labse_dir), device="cpu", residual_sentences=True)
    with torch.no_grad():
        model.upper.gate.fill_(0.5)
    config = PretrainingConfig(sentence_weight=1.0, freeze_lower=True, temperature=0.05)
    trainer = HmdeTrainer(model, pairs, docs, config, tmp_path / "out", show_progress=False)
    batch = sorted(pairs, key=lambda p: p["concept"])
    a = trainer.encode_contextual([p["doc_a"] for p in batch])
    b = trainer.encode_contextual([p["doc_b"] for p in batch])
    loss = trainer.sentence_loss(batch, a, b)
    # by hand: only Q1 (3 sentences) and Q2 (2) are aligned
    keep = [i for i, p in enumerate(batch) if p["concept"] in ("Q1", "Q2")]
    ca, cb = torch.cat([a[1][i] for i in keep]), torch.cat([b[1][i] for i in keep])
    la, lb = torch.cat([a[2][i] for i in keep]), torch.cat([b[2][i] for i in keep])
    assert len(ca) == 5
    sims = F.normalize(ca, dim=-1) @ F.normalize(cb, dim=-1).T / 0.05
    target = torch.arange(5)
    cross = F.cross_entropy(sims, target) + F.cross_entropy(sims.T, target)  # both directions, summed
    own = 1 - (F.cosine_similarity(ca, la).mean() + F.cosine_similarity(cb, lb).mean()) / 2
    torch.testing.assert_close(loss, cross + own, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(contrastive_loss(ca, cb, temperature=0.05, symmetric=True, gather=False), cross,
                               atol=1e-5, rtol=1e-5)
    loss.backward()
    assert model.upper.gate.grad is not None and model.upper.gate.grad.abs() > 0


def test_train_cli_with_the_sentence_loss_lowers_it(labse_dir, tmp_path):
    path = pairs_file(tmp_path)
    out = tmp_path / "model"
    assert main(["train", str(labse_dir), str(path), "-o", str(out), "--freeze-lower", "--residual-sentences",
                 "--sentence-loss-weight", "1", "--batch-size", "4", "--grad-accum", "1", "--lr", "1e-2",
                 "--warmup", "0", "--max-steps", "8", "--no-progress", "--device", "cpu"]) == 0
    pairs, docs, _ = read_pairs(path, presplit=True)
    torch.manual_seed(0)
    start = HierarchicalEncoder.from_sentence_encoder(str(labse_dir), device="cpu", residual_sentences=True)

    def sentence_loss(model):
        model.eval()
        trainer = HmdeTrainer(model, pairs, docs, PretrainingConfig(sentence_weight=1.0, freeze_lower=True),
                              tmp_path / "unused", show_progress=False)
        with torch.no_grad():
            a = trainer.encode_contextual([p["doc_a"] for p in pairs])
            b = trainer.encode_contextual([p["doc_b"] for p in pairs])
            return float(trainer.sentence_loss(pairs, a, b))

    assert sentence_loss(HierarchicalEncoder.from_pretrained(out)) < sentence_loss(start) - 0.05


def test_the_paper_settings_stay_the_defaults():
    """docs/model.md's rows: no sentence-level loss, the sentence splitter, one vector per document."""
    from hmde.cli.main import build_parser

    assert PretrainingConfig().sentence_weight == 0.0
    train = build_parser().parse_args(["train", "m", "p.parquet", "-o", "o"])
    assert train.sentence_loss_weight == 0.0 and not train.sentence_lists
    build = build_parser().parse_args(["index", "build", "docs.jsonl", "-o", "i"])
    assert not build.multi_vector
    clir = build_parser().parse_args(["eval", "clir", "-o", "r.json"])
    assert clir.multi_vector is None


@pytest.mark.parametrize("weight", [None, "1.0"])
def test_recipe_use_passes_the_sentence_loss_only_when_asked(tmp_path, monkeypatch, weight):
    """`hmde recipe use` reproduces the shipped hmde-use by default (no sentence loss). Steps are recorded."""
    import hmde.recipes.use as recipe_use

    data, out = tmp_path / "data", tmp_path / "run"
    for sub in ("parallel", "bible", "eval"):
        (data / sub).mkdir(parents=True)
    (out / "hmde-use").mkdir(parents=True)
    (out / "hmde-use" / "config.json").write_text("{}")  # exported already: nothing loads
    steps = []
    monkeypatch.setattr(recipe_use, "run_step", lambda name, done, argv: steps.append(argv))
    monkeypatch.setattr(recipe_use, "build_sentence_tasks", lambda *a, **k: None)
    extra = ["--use-sentence-loss-weight", weight] if weight else []
    assert main(["recipe", "use", "--data", str(data), "-o", str(out), "--skip-eval", *extra]) == 0
    train = next(a for a in steps if a[0] == "train")
    if weight:
        assert train[train.index("--sentence-loss-weight") + 1] == weight
    else:
        assert "--sentence-loss-weight" not in train
