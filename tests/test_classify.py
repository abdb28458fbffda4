"""`hmde classify train|predict` (issue 48): a classifier of one's own labels on frozen document vectors,
saved without pickles, predicting exactly what scikit-learn's model predicts."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hmde.cli.main import main

TRAIN = [("c1", "eng", "The cat sleeps on the sofa.", "animals"), ("c2", "eng", "A dog barks at the cat.", "animals"),
         ("c3", "eng", "Birds sing in the garden trees.", "animals"), ("e1", "eng", "Exports fell and prices rose.", "economy"),
         ("e2", "eng", "The central bank raised interest rates.", "economy"),
         ("e3", "eng", "Growth slowed as the markets fell.", "economy"),
         ("s1", "eng", "The team won the final match.", "sport"), ("s2", "eng", "Fans cheered the winning goal.", "sport"),
         ("s3", "eng", "The runner broke the world record.", "sport")]


def write(path, rows, label=True):
    path.write_text("".join(json.dumps({"doc_id": i, "lang": lang, "text": t, **({"label": y} if label else {})}) + "\n"
                            for i, lang, t, y in rows))
    return path


def test_train_then_predict_equals_scikit_learns_model(tmp_path, hmde_dir, capsys):
    from sklearn.linear_model import LogisticRegression

    from hmde import HierarchicalEncoder
    from hmde.classify.classifier import Classifier
    from hmde.methods.vectorizer import DocumentVectorizer
    from hmde.align.similarity import normalize

    src = write(tmp_path / "train.jsonl", TRAIN)
    assert main(["classify", "train", str(hmde_dir), str(src), "-o", str(tmp_path / "clf")]) == 0
    assert "trained a classifier of 3 labels on 9 documents" in capsys.readouterr().out
    with np.load(tmp_path / "clf" / "weights.npz", allow_pickle=False) as data:  # plain arrays: nothing pickled
        assert set(data.files) == {"coef", "intercept"}
    docs = write(tmp_path / "new.jsonl", [("n1", "deu", "Die Katze schläft.", ""), ("n2", "fra", "La banque centrale "
                                          "a relevé ses taux.", "")], label=False)
    assert main(["classify", "predict", str(tmp_path / "clf"), str(docs), "--top-k", "3"]) == 0
    got = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    model = HierarchicalEncoder.from_pretrained(hmde_dir)
    vec = DocumentVectorizer(model, "hmde")
    x = normalize(vec.encode([t for _, _, t, _ in TRAIN], ["eng"] * 9))
    reference = LogisticRegression(max_iter=2000, C=10.0, random_state=0).fit(x, [y for *_, y in TRAIN])
    want = reference.predict_proba(normalize(vec.encode(["Die Katze schläft.", "La banque centrale a relevé ses taux."],
                                                        ["deu", "fra"])))
    for row, p in zip(got, want):
        assert row["label"] == reference.classes_[p.argmax()]
        assert {t["label"]: t["score"] for t in row["top"]} == pytest.approx(dict(zip(reference.classes_, p)), abs=1e-5)
    two = Classifier.fit(x[:6], [y for *_, y in TRAIN][:6])  # two labels: scikit-learn's binary model
    ref2 = LogisticRegression(max_iter=2000, C=10.0, random_state=0).fit(x[:6], [y for *_, y in TRAIN][:6])
    np.testing.assert_allclose(two.probabilities(x), ref2.predict_proba(x), atol=1e-6)


def test_bad_labelled_input_is_one_line_before_the_model_loads(tmp_path, capsys, monkeypatch):
    import hmde.cli.common

    monkeypatch.setattr(hmde.cli.common, "load_named_model", lambda *a, **k: pytest.fail("the model was loaded"))
    no_label = tmp_path / "a.jsonl"
    no_label.write_text(json.dumps({"doc_id": "x", "text": "t", "label": "a"}) + "\n" +
                        json.dumps({"doc_id": "y", "text": "u"}) + "\n")
    assert main(["classify", "train", "hmde-mini", str(no_label), "-o", str(tmp_path / "c")]) == 2
    assert capsys.readouterr().err.strip() == f"hmde: error: {no_label}, line 2, field 'label': missing field (use " \
        "--label-field to name another)"
    one = write(tmp_path / "b.jsonl", TRAIN[:3])
    assert main(["classify", "train", "hmde-mini", str(one), "-o", str(tmp_path / "c")]) == 2
    assert "at least two labels" in capsys.readouterr().err
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "x.txt").write_text("keep")
    assert main(["classify", "train", "hmde-mini", str(write(tmp_path / "t.jsonl", TRAIN)), "-o", str(mine)]) == 2
    assert "is not an hmde classifier" in capsys.readouterr().err
    assert main(["classify", "predict", str(tmp_path / "none"), str(one)]) == 2
    assert "not a classifier folder" in capsys.readouterr().err


def test_predict_keeps_to_the_labels_asked_and_both_commands_show_progress(tmp_path, hmde_dir, capsys):
    """Issue 57: `classify train` and `predict` were silent for tens of minutes (no bar, no --no-progress), and
    `predict` gave labels the target cannot have."""
    from hmde.classify.classifier import Classifier

    src = write(tmp_path / "train.jsonl", TRAIN)
    assert main(["classify", "train", str(hmde_dir), str(src), "-o", str(tmp_path / "clf")]) == 0
    assert "documents: 100%" in capsys.readouterr().err  # the progress bar, over the 9 documents
    docs = write(tmp_path / "new.jsonl", [("n1", "deu", "Die Katze schläft.", ""), ("n2", "fra", "La banque centrale "
                                          "a relevé ses taux.", "")], label=False)
    assert main(["classify", "predict", str(tmp_path / "clf"), str(docs), "--top-k", "3", "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "documents" not in captured.err
    full = [json.loads(line) for line in captured.out.splitlines()]
    labels = Classifier.load(tmp_path / "clf").labels
    two = labels[:2]
    assert main(["classify", "predict", str(tmp_path / "clf"), str(docs), "--top-k", "3", "--no-progress",
                 "--labels", ",".join(two)]) == 0
    kept = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    for a, b in zip(full, kept):
        assert [t["label"] for t in b["top"]] == [t["label"] for t in a["top"] if t["label"] in two]
        mass = sum(t["score"] for t in a["top"] if t["label"] in two)
        assert {t["label"]: t["score"] for t in b["top"]} == pytest.approx(
            {t["label"]: t["score"] / mass for t in a["top"] if t["label"] in two}, abs=2e-6)
    assert main(["classify", "predict", str(tmp_path / "clf"), str(docs), "--labels", "nope"]) == 2
    assert capsys.readouterr().err.strip() == f"hmde: error: --labels: the classifier has no label 'nope' (it knows " \
        f"{', '.join(labels)})"
