"""The fine-tuning protocol of XLDC (softmax head, early stopping on English dev loss), for HMDE
and the paper's fine-tuned baselines (issue 16, item 4)."""

from __future__ import annotations

import numpy as np
import pytest

from hmde import SentenceEncoder
from hmde.evaluation.classification import FinetuneConfig, LabelledDocuments, finetune_protocol
from hmde.methods.vectorizer import DocumentVectorizer

ANIMALS = ["The cat sleeps on the mat.", "A dog runs in the park.", "The cat eats fish.", "Dogs and cats play."]
MONEY = ["Stock prices rose in March.", "The bank raised interest rates.", "Markets fell on Monday.",
         "Investors sold their shares."]


def _docs(lang: str, flip: bool = False, repeat: int = 2) -> LabelledDocuments:
    texts, labels = [], []
    for _ in range(repeat):
        for t in ANIMALS:
            texts.append(t + " " + t)
            labels.append("money" if flip else "animals")
        for t in MONEY:
            texts.append(t + " " + t)
            labels.append("animals" if flip else "money")
    return LabelledDocuments(texts, labels, lang)


FAST = dict(lr=3e-3, warmup=0, batch_size=4, accumulation=1, seed=0)


@pytest.mark.parametrize("method", ["hmde", "first", "seg", "mean"])
def test_finetuning_learns_a_separable_toy_set(labse_dir, method):
    """The random tiny HMDE uses residual sentences: with a random upper encoder the paper's
    design starts with nearly equal document vectors, which a toy run cannot get out of."""
    from hmde import HierarchicalEncoder

    model = HierarchicalEncoder.from_sentence_encoder(str(labse_dir), residual_sentences=True) if method == "hmde" \
        else SentenceEncoder.load(str(labse_dir))
    result = finetune_protocol(DocumentVectorizer(model, method), _docs("eng", repeat=3), _docs("eng", repeat=1),
                               [_docs("xxx", repeat=1)], FinetuneConfig(max_epochs=6, patience=6, **FAST),
                               show_progress=False)
    assert result["targets"]["xxx"]["accuracy"] >= 0.875  # chance: 0.5
    assert result["method"] == method and result["best_epoch"] == 6  # still improving: the last epoch is best


@pytest.mark.parametrize("cls_shortcut", [True, False])
def test_the_head_reads_baseline_vectors_before_the_final_normalize(labse_dir, cls_shortcut):
    """The paper's baselines fed LaBSE's pooled output to the softmax head; hub folders end in
    ``Normalize``, and on unit vectors the head could barely learn at the paper's learning rate (e5
    ``mean``: English dev loss 1.61 after an epoch against hmde-e5's 0.41). ``mean`` fine-tunes on the
    mean of the unnormalised sentence vectors (the folder run without its last module, by hand, on
    both of hmde's paths: the CLS shortcut and the full forward pass); ``encode`` stays unit length."""
    import torch
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(labse_dir), device="cpu").eval()
    lower = SentenceEncoder.load(str(labse_dir))
    lower.cls_last_layer = cls_shortcut
    vec = DocumentVectorizer(lower, "mean")
    docs = ["The cat sleeps on the mat. Prices rose in March.", "A dog runs in the park."]
    units = vec.document_method.tensor_units(docs, ["en", "en"], None)
    with torch.no_grad():
        got = vec.document_tensor(docs, ["en", "en"])
        expected = []
        for sentences in units:
            features = st.tokenize(sentences)
            for module in list(st)[:-1]:  # Transformer, Pooling (CLS), Dense (tanh); not Normalize
                features = module(features)
            expected.append(features["sentence_embedding"].mean(0))
    torch.testing.assert_close(got, torch.stack(expected), atol=1e-5, rtol=1e-5)
    assert [len(u) for u in units] == [2, 1] and not torch.allclose(got[1].norm(), torch.tensor(1.0), atol=1e-2)
    np.testing.assert_allclose(np.linalg.norm(lower.encode(["A dog runs in the park."]), axis=1), 1.0, atol=1e-5)


def test_early_stopping_stops_and_keeps_the_best_epoch(labse_dir):
    """Dev labels are the training labels swapped: once the fit improves, the dev loss only rises,
    so training stops `patience` epochs after the best one, long before max_epochs, and the
    best epoch's state is the one tested (its dev loss reproduced)."""
    from hmde.evaluation.classification import LabelledDocuments

    vec = DocumentVectorizer(SentenceEncoder.load(str(labse_dir)), "mean")
    flipped = _docs("eng", flip=True, repeat=1)
    result = finetune_protocol(vec, _docs("eng", repeat=3), flipped, [LabelledDocuments(flipped.texts, flipped.labels,
                                                                                          "dev-again")],
                               FinetuneConfig(max_epochs=20, patience=2, **FAST), show_progress=False)
    losses = [h["dev_loss"] for h in result["history"]]
    assert result["best_epoch"] == 1 + losses.index(min(losses)) <= 3
    assert result["epochs_run"] == result["best_epoch"] + 2 < 20 and result["best_dev_loss"] == min(losses)
    best = result["history"][result["best_epoch"] - 1]
    assert result["targets"]["dev-again"]["accuracy"] == best["dev_accuracy"]  # the restored state


def test_lawdr_cannot_be_finetuned(labse_dir):
    from hmde.errors import HmdeError

    vec = DocumentVectorizer(SentenceEncoder.load(str(labse_dir)), "lawdr")
    with pytest.raises(HmdeError, match="fitted, not trained"):
        finetune_protocol(vec, _docs("eng"), _docs("eng"), [], FinetuneConfig(max_epochs=1, **FAST),
                          show_progress=False)


def test_the_cli_finetunes_a_baseline(labse_dir, tmp_path, capsys):
    """`hmde eval xldc --protocol finetune --method seg` used to be refused."""
    import json

    from hmde.cli.main import main

    def write(name, docs):
        path = tmp_path / name
        path.write_text("".join(f"{lab}\t{text}\n" for text, lab in zip(docs.texts, docs.labels)))
        return path

    train, dev, test = write("train.tsv", _docs("eng", repeat=3)), write("dev.tsv", _docs("eng", repeat=1)), \
        write("test.tsv", _docs("fra", repeat=1))
    out = tmp_path / "r.json"
    assert main(["eval", "xldc", str(labse_dir), "--method", "seg", "--protocol", "finetune", "--mldoc",
                 f"train:eng={train}", f"dev:eng={dev}", f"test:fra={test}", "--lr", "3e-3", "--warmup", "0",
                 "--accumulation", "1", "--max-epochs", "3", "--no-progress", "-o", str(out)]) == 0
    metrics = json.loads(out.read_text())["metrics"]
    assert metrics["epochs_run"] == 3 and metrics["targets"]["fra"]["accuracy"] > 0.5


def test_xldc_reports_the_mean_of_several_seeds(labse_dir, tmp_path):
    """MLDoc-style: the lightweight paper reports the mean of 5 seeds; each seed fine-tunes afresh."""
    import json

    from hmde.cli.main import main
    from hmde.evaluation.classification import combine_seeds

    runs = [{"targets": {"fra": {"accuracy": a, "documents": 8}}, "best_epoch": e, "epochs_run": e}
            for a, e in ((0.5, 1), (0.75, 2), (1.0, 3))]
    combined = combine_seeds(runs, [0, 1, 2])
    assert combined["targets"]["fra"] == {"accuracy": 0.75, "std": pytest.approx(0.2041241), "documents": 8,
                                          "per_seed": [0.5, 0.75, 1.0]}
    assert combined["best_epoch"] == [1, 2, 3]

    def write(name, docs):
        path = tmp_path / name
        path.write_text("".join(f"{lab}\t{text}\n" for text, lab in zip(docs.texts, docs.labels)))
        return path

    files = [f"train:eng={write('train.tsv', _docs('eng', repeat=3))}", f"dev:eng={write('dev.tsv', _docs('eng'))}",
             f"test:fra={write('test.tsv', _docs('fra', repeat=1))}"]
    out = tmp_path / "r.json"
    assert main(["eval", "xldc", str(labse_dir), "--method", "mean", "--protocol", "finetune", "--mldoc", *files,
                 "--lr", "3e-3", "--warmup", "0", "--accumulation", "1", "--max-epochs", "1", "--seeds", "2",
                 "--no-progress", "-o", str(out)]) == 0
    metrics = json.loads(out.read_text())["metrics"]
    fra = metrics["targets"]["fra"]
    assert metrics["seeds"] == [0, 1] and len(fra["per_seed"]) == 2 and fra["accuracy"] == np.mean(fra["per_seed"])
