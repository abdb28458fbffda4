"""The sentence-level alignment stage (issue 64): LaBSE's additive-margin translation ranking, the language-pair
sampling, and a run that resumes exactly."""

from __future__ import annotations

import gzip
import json
import math

import pytest
import torch

from hmde.errors import HmdeError
from hmde.pretraining.sentence_stage import (SentenceStageConfig, SentenceStageTrainer, distillation_loss,
                                             sample_pairs, translation_ranking_loss)


def test_the_loss_is_labses_additive_margin_softmax_in_both_directions_by_hand():
    eye = torch.eye(2)
    # true pairs aligned: logits 10 x (1 - 0.3) = 7 on the diagonal, 0 elsewhere; each row -log(e^7 / (e^7 + 1))
    assert translation_ranking_loss(eye, eye, margin=0.3, scale=10.0).item() == pytest.approx(
        2 * math.log1p(math.exp(-7)), rel=1e-4)  # float32
    # each true pair orthogonal, each wrong one identical: logits -3 on the diagonal, 10 off it
    swapped = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    assert translation_ranking_loss(eye, swapped, margin=0.3, scale=10.0).item() == pytest.approx(
        2 * math.log1p(math.exp(13)), rel=1e-6)
    # the margin makes a pair that wins by less than it still cost more than one that wins by more
    close = torch.tensor([[1.0, 0.0], [0.9, 0.1]])
    assert translation_ranking_loss(close, eye, margin=0.3).item() > translation_ranking_loss(close, eye, margin=0.0).item()
    with pytest.raises(Exception, match="at least 2"):
        translation_ranking_loss(eye[:1], eye[:1])


def test_self_distillation_is_both_sides_squared_distance_to_the_teachers_english_vector_by_hand():
    teacher = torch.tensor([[1.0, 0.0], [0.0, 2.0]])  # normalised: e1, e2
    # pair 1: the other side at 90 degrees (|e2 - e1|^2 = 2), English in place (0); pair 2: other opposite (4),
    # English at 90 degrees (2): (2 + 0 + 4 + 2) / 2 = 4
    other = torch.tensor([[0.0, 3.0], [0.0, -1.0]])
    english = torch.tensor([[5.0, 0.0], [1.0, 0.0]])
    assert distillation_loss(other, english, teacher).item() == pytest.approx(4.0)
    assert distillation_loss(teacher, teacher, teacher).item() == 0.0
    # the teacher is a target, never trained
    student = other.clone().requires_grad_(True)
    target = teacher.clone().requires_grad_(True)
    distillation_loss(student, english, target).backward()
    assert target.grad is None and student.grad.abs().sum() > 0
    with pytest.raises(Exception, match="one shape"):
        distillation_loss(other, english, teacher[:1])
    with pytest.raises(Exception, match="one of them > 0"):
        SentenceStageConfig(ranking_weight=0.0, distill_weight=0.0).check()


def write_pairs(folder, name, n):
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(folder / f"{name}.tsv.gz", "wt", encoding="utf-8") as f:
        for i in range(n):
            f.write(f"{name[:3]} sentence {i}\tEnglish sentence {i} of {name}\n")


def test_language_pairs_are_sampled_by_size_to_the_power_alpha_and_held_out_languages_stay_out(tmp_path):
    tatoeba = tmp_path / "parallel" / "tatoeba"
    write_pairs(tatoeba, "aaa-eng", 1000)
    write_pairs(tatoeba, "bbb-eng", 10)
    write_pairs(tatoeba, "swh-eng", 500)  # Swahili is held out of document training
    pairs = sample_pairs(tmp_path, SentenceStageConfig(sources=["tatoeba"], pairs=100, alpha=0.3))
    # 1000 ** 0.3 = 7.94 and 10 ** 0.3 = 1.99: 79 and 20 of 100, the small file capped at its 10 pairs
    flat = [x for pair in pairs for x in pair]
    assert sum("of aaa-eng" in x for x in flat) == 79 and sum("of bbb-eng" in x for x in flat) == 10
    assert not any("swh" in x for x in flat)
    assert {"aaa", "English"} <= {x.split()[0] for x, _ in pairs}  # both directions drawn
    assert pairs == sample_pairs(tmp_path, SentenceStageConfig(sources=["tatoeba"], pairs=100, alpha=0.3))


def test_distillation_keeps_english_second_and_leaves_out_pairs_without_english(tmp_path):
    write_pairs(tmp_path / "parallel" / "tatoeba", "aaa-eng", 50)
    write_pairs(tmp_path / "parallel" / "wmt", "ccc-ddd", 50)  # no English: no teacher
    with gzip.open(tmp_path / "parallel" / "wmt" / "eng-bbb.tsv.gz", "wt", encoding="utf-8") as f:
        f.writelines(f"English line {i}\tbbb line {i}\n" for i in range(50))  # English first: turned round
    config = SentenceStageConfig(sources=["tatoeba", "wmt"], pairs=90, distill_weight=1.0)
    pairs = sample_pairs(tmp_path, config)
    assert len(pairs) == 90 and all(y.startswith("English") for _, y in pairs)
    assert {x.split()[0] for x, _ in pairs} == {"aaa", "bbb"}
    assert not any("ccc" in x for pair in pairs for x in pair)


def test_a_run_cut_off_after_a_checkpoint_resumes_to_the_same_weights(tmp_path, hmde_dir):
    from hmde.encoders.model_loading import load_model

    pairs = [(f"Satz Nummer {i} über Flüsse.", f"Sentence number {i} about rivers.") for i in range(16)]
    config = SentenceStageConfig(batch_size=4, steps=4, checkpoint_every=2, lr=1e-3, warmup=1)
    weights = []
    for cut in (None, 2):
        torch.manual_seed(0)
        model = load_model(str(hmde_dir), "cpu")[1]
        trainer = SentenceStageTrainer(model, pairs, config, tmp_path / f"run-{cut}")
        trainer.train(log=lambda *_: None, stop_at_step=cut)
        if cut:  # a new process: the model loaded afresh, the run continued from its checkpoint
            torch.manual_seed(123)
            model = load_model(str(hmde_dir), "cpu")[1]
            SentenceStageTrainer(model, pairs, config, tmp_path / f"run-{cut}").train(log=lambda *_: None)
        weights.append({k: v.clone() for k, v in model.lower.model.state_dict().items()})
    before = load_model(str(hmde_dir), "cpu")[1].lower.model.state_dict()
    assert any(not torch.equal(weights[0][k], before[k]) for k in before)  # it trained
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    from hmde.pretraining.sentence_stage import apply_checkpoint

    fresh = load_model(str(hmde_dir), "cpu")[1]  # a run measured from its last checkpoint: the same weights
    assert apply_checkpoint(fresh, tmp_path / "run-2" / "checkpoint") == 4
    assert all(torch.equal(v, weights[1][k]) for k, v in fresh.lower.model.state_dict().items())
    log = (tmp_path / "run-2" / "log.jsonl").read_text().splitlines()
    assert [int(x.split('"step": ')[1].split(",")[0]) for x in log] == [1, 2, 3, 4]


def test_title_pairs_join_a_title_to_another_languages_page_of_its_concept_and_keep_held_out_languages_out(tmp_path):
    from hmde.pretraining.sentence_stage import sample_title_pairs

    folder = tmp_path / "docs" / "gnome"
    folder.mkdir(parents=True)
    # c4 is in the development slice (the README's keyword rows): in two languages, and never a pair
    pages = {"eng": [("c1", "Printing", "How to print a page."), ("c2", "Only English", "No other language."),
                     ("c4", "Scanning", "How to scan a page.")],
             "deu": [("c1", "Drucken", "So drucken Sie eine Seite."), ("c3", "Nur hier", "Sonst nur Estnisch."),
                     ("c4", "Scannen", "So scannen Sie eine Seite.")],
             "est": [("c1", "Printimine", "Kuidas lehte printida."), ("c3", "Ainult siin", "Eesti keeles.")]}
    for lang, rows in pages.items():
        with gzip.open(folder / f"{lang}.jsonl.gz", "wt", encoding="utf-8") as f:
            for concept, title, text in rows:
                f.write(json.dumps({"concept": concept, "lang": lang, "title": title, "text": text}) + "\n")
    # Estonian is held out of document training: c3 is left in one language and drops, c1 has English and German
    for seed in range(6):
        assert sample_title_pairs(tmp_path, 0.0, seed=seed) in ([("Printing", "So drucken Sie eine Seite.")],
                                                                [("Drucken", "How to print a page.")])
        assert sample_title_pairs(tmp_path, 1.0, seed=seed) in ([("Printing", "How to print a page.")],
                                                                [("Drucken", "So drucken Sie eine Seite.")])
    assert sample_title_pairs(tmp_path, 0.0, max_chars=6, seed=0)[0][1] in ("So dru", "How to")
    with pytest.raises(HmdeError, match="no concept in two languages"):
        sample_title_pairs(tmp_path, 0.0, sources=("tldr",))
    with pytest.raises(HmdeError, match="mono_share must be in"):
        sample_title_pairs(tmp_path, 1.5)


def test_the_development_slice_is_a_third_of_the_concepts_by_a_hash_of_source_and_concept():
    from hmde.pretraining.sentence_stage import dev_concept

    # the first 8 bytes of sha256("gnome/c4"), big-endian, mod 3 are 0 (checked by hand with hashlib)
    assert [c for c in ("c1", "c2", "c3", "c4", "c5", "c6") if dev_concept("gnome", c)] == ["c4", "c6"]
    # the source is part of the key: c1 is a development concept of LibreOffice's, not of GNOME's or tldr's
    assert [dev_concept(source, "c1") for source in ("libreoffice", "gnome", "tldr")] == [True, False, False]
    share = sum(dev_concept("libreoffice", f"page-{k}") for k in range(3000)) / 3000
    assert abs(share - 1 / 3) < 0.03


def test_neighbour_pairs_join_a_sentence_to_the_line_next_to_it_and_keep_short_lines_and_held_out_languages_out(
        tmp_path):
    from hmde.pretraining.sentence_stage import sample_neighbour_pairs

    folder = tmp_path / "parallel" / "wmt"
    folder.mkdir(parents=True)
    lines = [("Titel", "Title")] + [(f"Der deutsche Satz Nummer {k}.", f"The English sentence number {k}.")
                                    for k in range(1, 9)] + [("Ende", "End")]
    with gzip.open(folder / "deu-eng.tsv.gz", "wt", encoding="utf-8") as f:
        f.writelines(f"{x}\t{y}\n" for x, y in lines)
    with gzip.open(folder / "eng-est.tsv.gz", "wt", encoding="utf-8") as f:  # Estonian: held out
        f.writelines(f"English line {k} of a held-out file.\tEesti rida {k} heldoutis.\n" for k in range(10))
    index = {text: (k, side) for k, pair in enumerate(lines) for side, text in enumerate(pair)}
    for mono in (0.0, 1.0):
        pairs = sample_neighbour_pairs(tmp_path, pairs=100, mono_share=mono, seed=3)
        # lines 1..8 are queries, each once; where line 1 or 8 drew the short line 0 or 9 as its passage, it drops
        assert 6 <= len(pairs) <= 8 and len({q for q, _ in pairs}) == len(pairs)
        for query, passage in pairs:
            (k, side), (j, other) = index[query], index[passage]
            assert abs(k - j) == 1 and 1 <= min(k, j) and max(k, j) <= 8
            assert (other == side) == (mono == 1.0)
    with pytest.raises(HmdeError, match="mono_share must be in"):
        sample_neighbour_pairs(tmp_path, mono_share=-0.1)


def test_span_pairs_join_two_consecutive_lines_on_both_sides_beside_their_parts_and_skip_the_dev_lines(tmp_path):
    from hmde.pretraining.sentence_stage import sample_span_pairs, sample_stage_pairs

    folder = tmp_path / "parallel" / "wmt"
    folder.mkdir(parents=True)
    lines = [(f"Der deutsche Satz Nummer {k}.", f"The English sentence number {k}.") for k in range(12)]
    lines[7] = ("Satz ohne Übersetzung.", " ")  # an empty side: no span starts at 6 or 7
    with gzip.open(folder / "deu-eng.tsv.gz", "wt", encoding="utf-8") as f:
        f.writelines(f"{x}\t{y}\n" for x, y in lines)
    with gzip.open(folder / "eng-est.tsv.gz", "wt", encoding="utf-8") as f:  # Estonian: held out
        f.writelines(f"English line {k}.\tEesti rida {k}.\n" for k in range(12))
    index = {text: (k, side) for k, pair in enumerate(lines) for side, text in enumerate(pair)}
    pairs = sample_span_pairs(tmp_path, spans=100, seed=5, skip=3)
    # starts 3, 4, 5, 8, 9, 10 (6 and 7 touch the empty side; 0-2 are the dev lines), no line in two spans: 2 to 4
    # spans, each with its two parts, every pair once
    spans = [p for p in pairs if p[0].count(".") == 2]
    assert 2 <= len(spans) <= 4 and len(pairs) == 3 * len(spans) == len(set(pairs))
    lines_used = []
    for x, y, lang in spans:
        first, second = x.split(". ")
        k, side = index[first + "."]
        assert (k + 1, side) == index[second] and k in (3, 4, 5, 8, 9, 10)
        assert y == f"{lines[k][1 - side]} {lines[k + 1][1 - side]}"  # span_text: joined by one space
        assert lang == ("eng" if side == 0 else "deu")  # the y side's language
        assert (lines[k][side], lines[k][1 - side], lang) in pairs and (lines[k + 1][side], lines[k + 1][1 - side],
                                                                        lang) in pairs
        lines_used += [k, k + 1]
    assert len(lines_used) == len(set(lines_used))
    assert not any("Eesti" in x + y for x, y, _ in pairs)
    assert pairs == sample_span_pairs(tmp_path, spans=100, seed=5, skip=3)  # seeded
    longer = tmp_path / "longer"
    (longer / "parallel" / "wmt").mkdir(parents=True)
    with gzip.open(longer / "parallel" / "wmt" / "deu-eng.tsv.gz", "wt", encoding="utf-8") as f:
        f.writelines(f"Satz {k}.\tSentence {k}.\n" for k in range(124))
    mixed = sample_stage_pairs(longer, SentenceStageConfig(pairs=4), {"spans": 0.5}, with_languages=True)
    # 0.5 x 4 pairs: 2 spans, from lines 120-123 alone (the first 120 are the alignment dev documents' by default)
    assert len(mixed) == 6 and {int(t.split()[-1].strip(".")) for p in mixed for t in p[:2]} == {120, 121, 122, 123}
    assert len(sample_span_pairs(tmp_path, spans=1, seed=5, skip=3)) == 3


def test_merged_span_pairs_write_the_translation_as_one_sentence_by_hand(tmp_path):
    from hmde.pretraining.sentence_stage import as_one_sentence, sample_span_pairs

    assert as_one_sentence("He came home.", "She left.") == "He came home, She left."
    assert as_one_sentence('"Stop!"', "he said.") == '"Stop," he said.'  # the closing quote kept
    assert as_one_sentence("他回家了。", "她走了。") == "他回家了，她走了。"  # CJK: an ideographic comma, no space
    assert as_one_sentence("यह है।", "वह गया।") == "यह है, वह गया।"  # the danda
    assert as_one_sentence("no end", "next") == "no end, next"
    folder = tmp_path / "parallel" / "wmt"
    folder.mkdir(parents=True)
    with gzip.open(folder / "deu-eng.tsv.gz", "wt", encoding="utf-8") as f:
        f.writelines(f"Satz {k}.\tSentence {k}.\n" for k in range(8))
    pairs = sample_span_pairs(tmp_path, spans=2, seed=1, skip=0, merged=True)
    merged = [(x, y) for x, y, _ in pairs if x.count(".") == 2]
    assert len(merged) == 2 and len(pairs) == 6
    for x, y in merged:  # x two sentences, y their translation as one: "Satz 3. Satz 4." -> "Sentence 3, Sentence 4."
        first, second = (int(t.split()[-1]) for t in x.rstrip(".").split(". "))
        assert second == first + 1 and y.count(".") == 1 and y.count(",") == 1
        assert y in (f"Sentence {first}, Sentence {second}.", f"Satz {first}, Satz {second}.")


def test_heading_pairs_join_a_heading_to_the_paragraph_under_it_in_another_language(tmp_path):
    from hmde.pretraining.sentence_stage import sample_heading_pairs

    folder = tmp_path / "docs" / "gnome"
    folder.mkdir(parents=True)
    body_en, body_de = "Back up anything that you cannot bear to lose. " * 2, "Sichern Sie alles, was Ihnen wichtig ist. " * 2
    pages = {"eng": ["What to back up", body_en, "A short sentence.", body_en + "Twice."],
             "deu": ["Was gesichert werden sollte", body_de, "Ein kurzer Satz.", body_de + "Zweimal."],
             "fra": ["Une page d'une autre longueur", body_en],  # other paragraphs: no position to trust
             "est": ["Mida varundada", body_de, "Lühike lause.", body_de]}  # Estonian: held out
    with gzip.open(folder / "all.jsonl.gz", "wt", encoding="utf-8") as f:
        for lang, paragraphs in pages.items():
            f.write(json.dumps({"concept": "c1", "lang": lang, "paragraphs": paragraphs}) + "\n")
            # the same page as c4, a development concept: none of its headings is a pair
            f.write(json.dumps({"concept": "c4", "lang": lang, "paragraphs": paragraphs}) + "\n")
    # one heading position (0): "A short sentence." ends in a full stop and is not a heading
    for seed in range(4):
        pairs = sample_heading_pairs(tmp_path, 0.0, seed=seed, max_chars=50)
        assert pairs in ([("What to back up", body_de.strip()[:50])], [("Was gesichert werden sollte", body_en[:50])])
        assert sample_heading_pairs(tmp_path, 1.0, seed=seed, max_chars=50) in (
            [("What to back up", body_en[:50])], [("Was gesichert werden sollte", body_de[:50])])
    with pytest.raises(HmdeError, match="no heading in two languages"):
        sample_heading_pairs(tmp_path, 0.0, min_passage_chars=500)


def _close(a, b, rel=1e-3):  # a gradient within ``rel`` of the other's norm (or both about zero)
    return float((a - b).norm()) <= rel * float(b.norm()) + 1e-9


def _gradients(trainer):
    out = {n: p.grad.clone() for n, p in trainer.module.named_parameters() if p.grad is not None}
    trainer.module.zero_grad(set_to_none=True)
    return out


def test_gradient_caching_gives_the_whole_batchs_gradient_a_chunk_at_a_time(tmp_path, hmde_dir):
    """``ranking_chunk`` (issue 64: a batch of 128 on CPUs): the loss over the whole batch, the encoder run two
    texts at a time. Without dropout its gradient is the single pass's; with dropout each chunk's draws are
    replayed, so it is the gradient of the loss on the chunks' own vectors (a replay with other draws would differ)."""
    from hmde.encoders.model_loading import load_model

    pairs = [(f"Satz Nummer {i} über Flüsse und Berge.", f"Sentence {i} about rivers.") for i in range(6)]
    model = load_model(str(hmde_dir), "cpu")[1]
    settings = dict(batch_size=6, margin=0.3, scale=20.0)  # LaBSE's: a margin in the loss, checked below by hand
    plain = SentenceStageTrainer(model, pairs, SentenceStageConfig(**settings), tmp_path / "a")
    cached = SentenceStageTrainer(model, pairs, SentenceStageConfig(**settings, ranking_chunk=2), tmp_path / "b")
    batch = plain.batch(0)
    lower = plain.lower

    # in float64: the tiny random encoder's vectors lie so close together that the loss's gradient is a small
    # difference of large terms, and float32's other order of summation moves it by up to 1%
    plain.module.eval().double()
    reference_loss = plain.loss(batch)
    reference_loss.backward()
    reference = _gradients(plain)
    loss = cached.cached_backward(batch)
    assert loss.item() == pytest.approx(reference_loss.item(), rel=1e-5)
    got = _gradients(cached)
    assert set(got) == set(reference) and len(got) > 0
    for name, grad in reference.items():
        assert _close(got[name], grad, rel=1e-4), name
    plain.module.float()

    plain.module.train()  # dropout on: two passes of one text differ
    ids = [lower.token_ids(["Satz Nummer 1 über Flüsse und Berge."], prompt=None)[0]]
    with torch.no_grad():
        assert not torch.equal(lower.embed_ids(ids), lower.embed_ids(ids))

    def chunked():  # the chunks' order: every query chunk, then every passage chunk
        vectors = []
        for texts, role in (([q for q, _ in batch], "query"), ([p for _, p in batch], None)):
            token_ids = lower.token_ids(texts, prompt=lower.prompt_for(role))
            vectors.append(torch.cat([lower.embed_ids(token_ids[k:k + 2], normalized=True).float()
                                      for k in range(0, len(batch), 2)]))
        return translation_ranking_loss(*vectors, margin=0.3, scale=20.0)

    torch.manual_seed(7)
    chunked().backward()
    reference = _gradients(plain)
    torch.manual_seed(7)
    cached.cached_backward(batch)
    got = _gradients(cached)
    for name, grad in reference.items():
        assert _close(got[name], grad), name
    with pytest.raises(HmdeError, match="ranking_chunk"):
        SentenceStageConfig(ranking_chunk=-1).check()
    with pytest.raises(HmdeError, match="distill_weight 0"):
        SentenceStageConfig(ranking_chunk=8, distill_weight=1.0).check()


def test_the_stages_defaults_are_hmde_e5s_shipped_stage_titles_headings_and_translations_shuffled_together(tmp_path):
    from hmde.pretraining.sentence_stage import sample_stage_pairs, sample_title_pairs

    folder = tmp_path / "docs" / "gnome"
    folder.mkdir(parents=True)
    body_en, body_de = "Back up anything that you cannot bear to lose. " * 2, "Sichern Sie alles, was Ihnen wichtig ist. " * 2
    with gzip.open(folder / "all.jsonl.gz", "wt", encoding="utf-8") as f:
        for lang, title, body in (("eng", "What to back up", body_en), ("deu", "Was gesichert werden sollte", body_de)):
            f.write(json.dumps({"concept": "c1", "lang": lang, "title": title, "text": body,
                                "paragraphs": [title, body]}) + "\n")
    write_pairs(tmp_path / "parallel" / "tatoeba", "aaa-eng", 3)
    config = SentenceStageConfig()
    assert (config.scale, config.margin, config.lower_trainable, config.steps, config.max_tokens, config.pairs) == (
        100.0, 0.0, "no-embeddings", 160, 96, 8000)
    # one title pair and one heading pair, both across languages, and the 3 translation pairs there are
    pairs = sample_stage_pairs(tmp_path, config)
    assert len(pairs) == 5 and sum("of aaa-eng" in x + y for x, y in pairs) == 3
    queries = [x for x, y in pairs if "of aaa-eng" not in x + y]
    assert len(queries) == 2 and set(queries) <= {"What to back up", "Was gesichert werden sollte"}
    assert sample_title_pairs(tmp_path, 0.3, seed=0)[0] in pairs
    assert pairs == sample_stage_pairs(tmp_path, config)  # seeded
    assert sample_stage_pairs(tmp_path, config, {"titles": 0.3}) == sample_title_pairs(tmp_path, 0.3, seed=0)
    with pytest.raises(HmdeError, match="pair kinds must be some of titles, headings, neighbours, translations, "
                                        "spans, merges, udhr, bible; got sentences"):
        sample_stage_pairs(tmp_path, config, {"sentences": 0.3})


def test_the_command_trains_the_lower_encoder_on_title_pairs_resumes_and_names_bad_input(tmp_path, hmde_dir, capsys):
    from hmde.cli.main import main
    from hmde.encoders.model_loading import load_model

    folder = tmp_path / "data" / "docs" / "gnome"
    folder.mkdir(parents=True)
    titles = {"eng": ["Printing", "Scanning", "Sound", "Wi-Fi", "Email", "Files"],
              "deu": ["Drucken", "Scannen", "Ton", "WLAN", "E-Mail", "Dateien"]}
    for lang, names in titles.items():
        with gzip.open(folder / f"{lang}.jsonl.gz", "wt", encoding="utf-8") as f:
            for k, title in enumerate(names, 1):
                f.write(json.dumps({"concept": f"c{k}", "lang": lang, "title": title,
                                    "text": f"{title}: a page about it, number {k}."}) + "\n")
    out = tmp_path / "run"
    command = ["sentence-stage", str(hmde_dir), "--data", str(tmp_path / "data"), "-o", str(out), "--pairs-from",
               "titles", "--steps", "2", "--batch-size", "2", "--lr", "1e-3", "--warmup", "1", "--device", "cpu"]
    assert main(command) == 0
    assert "4 pairs (titles); 2 steps of 2" in capsys.readouterr().out  # c4 and c6: the development slice
    trained = load_model(str(out / "model"), "cpu")[1].lower.model.state_dict()
    before = load_model(str(hmde_dir), "cpu")[1].lower.model.state_dict()
    assert any(not torch.equal(trained[k], before[k]) for k in before)
    assert json.loads((out / "config.json").read_text())["steps"] == 2
    assert main(command) == 0  # a rerun resumes at its last checkpoint: no step trained again
    assert len((out / "log.jsonl").read_text().splitlines()) == 2
    assert main(command[:3] + [str(tmp_path / "nothing")] + command[4:]) == 2
    assert "nothing: no such folder (--data" in capsys.readouterr().err
    assert main(command[:7] + ["titles,sentences"] + command[8:]) == 2
    assert "--pairs-from: sentences; the kinds are titles, headings, neighbours, translations, spans, merges, udhr, " \
        "bible" in capsys.readouterr().err
    assert json.loads((out / "pairs.json").read_text()) == {"kinds": {"titles": 0.3}, "pairs": 4}
    assert main(command + ["--mono-share", "0.5"]) == 2  # the same run folder on other pairs: refused
    assert "pairs.json: this run trained on {'kinds': {'titles': 0.3}, 'pairs': 4}, not" in capsys.readouterr().err


def test_the_model_cards_stage_3_line_reads_the_runs_settings_pairs_and_time_across_restarts(tmp_path):
    from hmde.recipes.e5_card import sentence_stage_note

    assert sentence_stage_note(tmp_path) == ""  # no stage 3: no line
    (tmp_path / "config.json").write_text(json.dumps(vars(SentenceStageConfig(steps=3))))
    (tmp_path / "pairs.json").write_text(json.dumps({"kinds": {"titles": 0.3, "translations": 0.3}, "pairs": 99}))
    (tmp_path / "log.jsonl").write_text("".join(json.dumps({"step": k, "loss": 1.0, "seconds": t}) + "\n"
                                               for k, t in ((1, 30.0), (2, 60.0), (3, 18.0))))  # resumed before 3
    note = sentence_stage_note(tmp_path)
    assert "pairs: titles (0.3 in one language), translations, 99 of them; scale 100.0 and margin 0.0" in note
    assert "3 steps of 3, 1.3 minutes (logged)" in note  # 60 s before the restart and 18 s after
