"""A routed encoder (issue 80): a lower encoder trained for some languages alone, its vectors of them pulled into
the starting model's space (``english_side="teacher"``: the frozen starting model embeds the English side), so
that every other language keeps the starting model's vectors exactly."""

from __future__ import annotations

import gzip
import json

import pytest
import torch

from hmde.errors import HmdeError
from hmde.pretraining.sentence_stage import SentenceStageConfig, SentenceStageTrainer, translation_ranking_loss


def test_the_loss_pulls_the_other_side_to_the_teachers_english_vectors_and_trains_nothing_else(tmp_path, hmde_dir):
    from hmde.encoders.model_loading import load_model

    pairs = [(f"Kiche tzij {i} ri ja'.", f"English sentence {i} about rivers.") for i in range(8)]
    config = SentenceStageConfig(batch_size=4, steps=2, checkpoint_every=2, lr=1e-3, warmup=1, english_side="teacher",
                                 distill_weight=0.5, ranking_weight=1.0)
    trainer = SentenceStageTrainer(load_model(str(hmde_dir), "cpu")[1], pairs, config, tmp_path / "run")
    start = load_model(str(hmde_dir), "cpu")[1].lower
    start.model.eval()
    trainer.module.eval()  # no dropout: the loss by hand

    def vectors(encoder, texts, role):
        ids = [i[:config.max_tokens] for i in encoder.token_ids(texts, prompt=encoder.prompt_for(role))]
        return encoder.embed_ids(ids, normalized=True).float()

    batch = trainer.batch(0)
    with torch.no_grad():
        for step, role in ((0, "query"), (1, None)):  # one role a step, in turn
            a, t = vectors(start, [x for x, _ in batch], role), vectors(start, [y for _, y in batch], role)
            expected = 0.5 * (a - t).pow(2).sum(-1).mean() + translation_ranking_loss(a, t, 0.0, 100.0)
            assert float(trainer.loss(batch, step)) == pytest.approx(float(expected), rel=1e-5)
    before = {k: v.clone() for k, v in trainer.teacher.model.state_dict().items()}
    trainer.train(log=lambda *_: None)
    assert all(torch.equal(before[k], v) for k, v in trainer.teacher.model.state_dict().items())  # frozen
    assert any(not torch.equal(before[k], v) for k, v in trainer.module.state_dict().items())  # the student moved
    with torch.no_grad():  # the English side of a later loss is still the starting model's
        trainer.module.eval()
        a = vectors(trainer.lower, [x for x, _ in batch], None)
        t = vectors(start, [y for _, y in batch], None)
        expected = 0.5 * (a - t).pow(2).sum(-1).mean() + translation_ranking_loss(a, t, 0.0, 100.0)
        assert float(trainer.loss(batch, 1)) == pytest.approx(float(expected), rel=1e-5)


def test_settings_a_routed_encoder_cannot_use_are_refused_before_anything_runs():
    for kwargs, message in [({"english_side": "both"}, "english_side must be student or teacher"),
                            ({"english_side": "teacher", "roles": "by-kind"}, "set hard_negatives 0, ranking_chunk 0"),
                            ({"english_side": "teacher", "ranking_chunk": 4}, "english_side teacher")]:
        with pytest.raises(HmdeError, match=message):
            SentenceStageConfig(**kwargs).check()


def routed_command(tmp_path, hmde_dir, out, languages) -> list[str]:
    """UDHR's 30 articles in each of ``languages`` ((code, word)) under tmp_path/data; the command that trains a
    routed encoder for quc on them (2 steps)."""
    for lang, word in languages:
        path = tmp_path / "data" / "docs" / "udhr" / f"{lang}.jsonl.gz"
        path.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.writelines(json.dumps({"concept": f"udhr.{n}", "lang": lang, "text": f"{word} article {n}."}) + "\n"
                         for n in range(1, 31))
    return ["sentence-stage", str(hmde_dir), "--data", str(tmp_path / "data"), "-o", str(out), "--pairs-from",
            "udhr", "--steps", "2", "--batch-size", "4", "--english-side", "teacher", "--languages", "quc",
            "--device", "cpu"]


def test_the_command_trains_a_routed_encoder_for_the_languages_named_and_writes_its_route(tmp_path, hmde_dir, capsys):
    from hmde.cli.main import main

    out = tmp_path / "run"
    command = routed_command(tmp_path, hmde_dir, out, (("eng", "English"), ("quc", "Kiche"), ("deu", "German")))
    assert main(command) == 0
    assert "22 pairs (udhr)" in capsys.readouterr().out  # quc's 22 articles outside the development slice; not deu
    assert json.loads((out / "model" / "route.json").read_text()) == {"starting_model": str(hmde_dir),
                                                                       "languages": ["quc"]}
    assert json.loads((out / "pairs.json").read_text())["languages"] == ["quc"]
    assert main(command[:command.index("--english-side")] + ["--languages", "quc", "-o", str(tmp_path / "b")]) == 2
    assert "--languages is for --english-side teacher" in capsys.readouterr().err
    assert main(command[:command.index("--languages")] + ["-o", str(tmp_path / "c")]) == 2
    assert "--english-side teacher needs --languages" in capsys.readouterr().err
    assert main(command[:-3] + ["weak-unseen", "-o", str(tmp_path / "d")]) == 2  # a test model has no table
    assert "has no measured language table" in capsys.readouterr().err


def test_select_route_trains_without_the_validation_slice_and_writes_the_route_it_chose(tmp_path, hmde_dir, capsys):
    from hmde.cli.main import main

    out = tmp_path / "run"
    command = routed_command(tmp_path, hmde_dir, out, (("eng", "English"), ("quc", "Kiche"))) + ["--select-route"]
    assert main(command) == 0
    printed = capsys.readouterr().out
    assert "16 pairs (udhr)" in printed  # the 22 articles outside the development slice, less the validation 6
    route = json.loads((out / "model" / "route.json").read_text())
    assert route["trained_for"] == ["quc"] and set(route["validation"]) == {"quc"}
    row = route["validation"]["quc"]
    assert route["languages"] == (["quc"] if row["routed"] > row["base"] else [])
    assert f"route: {len(route['languages'])} of the 1 languages" in printed
    assert json.loads((out / "pairs.json").read_text())["validation_slice"] == "held out"
    assert main(command[:command.index("--english-side")] + ["--select-route", "-o", str(tmp_path / "b")]) == 2
    assert "--select-route is for --english-side teacher" in capsys.readouterr().err
