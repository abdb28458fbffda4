"""The mLongformer baseline: conversion equals the original on short inputs; MLM continues; --method."""

import numpy as np
import pytest
from safetensors.torch import load_file

from hmde.cli.main import main
from hmde.errors import HmdeError
from hmde.longformer import LongformerEncoder, convert_to_longformer
from hmde.methods.vectorizer import DocumentVectorizer

TEXTS = ["The cat sat on the mat. It was a sunny day in the old town.", "Die Katze saß auf der Matte.", "猫坐在垫子上。"]


@pytest.fixture(scope="module")
def longformer_dir(labse_dir, tmp_path_factory):
    return convert_to_longformer(str(labse_dir), tmp_path_factory.mktemp("lf") / "model", max_positions=1024)


def test_converted_model_equals_the_original_on_short_inputs(labse_dir, longformer_dir):
    from sentence_transformers import SentenceTransformer

    original = SentenceTransformer(str(labse_dir), device="cpu").encode(TEXTS)
    np.testing.assert_allclose(LongformerEncoder(str(longformer_dir)).encode(TEXTS), original, atol=1e-5)


def test_positions_are_tiled_and_global_projections_copied(labse_dir, longformer_dir):
    import json

    weights = load_file(str(longformer_dir / "model.safetensors"))
    config = json.loads((longformer_dir / "config.json").read_text())
    pos = weights["embeddings.position_embeddings.weight"]
    offset = config["pad_token_id"] + 1
    assert pos.shape[0] == 1024 + offset and config["attention_window"][0] == 512
    n_orig = json.loads((labse_dir / "config.json").read_text())["max_position_embeddings"]
    assert np.allclose(pos[offset:offset + n_orig].numpy(), pos[offset + n_orig:offset + 2 * n_orig].numpy())
    q = [k for k in weights if k.endswith("attention.self.query.weight")][0]
    assert np.array_equal(weights[q].numpy(), weights[q.replace(".query.", ".query_global.")].numpy())


def test_method_longformer_and_mlm(longformer_dir, tmp_path, capsys):
    from hmde import SentenceEncoder

    vec = DocumentVectorizer(SentenceEncoder.load(str(longformer_dir)), "longformer").encode(TEXTS)
    assert vec.shape[0] == 3 and np.isfinite(vec).all()
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(TEXTS * 4) + "\n")
    assert main(["longformer", "mlm", str(longformer_dir), str(corpus), "-o", str(tmp_path / "adapted"), "--max-steps",
                 "2", "--batch-size", "1", "--grad-accum", "1", "--warmup", "1", "--max-length", "64",
                 "--no-progress"]) == 0
    before = load_file(str(longformer_dir / "model.safetensors"))
    after = load_file(str(tmp_path / "adapted" / "model.safetensors"))
    key = "embeddings.word_embeddings.weight"
    assert np.isfinite(after[key].numpy()).all() and not np.array_equal(before[key].numpy(), after[key].numpy())
    assert (tmp_path / "adapted" / "modules.json").exists()  # still a sentence-transformers folder


def test_longformer_method_needs_a_longformer(labse_dir):
    from hmde import SentenceEncoder

    with pytest.raises(HmdeError, match="needs a Longformer folder"):
        DocumentVectorizer(SentenceEncoder.load(str(labse_dir)), "longformer")


def test_mlm_defaults_are_the_papers(tmp_path):
    """Issue 16, item 6: lr 1e-5, weight decay 0.01, 500 warm-up steps, batch 2 x 32, one epoch."""
    from hmde.cli.longformer import mlm_settings
    from hmde.cli.main import build_parser

    args = build_parser().parse_args(["longformer", "mlm", "lf", "c.txt", "-o", "out"])
    settings = mlm_settings(args)
    ta = settings.training_arguments(tmp_path / "w", show_progress=False, use_cpu=True)
    assert (ta.learning_rate, ta.weight_decay, ta.warmup_steps, ta.per_device_train_batch_size,
            ta.gradient_accumulation_steps, ta.num_train_epochs, ta.max_steps) == (1e-5, 0.01, 500, 2, 32, 1.0, -1)
    args = build_parser().parse_args(["longformer", "mlm", "lf", "c.txt", "-o", "out", "--lr", "3e-5",
                                      "--weight-decay", "0", "--max-steps", "7"])
    ta = mlm_settings(args).training_arguments(tmp_path / "w", show_progress=False, use_cpu=True)
    assert (ta.learning_rate, ta.weight_decay, ta.max_steps) == (3e-5, 0.0, 7)


def test_the_longformer_baseline_finetunes(longformer_dir):
    """Issue 16, item 4: mLongformer is fine-tuned with the softmax head like HMDE (Table 1)."""
    import torch

    from hmde import SentenceEncoder
    from hmde.evaluation.classification import FinetuneConfig, LabelledDocuments, finetune_protocol

    vec = DocumentVectorizer(SentenceEncoder.load(str(longformer_dir)), "longformer")
    before = {k: v.clone() for k, v in vec.longformer.model.state_dict().items()}
    docs = LabelledDocuments(["The cat sleeps.", "Prices rose.", "A dog runs.", "Markets fell."] * 2, ["a", "m"] * 4,
                             "eng")
    result = finetune_protocol(vec, docs, docs, [docs], FinetuneConfig(max_epochs=2, lr=1e-3, warmup=0, batch_size=4,
                                                                       accumulation=1), show_progress=False)
    assert result["method"] == "longformer" and result["epochs_run"] == 2
    after = vec.longformer.model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    with torch.no_grad():  # its head reads the vector before the folder's Normalize, as the other baselines'
        raw, unit = vec.document_tensor(docs.texts[:2]), vec.longformer.forward(docs.texts[:2])
    torch.testing.assert_close(torch.nn.functional.normalize(raw, dim=-1), unit)
    assert (raw.norm(dim=-1) - 1).abs().min() > 1e-2
