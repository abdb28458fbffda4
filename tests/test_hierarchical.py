import json

import numpy as np
import pytest
import torch

from hmde import HierarchicalConfig, HierarchicalEncoder, HmdeError

DOCS = [
    "The cat sat on the mat. It was a sunny day. The dog slept.",
    "Die Katze saß auf der Matte. Es war ein sonniger Tag.",
    ["Already split sentence one.", "And two."],
    "猫坐在垫子上。那是一个晴朗的日子。",
]


@pytest.fixture(scope="module")
def model(labse_dir):
    torch.manual_seed(0)
    return HierarchicalEncoder.from_sentence_encoder(str(labse_dir)).eval()


def test_shapes_and_defaults(model):
    vectors = model.encode_documents(DOCS)
    assert vectors.shape == (4, model.dim) and vectors.dtype == np.float32
    cfg = model.config
    assert (cfg.num_layers, cfg.ffn_size, cfg.dropout, cfg.layer_norm_eps, cfg.max_sentences) == (2, 2048, 0.1, 1e-12, 32)
    layer = model.upper.layers.layers[0]
    assert layer.linear1.out_features == 2048 and layer.norm1.eps == 1e-12


def test_save_and_load_are_bit_exact(model, tmp_path):
    model.save_pretrained(tmp_path / "m")
    meta = json.loads((tmp_path / "m" / "config.json").read_text())
    assert meta["model_type"] == "hmde" and (tmp_path / "m" / "lower" / "modules.json").exists()
    loaded = HierarchicalEncoder.from_pretrained(tmp_path / "m")
    for (k1, v1), (k2, v2) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert k1 == k2 and torch.equal(v1, v2), k1
    assert np.array_equal(model.encode_documents(DOCS), loaded.encode_documents(DOCS))
    assert np.array_equal(model.encode_queries(["a query"]), loaded.encode_queries(["a query"]))


def test_saved_lower_encoder_loads_without_hmde(model, tmp_path):
    from sentence_transformers import SentenceTransformer

    model.save_pretrained(tmp_path / "m")
    st = SentenceTransformer(str(tmp_path / "m" / "lower"), device="cpu")
    np.testing.assert_allclose(st.encode(["a query"]), model.encode_queries(["a query"]), atol=1e-5)


def test_queries_go_through_the_lower_encoder_only(model, labse_dir):
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(labse_dir), device="cpu").encode(["what is the cat doing?"])
    np.testing.assert_allclose(model.encode_queries(["what is the cat doing?"]), reference, atol=1e-5)


def test_batch_composition_does_not_change_a_document(model):
    alone = np.stack([model.encode_documents([d])[0] for d in DOCS])
    together = model.encode_documents(DOCS, batch_size=4)
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_presplit_input_is_taken_as_is(model):
    assert model.segment(["One. Two. Three."]) == ["One. Two. Three."]
    assert model.segment("One sentence here. Two sentences here.", "eng") == ["One sentence here.", "Two sentences here."]


def test_empty_document_gets_a_zero_vector(model):
    vectors = model.encode_documents(["", "The cat sat.", []])
    assert np.all(vectors[0] == 0) and np.all(vectors[2] == 0) and np.any(vectors[1] != 0)


def test_long_documents_are_windowed_not_cut(model):
    sentences = [f"Sentence number {i} is about cats." for i in range(70)]
    assert model.windows(70) == [(0, 32), (32, 64), (64, 70)]
    got = model.encode_documents([sentences])[0]
    parts = [model.encode_documents([sentences[a:b]])[0] for a, b in model.windows(70)]
    expected = (32 * parts[0] + 32 * parts[1] + 6 * parts[2]) / 70
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_truncate_option_keeps_first_window(labse_dir):
    model = HierarchicalEncoder.from_sentence_encoder(str(labse_dir), long_documents="truncate").eval()
    sentences = [f"Sentence number {i} is about dogs." for i in range(40)]
    np.testing.assert_allclose(
        model.encode_documents([sentences])[0], model.encode_documents([sentences[:32]])[0], atol=1e-5
    )


def test_document_token_in_mean_is_an_option(labse_dir):
    torch.manual_seed(1)
    a = HierarchicalEncoder.from_sentence_encoder(str(labse_dir)).eval()
    b = HierarchicalEncoder.from_sentence_encoder(str(labse_dir), mean_includes_doc_token=True).eval()
    b.load_state_dict(a.state_dict())
    assert not np.allclose(a.encode_documents(DOCS[:1]), b.encode_documents(DOCS[:1]))


def test_chunk_segmentation_option(labse_dir):
    model = HierarchicalEncoder.from_sentence_encoder(str(labse_dir), segmentation="chunks", max_sentence_tokens=16)
    units = model.segment("The cat sat on the mat. " * 10)
    assert len(units) > 1 and all(len(model.lower.tokenizer(u)["input_ids"]) <= 16 for u in units)


def test_training_path_has_gradients_in_both_encoders(model):
    model.train()
    try:
        out = model([["The cat sat.", "It was sunny."], ["Die Katze saß."]])
        out.pow(2).sum().backward()
        assert model.upper.doc_token.grad is not None and model.upper.doc_token.grad.abs().sum() > 0
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.lower.parameters())
    finally:
        model.zero_grad(set_to_none=True)
        model.eval()


def test_invalid_configuration_is_rejected():
    with pytest.raises(HmdeError, match="segmentation"):
        HierarchicalConfig(segmentation="paragraphs")
    with pytest.raises(HmdeError, match="unknown hmde configuration keys"):
        HierarchicalConfig.from_dict({"num_layers": 2, "bogus": 1})


def test_from_pretrained_rejects_a_sentence_encoder_folder(labse_dir):
    with pytest.raises(HmdeError, match="no config.json|not an hmde model"):
        HierarchicalEncoder.from_pretrained(labse_dir)


def test_half_precision_save_loads_close(model, tmp_path):
    model.save_pretrained(tmp_path / "fp16", dtype=torch.float16)
    loaded = HierarchicalEncoder.from_pretrained(tmp_path / "fp16")
    np.testing.assert_allclose(loaded.encode_documents(DOCS), model.encode_documents(DOCS), atol=5e-3)
    # the model that was saved is unchanged
    assert next(model.lower.parameters()).dtype == torch.float32


def test_encode_documents_reuses_the_segmentation_token_ids(hmde_dir, monkeypatch):
    model = HierarchicalEncoder.from_pretrained(hmde_dir, device="cpu")
    docs = [["The cat sleeps.", "Prices rose."], ["Die Katze schläft."]]
    reference = model.encode_units(docs).documents.detach().numpy()  # tokenizes through token_ids
    calls = []
    original = model.lower.token_ids
    monkeypatch.setattr(model.lower, "token_ids", lambda texts: calls.append(list(texts)) or original(texts))
    vectors = model.encode_documents(docs)
    assert all(not c for c in calls)  # every sentence fitted: its ids came from the length check
    np.testing.assert_allclose(vectors, reference, atol=1e-6)


def test_residual_sentences_starts_as_the_mean_and_round_trips(labse_dir, tmp_path):
    """residual_sentences (not in the paper): c_i = s_i + gate * h_i with the gate at 0, so a new
    model's document vector is the plain mean of its sentence vectors; the gate is saved."""
    import torch

    from hmde import HierarchicalEncoder
    from hmde.methods.vectorizer import DocumentVectorizer

    model = HierarchicalEncoder.from_sentence_encoder(str(labse_dir), device="cpu", residual_sentences=True)
    docs = ["The cat sat on the mat. It was sunny. The dog barked.", "Economic growth slowed. Exports fell."]
    np.testing.assert_allclose(model.encode_documents(docs), DocumentVectorizer(model, "mean").encode(docs), atol=1e-6)
    with torch.no_grad():
        model.upper.gate.fill_(0.5)
    changed = model.encode_documents(docs)
    assert not np.allclose(changed, DocumentVectorizer(model, "mean").encode(docs), atol=1e-3)
    model.save_pretrained(tmp_path / "m")
    again = HierarchicalEncoder.from_pretrained(tmp_path / "m", device="cpu")
    assert again.config.residual_sentences and float(again.upper.gate) == 0.5
    np.testing.assert_allclose(again.encode_documents(docs), changed, atol=1e-6)
    paper = HierarchicalEncoder.from_sentence_encoder(str(labse_dir), device="cpu")
    assert paper.upper.gate is None and not paper.config.residual_sentences  # the paper's design stays the default


def test_inference_leaves_every_submodule_mode_as_it_was(labse_dir):
    """encode_documents used to end with train(was_training), switching a freshly loaded sentence
    encoder into training mode: every later embedding then had dropout."""
    from hmde import HierarchicalEncoder
    from hmde.methods.vectorizer import DocumentVectorizer

    model = HierarchicalEncoder.from_sentence_encoder(str(labse_dir), device="cpu")
    before = {name: m.training for name, m in model.named_modules()}
    docs = ["The cat sat on the mat. It was sunny. The dog barked."]
    model.encode_documents(docs)
    model.encode_queries(docs)
    assert {name: m.training for name, m in model.named_modules()} == before
    mean = DocumentVectorizer(model, "mean")
    model.train()  # even a model in training mode embeds without dropout for a method
    np.testing.assert_array_equal(mean.encode(docs), mean.encode(docs))


def test_preset_paper_truncates_documents_and_sentences_from_the_command_line(tmp_path, hmde_dir):
    """Issue 16, item 1: the paper's length settings are one switch away on every command."""
    from hmde.cli.main import build_parser, main
    from hmde.cli.length_arguments import length_overrides

    sentences = [f"Sentence number {i} is here." for i in range(40)]
    src = tmp_path / "d.jsonl"
    src.write_text("".join(json.dumps({"doc_id": i, "text": " ".join(s), "lang": "en"}) + "\n"
                           for i, s in enumerate([sentences, sentences[:32]])))
    for extra, same in (([], False), (["--preset", "paper"], True), (["--long-documents", "truncate"], True),
                        (["--preset", "paper", "--long-documents", "windows"], False)):
        out = tmp_path / f"v{len(extra)}{'w' if 'windows' in extra else ''}.npy"
        assert main(["encode", str(hmde_dir), str(src), "-o", str(out), "--no-progress", *extra]) == 0
        v = np.load(out)
        assert np.allclose(v[0], v[1], atol=1e-6) == same, extra  # truncated: the first 32 sentences only
    for command in (["encode", "m", "i", "-o", "o.npy"], ["index", "build", "m", "i", "-o", "o"],
                    ["eval", "align", "m", "--data", "d", "-o", "r.json"], ["align", "m", "a", "b", "-o", "o.tsv"],
                    ["train", "m", "p.parquet", "-o", "o"]):
        args = build_parser().parse_args([*command, "--preset", "paper"])
        assert length_overrides(args) == {"long_documents": "truncate", "long_sentences": "truncate",
                                          "segmentation": "sentences"}, command


def test_training_uses_the_first_max_sentences_by_default(labse_dir):
    """The paper trains on documents truncated at 32 sentences; a 300-sentence page must not go through
    the lower encoder with gradients whole unless asked (--train-max-sentences 0)."""
    from hmde.pretraining.trainer import HmdeTrainer, PretrainingConfig

    model = HierarchicalEncoder.from_sentence_encoder(str(labse_dir))
    long_text = " ".join(f"Sentence {i} is here." for i in range(300))
    docs = {"a": (long_text, "en"), "b": (long_text, "en"), "c": ("Short. Page.", "en"), "d": ("Other.", "en")}
    pairs = [{"doc_a": "a", "doc_b": "b", "neg_a": None, "neg_b": None},
             {"doc_a": "c", "doc_b": "d", "neg_a": None, "neg_b": None}]
    counts = {}
    for limit in (None, 0, 5):
        trainer = HmdeTrainer(model, pairs, docs, PretrainingConfig(max_units=limit), "unused", show_progress=False)
        counts[limit] = len(trainer.units("a"))
    assert counts == {None: 32, 0: 300, 5: 5}


def test_recipe_preset_paper_reaches_every_hmde_train_and_eval_step(tmp_path, monkeypatch):
    """`hmde recipe mini --preset paper` passes the preset to its HMDE training and evaluation steps
    (the sentence-encoder stage has no such settings). Steps are recorded, not run."""
    import gzip

    import hmde.recipes.mini as recipe
    from hmde.cli.main import main

    data, out = tmp_path / "data", tmp_path / "run"
    for sub in ("parallel", "bible", "eval/tatoeba", "eval/pud"):
        (data / sub).mkdir(parents=True)
    (data / "eval" / "tatoeba" / "tatoeba.deu-eng.deu").write_text("x\n")
    with gzip.open(data / "eval" / "pud" / "deu.jsonl.gz", "wt") as f:
        f.write("{}\n")
    (out / "lower").mkdir(parents=True)
    (out / "lower" / "train_log.jsonl").write_text(json.dumps({"language_pairs": {"deu-eng": 10}}) + "\n")
    (out / "hmde-mini").mkdir()
    (out / "hmde-mini" / "config.json").write_text("{}")
    steps = []
    monkeypatch.setattr(recipe, "run_step", lambda name, done, argv: steps.append(argv))
    monkeypatch.setattr(recipe, "write_model_card", lambda *a, **k: None)
    assert main(["recipe", "mini", "--data", str(data), "-o", str(out), "--preset", "paper", "--device", "cpu"]) == 0
    hmde_steps = [a for a in steps if a[0] in ("train", "eval") and a[:2] != ["eval", "report"]]
    assert len(hmde_steps) >= 5 and all(a[a.index("--preset") + 1] == "paper" for a in hmde_steps)
    assert all("--preset" not in a for a in steps if a[0] == "train-sentence-encoder")


def test_a_huge_document_runs_the_upper_encoder_in_groups_of_windows_with_the_same_vectors(model, monkeypatch):
    """Issue 29: the upper encoder ran every window of a document at once, so a 2 MB document's
    activations peaked at 1.45 GB (hmde-mini; 1.07 GB in groups). Grouped, the document vectors and
    the contextualised sentences are those of one pass, and the in-place placing of windows equals
    the training path's concatenation."""
    import hmde.encoders.hierarchical as hierarchical

    torch.manual_seed(0)
    per_doc = [torch.randn(5 * model.config.max_sentences + 3, model.dim), torch.randn(7, model.dim)]
    with torch.inference_mode():
        whole, whole_sentences = model.contextualize(per_doc, return_sentences=True)
        monkeypatch.setattr(hierarchical, "UPPER_WINDOW_GROUP", 2)
        assert [len(g) for g in model._window_groups(7)] == [2, 2, 2, 1]
        grouped, grouped_sentences = model.contextualize(per_doc, return_sentences=True)
    torch.testing.assert_close(grouped, whole, rtol=0, atol=1e-6)
    for a, b in zip(grouped_sentences, whole_sentences):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    with torch.no_grad(), torch.enable_grad():  # the training path: one group, concatenated windows
        assert [len(g) for g in model._window_groups(7)] == [7]
        _, trained = model.contextualize(per_doc, return_sentences=True)
    for a, b in zip(trained, whole_sentences):
        torch.testing.assert_close(a.detach(), b, rtol=0, atol=1e-6)


@pytest.mark.parametrize("huge_text", [False, True])
def test_a_huge_document_is_embedded_group_by_group_with_the_same_vector(model, monkeypatch, huge_text):
    """Issue 29: a document's token ids, sentence vectors and the lower encoder's batches were all held
    at once (a 50 MB line: 11.9 GB). Its vector is now made one group of windows at a time: the lower
    encoder never sees more than a group's sentences, a huge string's token ids are not kept from
    segmentation, and the vector is the one-pass vector (the path that returns sentences) up to float
    summation order. Ordinary documents in the same call keep their one-pass vectors."""
    import hmde.encoders.hierarchical as hierarchical

    n = model.config.max_sentences
    long_doc = " ".join(f"Sentence number {k} talks about topic {k % 7} in the valley." for k in range(5 * n + 3))
    docs = [long_doc, "A short one. It has two sentences.", "Another short document."]
    with torch.inference_mode():
        one_pass = model.encode_documents(docs, return_sentences=True)[0]
    monkeypatch.setattr(hierarchical, "UPPER_WINDOW_GROUP", 2)
    if huge_text:
        monkeypatch.setattr(hierarchical, "STREAM_TEXT_CHARS", 1000)
    seen, kept = [], []
    embed_ids, segment = model.lower.embed_ids, model.segment
    monkeypatch.setattr(model.lower, "embed_ids", lambda ids, **kw: seen.append(len(ids)) or embed_ids(ids, **kw))
    monkeypatch.setattr(model, "segment", lambda d, l=None, ids_out=None: kept.append(ids_out is not None) or
                        segment(d, l, ids_out=ids_out))
    streamed = model.encode_documents(docs)
    np.testing.assert_allclose(streamed, one_pass, rtol=0, atol=1e-5)
    assert max(seen[1:]) <= 2 * n and len(seen) == 1 + 3  # the short documents' pass, then 3 groups
    assert kept == [not huge_text, True, True]
