"""Hard negatives for the translation encoder's stage (issue 79): the loss's extra columns, the positive-aware
mining within a language, a run that mines once and resumes on the same negatives, and the document role."""

from __future__ import annotations

import gzip
import json
import math

import numpy as np
import pytest
import torch

from hmde.errors import HmdeError
from hmde.pretraining.hard_negatives import FILE, folded, mine
from hmde.pretraining.sentence_stage import SentenceStageTrainer, translation_ranking_loss
from hmde.pretraining.sentence_stage_config import SentenceStageConfig


def test_hard_negatives_are_more_columns_of_the_x_to_y_softmax_only_by_hand():
    eye = torch.eye(2)
    # no negative: each row -log(e^7 / (e^7 + 1)), both directions
    assert translation_ranking_loss(eye, eye, 0.3, 10.0).item() == pytest.approx(2 * math.log1p(math.exp(-7)), rel=1e-4)
    # a negative equal to x_0 (logit 10 in row 0, 0 in row 1) and one opposite to both:
    # x -> y row 0: -log(e^7 / (e^7 + e^0 + e^10 + e^h)); row 1: -log(e^7 / (e^7 + e^0 + e^0 + e^h)); y -> x as before
    negatives = torch.tensor([[1.0, 0.0], [-1.0, -1.0]])  # the second: cosine -1/sqrt(2) to both x, logit -7.07
    h = -10 / math.sqrt(2)
    row0 = -math.log(math.exp(7) / (math.exp(7) + 1 + math.exp(10) + math.exp(h)))
    row1 = -math.log(math.exp(7) / (math.exp(7) + 1 + 1 + math.exp(h)))
    backward = math.log1p(math.exp(-7))
    got = translation_ranking_loss(eye, eye, 0.3, 10.0, negatives).item()
    assert got == pytest.approx((row0 + row1) / 2 + backward, rel=1e-5)


def unit(rows):
    rows = np.asarray(rows, np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_mining_takes_the_nearest_other_y_of_the_language_below_the_ceiling_and_not_the_same_sentence():
    x = unit([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0]])
    y = unit([[1, 0.1, 0], [0.2, 1, 0], [0, 0.1, 1], [1, 0.9, 0]])
    languages = ["deu", "deu", "deu", "fra"]
    texts = ["Ein Satz.", "Zwei Sätze", "drei", "Un"]
    got = mine(x, y, languages, texts, k=1, ceiling=0.95)
    # pair 0 (x along e1): deu candidates y1 (cos 0.196), y2 (0); y3 is French -> y1
    # pair 1 (x along e2): y0 (0.0995), y2 (0.0995 too, the first by index) -> y0
    # pair 2: y1 (0) vs y0 (0): the tie goes to the lower index -> y0; pair 3: alone in French -> the whole pile
    assert got[0] == [1] and got[1] == [0] and got[2] == [0]
    assert len(got[3]) == 1 and got[3][0] != 3
    # a candidate above the ceiling (cos of x0 to y1 raised over 0.95 x its own) is skipped, as is the same sentence
    y2 = y.copy()
    y2[1] = unit([[1, 0.12, 0]])[0]
    assert mine(x, y2, languages, texts, k=1, ceiling=0.95)[0] == [2]
    assert mine(x, y, languages, ["Ein Satz.", "ein  satz", "drei", "Un"], k=1)[0] == [2]
    assert folded("Don't worry, be happy!") == folded("dont worry be HAPPY")
    assert mine(x, y, languages, texts, k=2)[0] == [1, 2]
    # every candidate over the ceiling: drawn ones, the pair's language first
    drawn = mine(x, y, languages, texts, k=1, ceiling=0.01)
    assert drawn[0][0] in (1, 2) and drawn[1][0] in (0, 2) and drawn[3][0] in (0, 1, 2)
    with pytest.raises(HmdeError, match="as many"):
        mine(x, y[:3], languages, texts)


def test_settings_are_checked_before_anything_runs():
    for kwargs, message in [({"roles": "both"}, "roles must be one of query-document, document, by-kind"),
                            ({"hard_negatives": -1}, "hard_negatives must be >= 0"),
                            ({"negative_ceiling": 1.5}, r"negative_ceiling must be in \(0, 1\]"),
                            ({"hard_negatives": 1, "ranking_chunk": 2}, "in one pass"),
                            ({"roles": "by-kind", "distill_weight": 1.0}, "roles by-kind is for the ranking loss alone"),
                            ({"roles": "document", "distill_weight": 0.5}, "roles document is for the ranking")]:
        with pytest.raises(HmdeError, match=message):
            SentenceStageConfig(**kwargs).check()


def test_a_run_mines_once_resumes_on_the_same_negatives_and_embeds_both_sides_as_documents(tmp_path, hmde_dir):
    from hmde.encoders.model_loading import load_model

    pairs = [(f"Satz Nummer {i} über Flüsse.", f"Sentence number {i} about rivers.") for i in range(12)]
    languages = ["eng"] * 12
    config = SentenceStageConfig(batch_size=4, steps=4, checkpoint_every=2, lr=1e-3, warmup=1, hard_negatives=1,
                                 roles="document")
    with pytest.raises(HmdeError, match="y language of every pair"):
        SentenceStageTrainer(load_model(str(hmde_dir), "cpu")[1], pairs, config, tmp_path / "x")
    weights = []
    for cut in (None, 2):
        model = load_model(str(hmde_dir), "cpu")[1]
        trainer = SentenceStageTrainer(model, pairs, config, tmp_path / f"run-{cut}", languages)
        seen = []
        trainer._ids = (lambda ids: lambda texts, role: seen.append(role) or ids(texts, role))(trainer._ids)
        trainer.train(log=lambda *_: None, stop_at_step=cut)
        assert set(seen) == {None}  # roles="document": x embedded as y is, no query prompt
        if cut:
            stored = json.loads((tmp_path / "run-2" / FILE).read_text())
            model = load_model(str(hmde_dir), "cpu")[1]
            resumed = SentenceStageTrainer(model, pairs, config, tmp_path / "run-2", languages)
            resumed.train(log=lambda *_: None)
            assert resumed.negatives == stored["negatives"]
        weights.append({k: v.clone() for k, v in model.lower.model.state_dict().items()})
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    negatives = json.loads((tmp_path / "run-None" / FILE).read_text())["negatives"]
    assert all(len(row) == 1 and row[0] != i for i, row in enumerate(negatives))
    assert trainer.negative_texts(0) == [pairs[row[0]][1] for row in negatives[:4]]
    other = [(x, y + " !") for x, y in pairs]  # the same folder on other pairs: refused
    with pytest.raises(HmdeError, match="mined for other pairs or settings"):
        SentenceStageTrainer(load_model(str(hmde_dir), "cpu")[1], other, config, tmp_path / "run-2",
                             languages).train(log=lambda *_: None)


def test_the_command_mines_hard_negatives_for_translations_only(tmp_path, hmde_dir, capsys):
    from hmde.cli.main import main

    folder = tmp_path / "data" / "parallel" / "tatoeba"
    folder.mkdir(parents=True)
    with gzip.open(folder / "deu-eng.tsv.gz", "wt", encoding="utf-8") as f:
        for i in range(10):
            f.write(f"Satz {i} über Flüsse.\tSentence {i} about rivers.\n")
    out = tmp_path / "run"
    command = ["sentence-stage", str(hmde_dir), "--data", str(tmp_path / "data"), "-o", str(out), "--pairs-from",
               "translations", "--pairs", "8", "--steps", "2", "--batch-size", "4", "--hard-negatives", "1",
               "--roles", "document", "--device", "cpu"]
    assert main(command) == 0
    assert "mining 1 hard negative(s) for each of 8 pairs" in capsys.readouterr().out
    assert json.loads((out / "config.json").read_text())["roles"] == "document"
    assert main(command[:7] + ["titles"] + command[8:]) == 2
    assert "--hard-negatives needs pairs that know their languages: --pairs-from some of translations, spans, " \
        "merges, udhr, bible" in capsys.readouterr().err
    by_kind = command[:command.index("--hard-negatives")] + ["--roles", "by-kind", "--device", "cpu"]
    assert main(by_kind[:5] + [str(tmp_path / "by-kind")] + by_kind[6:]) == 0  # the command gives the languages
    assert json.loads((tmp_path / "by-kind" / "config.json").read_text())["roles"] == "by-kind"


def test_a_run_written_before_the_new_settings_resumes_with_their_defaults(tmp_path, hmde_dir):
    from hmde.encoders.model_loading import load_model
    from hmde.training.checkpoint import STATE_FILE, load_checkpoint, save_checkpoint

    pairs = [(f"Satz {i}.", f"Sentence {i}.") for i in range(8)]
    config = SentenceStageConfig(batch_size=4, steps=4, checkpoint_every=2, lr=1e-3, warmup=1)
    run = tmp_path / "run"
    SentenceStageTrainer(load_model(str(hmde_dir), "cpu")[1], pairs, config, run).train(log=lambda *_: None,
                                                                                      stop_at_step=2)
    state = load_checkpoint(run / "checkpoint")
    for name in ("roles", "hard_negatives", "negative_ceiling"):  # as an earlier hmde wrote it
        del state["config"][name]
    save_checkpoint(run / "checkpoint", state)
    assert (run / "checkpoint" / STATE_FILE).is_file()
    SentenceStageTrainer(load_model(str(hmde_dir), "cpu")[1], pairs, config, run).train(log=lambda *_: None)
    assert len((run / "log.jsonl").read_text().splitlines()) == 4
    with pytest.raises(HmdeError, match="roles 'query-document' there, 'document' now"):
        SentenceStageTrainer(load_model(str(hmde_dir), "cpu")[1], pairs,
                             SentenceStageConfig(**{**vars(config), "roles": "document"}), run).train(log=print)


def test_by_kind_roles_embed_x_as_a_query_in_query_like_pairs_and_as_a_document_in_translation_pairs(tmp_path,
                                                                                                      hmde_dir):
    """roles="by-kind" (issue 80's tail run): a pair whose language is known (translations, udhr, bible) has its x
    embedded as a document sentence, a title or heading pair (language None) as a query; every y as a document."""
    from hmde.encoders.model_loading import load_model

    pairs = [(f"Titel {i}", f"Seite {i} über Flüsse.") if i % 3 == 0 else (f"Satz {i}.", f"Sentence {i}.")
             for i in range(8)]
    languages = [None if i % 3 == 0 else "eng" for i in range(8)]
    config = SentenceStageConfig(batch_size=4, steps=2, checkpoint_every=2, lr=1e-3, warmup=1, roles="by-kind")
    with pytest.raises(HmdeError, match="roles by-kind needs each pair's language"):
        SentenceStageTrainer(load_model(str(hmde_dir), "cpu")[1], pairs, config, tmp_path / "x")
    trainer = SentenceStageTrainer(load_model(str(hmde_dir), "cpu")[1], pairs, config, tmp_path / "run", languages)
    assert trainer.x_roles(0, 4) == ["query", None, None, "query"]
    assert trainer.x_roles(1, 4) == [None, None, "query", None]
    seen = []
    trainer._ids = (lambda ids: lambda texts, role: seen.append((role, list(texts))) or ids(texts, role))(trainer._ids)
    x_ids = trainer._x_ids([x for x, _ in pairs[:4]], trainer.x_roles(0, 4))
    assert seen == [("query", ["Titel 0", "Titel 3"]), (None, ["Satz 1.", "Satz 2."])]
    lower = trainer.lower  # each text's ids in its place, in its own role

    def ids(text, role):
        return lower.token_ids([text], prompt=lower.prompt_for(role))[0][:config.max_tokens]

    assert x_ids == [ids("Titel 0", "query"), ids("Satz 1.", None), ids("Satz 2.", None), ids("Titel 3", "query")]
    seen.clear()
    trainer.train(log=lambda *_: None)
    assert [role for role, _ in seen[:2]] == ["query", None] and seen[2][0] is None  # step 0: x's two roles, then y
    plain = SentenceStageTrainer(load_model(str(hmde_dir), "cpu")[1], pairs, SentenceStageConfig(
        batch_size=4, steps=2, roles="document"), tmp_path / "plain")
    assert plain.x_roles(0, 3) == [None, None, None]
