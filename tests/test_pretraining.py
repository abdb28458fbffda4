import json
from pathlib import Path

import pytest
import torch

from hmde import HierarchicalEncoder, HmdeError, InputError
from hmde.cli.main import main
from hmde.pretraining.loss import cached_backward, contrastive_loss
from hmde.pretraining.pairs import PairOptions, build_pairs, read_pairs
from hmde.pretraining.trainer import HmdeTrainer, PretrainingConfig


def page(lang, concept, cats, text):
    return {"doc_id": f"{lang}/{concept}", "concept": concept, "lang": lang, "text": text, "categories": cats}


PAGES = [
    page("eng", "Q1", ["animals"], "The cat sleeps. It is small."),
    page("deu", "Q1", ["animals"], "Die Katze schläft. Sie ist klein."),
    page("fra", "Q1", ["animals"], "Le chat dort. Il est petit."),
    page("eng", "Q2", ["animals"], "The dog runs. It is fast."),
    page("deu", "Q2", ["animals"], "Der Hund rennt. Er ist schnell."),
    page("eng", "Q3", ["cities"], "Paris is a city. It is big."),
    page("deu", "Q3", ["cities", "Maintenance"], "Paris ist eine Stadt. Sie ist groß."),
]


@pytest.fixture()
def corpus(tmp_path):
    path = tmp_path / "pages.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in PAGES))
    return path


def test_pairs_and_hard_negatives(corpus, tmp_path):
    summary = build_pairs([corpus], tmp_path / "p.parquet", PairOptions(seed=0, no_negative="keep"), show_progress=False)
    pairs, docs, info = read_pairs(tmp_path / "p.parquet")
    got = {(p["doc_a"], p["doc_b"]) for p in pairs}
    assert got == {("deu/Q1", "eng/Q1"), ("deu/Q1", "fra/Q1"), ("eng/Q1", "fra/Q1"), ("deu/Q2", "eng/Q2"),
                   ("deu/Q3", "eng/Q3")}
    by = {(p["doc_a"], p["doc_b"]): p for p in pairs}
    # Q1/Q2 share "animals": each other's hard negative, in the same language
    assert by[("deu/Q1", "eng/Q1")]["neg_a"] == "deu/Q2" and by[("deu/Q1", "eng/Q1")]["neg_b"] == "eng/Q2"
    # fra has no other animal page; Q3's category has no other page
    assert by[("eng/Q1", "fra/Q1")]["neg_b"] is None and by[("deu/Q3", "eng/Q3")]["neg_a"] is None
    assert summary.without_negative == 3 and summary.per_language_pair == {"deu-eng": 3, "deu-fra": 1, "eng-fra": 1}
    assert docs["eng/Q1"][1] == "eng" and info["format"] == "hmde-pairs/1"


def test_pairs_are_deterministic_and_filtered(corpus, tmp_path):
    opts = PairOptions(seed=3, languages=["eng", "deu"])
    build_pairs([corpus], tmp_path / "a.parquet", opts, show_progress=False)
    build_pairs([corpus], tmp_path / "b.parquet", opts, show_progress=False)
    a, _, _ = read_pairs(tmp_path / "a.parquet")
    b, _, _ = read_pairs(tmp_path / "b.parquet")
    assert a == b and all({p["lang_a"], p["lang_b"]} == {"deu", "eng"} for p in a)
    assert len(a) == 2  # Q3 dropped: no hard negative


def test_bad_corpus_inputs(tmp_path, corpus):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"doc_id": "x", "lang": "eng", "text": "t"}) + "\n")
    with pytest.raises(InputError, match=r"bad.jsonl: missing column\(s\) \['concept', 'categories'\]"):
        build_pairs([bad], tmp_path / "p.parquet", show_progress=False)
    with pytest.raises(HmdeError, match="no pages"):
        build_pairs([corpus], tmp_path / "p.parquet", PairOptions(languages=["xxx"]), show_progress=False)
    with pytest.raises(HmdeError, match="no pairs"):
        build_pairs([corpus], tmp_path / "p.parquet", PairOptions(languages=["eng"]), show_progress=False)
    other = tmp_path / "other.parquet"
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"a": [1]}), other)
    with pytest.raises(InputError, match="not a pairs file of this hmde version"):
        read_pairs(other)


def test_contrastive_loss_hand_computed():
    a = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    # positives equal anchors: logits diag 1/t, off-diag 0
    t = 0.5
    expected = torch.log(1 + torch.exp(torch.tensor(-1 / t)))
    assert torch.allclose(contrastive_loss(a, a, temperature=t), expected)
    # hard negatives of the whole batch are candidates; here neg[1] equals anchor 0 itself:
    # anchor 0 sees logits [2, 0, 0, 2] -> loss log(2 + 2 e^-2), and likewise anchor 1
    neg = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    expected_neg = torch.log(2 + 2 * torch.exp(torch.tensor(-1 / t)))
    assert torch.allclose(contrastive_loss(a, a, neg, temperature=t), expected_neg)
    assert torch.allclose(contrastive_loss(a, a, neg, neg, temperature=t, symmetric=True), 2 * expected_neg)


def test_cached_loss_equals_plain_loss(labse_dir):
    torch.manual_seed(0)
    model = HierarchicalEncoder.from_sentence_encoder(str(labse_dir))
    model.train()  # dropout on: the cached pass must replay the same dropout masks
    docs = [["The cat sleeps.", "It is small."], ["Die Katze schläft."], ["Le chat dort.", "Il est petit."],
            ["The dog runs."], ["Der Hund rennt.", "Er ist schnell."], ["Paris is a city."]]
    groups = [docs[:3], docs[3:]]

    def loss_fn(a, b):
        return contrastive_loss(a, b, temperature=0.05)

    torch.manual_seed(1)
    plain = loss_fn(*[model(g) for g in groups])
    plain.backward()
    plain_grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    torch.manual_seed(1)
    cached = cached_backward(model, groups, chunk_size=3, loss_fn=loss_fn)
    assert torch.allclose(cached, plain.detach(), atol=1e-6)
    for name, grad in plain_grads.items():
        assert torch.allclose(dict(model.named_parameters())[name].grad, grad, atol=1e-5), name


@pytest.fixture()
def pairs_file(corpus, tmp_path):
    build_pairs([corpus], tmp_path / "p.parquet", PairOptions(no_negative="keep"), show_progress=False)
    return tmp_path / "p.parquet"


def _run(labse_dir, pairs_file, out, **kw):
    torch.manual_seed(0)
    model = HierarchicalEncoder.from_sentence_encoder(str(labse_dir))
    pairs, docs, _ = read_pairs(pairs_file)
    cfg = PretrainingConfig(batch_size=2, grad_accum=2, lr=1e-3, warmup=1, max_steps=4, save_every=2, bf16="off")
    return HmdeTrainer(model, pairs, docs, cfg, out, show_progress=False)



def _frozen_run(labse_dir, pairs_file, out):
    """A ``--freeze-lower`` trainer of :func:`_run`."""
    trainer = _run(labse_dir, pairs_file, out)
    trainer.config.freeze_lower = True
    return trainer


def _count_embedded(monkeypatch, trainer) -> list[int]:
    """How many sentences each call of the trainer's lower encoder embeds (appended as it trains)."""
    embedded: list[int] = []
    original = trainer.model.lower.embed_ids
    monkeypatch.setattr(trainer.model.lower, "embed_ids", lambda ids, **kw: embedded.append(len(ids)) or original(ids, **kw))
    return embedded

def test_resume_ends_with_the_same_weights(labse_dir, pairs_file, tmp_path):
    full = _run(labse_dir, pairs_file, tmp_path / "a").train()
    _run(labse_dir, pairs_file, tmp_path / "b").train(stop_at_step=2)
    resumed = _run(labse_dir, pairs_file, tmp_path / "b").train(resume=True)
    for (k, a), (_, b) in zip(full.state_dict().items(), resumed.state_dict().items()):
        assert torch.equal(a, b), k
    loaded = HierarchicalEncoder.from_pretrained(tmp_path / "a")
    assert torch.equal(loaded.upper.doc_token, full.upper.doc_token)
    log = [json.loads(line) for line in (tmp_path / "a" / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if "loss" in r] == [4]  # log_every=10: only the final step


@pytest.mark.smoke  # the smoke tier: this command once
def test_cli_build_pairs_and_train(labse_dir, corpus, tmp_path, capsys):
    assert main(["build-pairs", str(corpus), "-o", str(tmp_path / "p.parquet"), "--no-negative", "keep",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "5 pairs from 7 pages" in out and "deu-eng\t3" in out
    assert main(["train", str(labse_dir), str(tmp_path / "p.parquet"), "-o", str(tmp_path / "m"), "--max-steps", "2",
                 "--grad-accum", "2", "--cache-chunk", "2", "--no-progress", "--bf16", "off"]) == 0
    assert HierarchicalEncoder.from_pretrained(tmp_path / "m").encode_documents(["Die Katze."]).shape == (1, 64)


def test_frozen_lower_caches_sentence_vectors_and_trains_only_the_upper(labse_dir, pairs_file, tmp_path):
    trainer = _run(labse_dir, pairs_file, tmp_path / "f")
    trainer.config.freeze_lower = True
    trainer.config.max_units = 1
    lower_before = {k: v.clone() for k, v in trainer.model.lower.state_dict().items()}
    upper_before = {k: v.clone() for k, v in trainer.model.upper.state_dict().items()}
    model = trainer.train()
    assert all(torch.equal(v, lower_before[k]) for k, v in model.lower.state_dict().items())
    assert any(not torch.equal(v, upper_before[k]) for k, v in model.upper.state_dict().items())
    # every document seen was embedded once, cropped to its first sentence (max_units=1)
    assert trainer.vector_cache and all(v.shape[0] == 1 for v in trainer.vector_cache.values())
    doc = next(iter(trainer.vector_cache))
    model.lower.eval()
    with torch.no_grad():
        fresh = model.lower.embed(trainer.units(doc))
    assert torch.allclose(trainer.vector_cache[doc], fresh, atol=1e-5)


def test_wiki40b_files_with_a_category_table(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    def article(title, body):
        return f"\n_START_ARTICLE_\n{title}\n_START_SECTION_\nHistory\n_START_PARAGRAPH_\n{body}_NEWLINE_More text."

    rows = {"en": [("Q1", article("Cat", "Cats purr.")), ("Q2", article("Dog", "Dogs bark.")),
                   ("Q3", article("Lion", "Lions roar."))],
            "de": [("Q1", article("Katze", "Katzen schnurren.")), ("Q2", article("Hund", "Hunde bellen.")),
                   ("Q3", article("Löwe", "Löwen brüllen."))]}
    files = []
    for lang, items in rows.items():
        folder = tmp_path / "wiki40b" / lang
        folder.mkdir(parents=True)
        table = pa.table({"wikidata_id": [q for q, _ in items], "text": [t for _, t in items],
                          "version_id": ["1"] * len(items)})
        pq.write_table(table, folder / "train-00000-of-00001.parquet")
        files.append(str(folder / "train-00000-of-00001.parquet"))
    (tmp_path / "cats.tsv").write_text("concept\tcategory\nQ1\tanimals\nQ2\tanimals\nQ3\tanimals\n")
    assert main(["build-pairs", *files, "-o", str(tmp_path / "p.parquet"), "--wiki40b-categories",
                 str(tmp_path / "cats.tsv"), "--no-progress"]) == 0
    pairs, docs, _ = read_pairs(tmp_path / "p.parquet")
    assert len(pairs) == 3 and {p["doc_a"].split("/")[0] for p in pairs} == {"de"}
    for p in pairs:  # hard negative: same language, shared category, another concept
        assert p["neg_a"].startswith("de/") and p["neg_a"].split("/")[1] != p["doc_a"].split("/")[1]
    text = docs["en/Q1"][0]
    assert text == "Cats purr. More text." and "_START_" not in text


def test_pseudo_documents_from_ordered_sentence_pairs(tmp_path):
    import gzip

    lines = [f"Satz {i}.\tSentence {i}." for i in range(40)]
    (tmp_path / "deu-eng.tsv").write_text("\n".join(lines) + "\n")
    out = tmp_path / "docs.jsonl.gz"
    assert main(["pseudo-documents", str(tmp_path / "deu-eng.tsv"), "-o", str(out), "--lines", "5", "--block", "4"]) == 0
    docs = [json.loads(x) for x in gzip.open(out, "rt", encoding="utf-8")]
    assert len(docs) == 16  # 8 chunks x 2 languages
    assert docs[0] == {"doc_id": "deu/" + docs[0]["concept"], "concept": docs[0]["concept"], "lang": "deu",
                       "text": "Satz 0. Satz 1. Satz 2. Satz 3. Satz 4.", "categories": [docs[0]["concept"].split(":")[0] + ":block0"],
                       "sentences": [f"Satz {i}." for i in range(5)]}
    assert docs[1]["text"] == "Sentence 0. Sentence 1. Sentence 2. Sentence 3. Sentence 4." and docs[1]["lang"] == "eng"
    assert docs[1]["sentences"] == [f"Sentence {i}." for i in range(5)]  # aligned line by line with docs[0]
    assert docs[-1]["categories"][0].endswith(":block1")  # chunk 7 // 4
    (tmp_path / "bad-eng.tsv").write_text("only one field\n")
    assert main(["pseudo-documents", str(tmp_path / "bad-eng.tsv"), "-o", str(tmp_path / "x.jsonl.gz")]) == 2


def test_query_loss_uses_a_sentence_of_the_translation_and_reaches_both_encoders(labse_dir, pairs_file, tmp_path):
    trainer = _run(labse_dir, pairs_file, tmp_path / "q")
    # Two pairs about different concepts: pairs[:2] share their doc_a (deu/Q1), and with two equal
    # documents the loss's gradient to the queries is exactly zero (uniform softmax whatever the
    # query); it only passed with 2 threads, on rounding noise (|grad| 1e-5), and failed with 1.
    first = trainer.pairs[0]
    other = next(p for p in trainer.pairs if p["doc_a"].split("/")[1] != first["doc_a"].split("/")[1])
    batch = [first, other]
    trainer.config.freeze_lower = True
    torch.manual_seed(1)
    queries = trainer.query_vectors(batch)
    for q, pair in zip(queries, batch):  # each query is one of doc_b's cached sentence vectors
        sentences = trainer.frozen_sentence_vectors([pair["doc_b"]])[0]
        assert any(torch.equal(q, s) for s in sentences)
    trainer.config.freeze_lower = False
    trainer.model.eval()  # no dropout: the same sentence gives the same vector twice
    docs_a = trainer.encode([p["doc_a"] for p in batch])
    assert (docs_a[0] - docs_a[1]).abs().max() > 1e-3
    torch.manual_seed(2)
    loss = trainer.query_loss(batch, docs_a)
    torch.manual_seed(2)
    with torch.no_grad():
        expected = contrastive_loss(trainer.query_vectors(batch), docs_a)
    assert torch.allclose(loss.detach(), expected, atol=1e-6)
    loss.backward()
    upper_grads = [p.grad for p in trainer.model.upper.parameters() if p.grad is not None]
    assert upper_grads and any(g.abs().sum() > 0 for g in upper_grads)
    lower_grads = [p.grad for p in trainer.model.lower.parameters() if p.grad is not None]
    assert lower_grads and max(float(g.abs().max()) for g in lower_grads) > 1e-4


@pytest.mark.parametrize("flag", ["--query-loss-weight", "--sentence-loss-weight"])
def test_cli_refuses_query_loss_with_gradcache(labse_dir, pairs_file, tmp_path, capsys, flag):
    assert main(["train", str(labse_dir), str(pairs_file), "-o", str(tmp_path / "m"), "--cache-chunk", "2",
                 flag, "1", "--no-progress"]) == 2
    assert "--query-loss-weight and --sentence-loss-weight are not available with --cache-chunk" in \
        capsys.readouterr().err


TRAIN_ARGS = ["--batch-size", "2", "--grad-accum", "1", "--warmup", "2", "--seed", "3", "--save-every", "3",
              "--max-steps", "6", "--no-progress", "--device", "cpu", "--bf16", "off"]


def _weights(folder):
    from safetensors.torch import load_file

    return {**load_file(str(folder / "model.safetensors")),
            **{f"lower.{k}": v for k, v in load_file(str(folder / "lower" / "model.safetensors")).items()}}


def test_a_run_split_by_stop_and_resume_equals_a_straight_run_bit_for_bit(labse_dir, pairs_file, tmp_path, capsys):
    """Issue 15, item 5: 6 steps straight vs 3 + --resume, dropout on in both encoders, the lower one trained."""
    import json as _json

    assert _json.loads((labse_dir / "config.json").read_text())["hidden_dropout_prob"] > 0
    straight, split = tmp_path / "straight", tmp_path / "split"
    assert main(["train", str(labse_dir), str(pairs_file), "-o", str(straight), *TRAIN_ARGS]) == 0
    assert main(["train", str(labse_dir), str(pairs_file), "-o", str(split), *TRAIN_ARGS, "--stop-at-step", "3"]) == 0
    assert "stopped after step 3" in capsys.readouterr().out
    assert not (split / "model.safetensors").exists()
    assert main(["train", str(labse_dir), str(pairs_file), "-o", str(split), *TRAIN_ARGS, "--resume"]) == 0
    a, b = _weights(straight), _weights(split)
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    docs = ["The cat sleeps. It dreams of fish.", "Le chat dort. Il rêve de poissons."]
    va = HierarchicalEncoder.from_pretrained(straight).encode_documents(docs, show_progress_bar=False)
    vb = HierarchicalEncoder.from_pretrained(split).encode_documents(docs, show_progress_bar=False)
    assert (va == vb).all()


def test_resuming_with_another_length_says_the_schedule_changes(labse_dir, pairs_file, tmp_path, capsys):
    out = tmp_path / "run"
    short = [a if a != "6" else "3" for a in TRAIN_ARGS]
    assert main(["train", str(labse_dir), str(pairs_file), "-o", str(out), *short, "--max-steps", "2",
                 "--stop-at-step", "1"]) == 0
    assert main(["train", str(labse_dir), str(pairs_file), "-o", str(out), *TRAIN_ARGS, "--resume"]) == 0
    err = capsys.readouterr().err
    assert "the checkpoint's run planned 2 steps, this one 6" in err


def test_both_sides_of_every_language_pair_serve_as_anchors(labse_dir, pairs_file, tmp_path, monkeypatch):
    """Issue 16, item 2: pairs are stored lang_a < lang_b; the one-directional loss used to anchor on
    doc_a only, so 'fra' was never an anchor and 'deu' never a candidate."""
    from hmde.pretraining.trainer import orient

    pairs, docs, _ = read_pairs(pairs_file)
    seen = set()
    for step in range(40):
        for p in orient(pairs, seed=0, step=step):
            seen.add((docs[p["doc_a"]][1], docs[p["doc_b"]][1]))
            assert {p["doc_a"], p["doc_b"]} in [{q["doc_a"], q["doc_b"]} for q in pairs]
    stored = {(docs[p["doc_a"]][1], docs[p["doc_b"]][1]) for p in pairs}
    assert stored == {("deu", "eng"), ("deu", "fra"), ("eng", "fra")}
    assert seen == stored | {(b, a) for a, b in stored}
    by_id = {p["pair_id"]: p for p in pairs}
    flipped = [q for step in range(4) for q in orient(pairs, 0, step) if q["doc_a"] != by_id[q["pair_id"]]["doc_a"]]
    assert flipped
    for q in flipped:  # the hard negatives and languages travel with their side
        p = by_id[q["pair_id"]]
        assert (q["neg_a"], q["neg_b"], q["lang_a"], q["lang_b"]) == (p["neg_b"], p["neg_a"], p["lang_b"], p["lang_a"])
    assert orient(pairs, 0, 5) == orient(pairs, 0, 5) and orient(pairs, 0, 5, "a") == pairs

    anchors = []  # and the trainer uses it
    monkeypatch.setattr(HmdeTrainer, "train_step", lambda self, batch, *a: anchors.extend(p["doc_a"] for p in batch) or 0.0)
    trainer = _run(labse_dir, pairs_file, tmp_path / "o")
    trainer.config.max_steps = 12
    trainer.train()
    assert any(docs[d][1] == "fra" for d in anchors)


def test_units_cache_and_loader_workers_train_bit_for_bit_as_the_step_did(labse_dir, pairs_file, tmp_path, capsys):
    """Issue 17, item 2: units and token ids made once (cached beside the pairs file) and the lower
    encoder's batches padded by DataLoader workers give the same weights as segmenting in the step."""
    inline, cached, again = tmp_path / "inline", tmp_path / "cached", tmp_path / "again"
    assert main(["train", str(labse_dir), str(pairs_file), "-o", str(inline), *TRAIN_ARGS, "--no-units-cache"]) == 0
    assert not list(pairs_file.parent.glob("p.units-*.parquet"))
    assert main(["train", str(labse_dir), str(pairs_file), "-o", str(cached), *TRAIN_ARGS, "--loader-workers", "2"]) == 0
    caches = list(pairs_file.parent.glob("p.units-*.parquet"))
    assert len(caches) == 1
    stamp = caches[0].stat().st_mtime_ns
    assert main(["train", str(labse_dir), str(pairs_file), "-o", str(again), *TRAIN_ARGS]) == 0
    assert caches[0].stat().st_mtime_ns == stamp  # reused, not rebuilt
    for other in (cached, again):
        a, b = _weights(inline), _weights(other)
        assert a.keys() == b.keys()
        for k in a:
            assert torch.equal(a[k], b[k]), k


def test_units_cache_follows_the_segmentation_settings(labse_dir, pairs_file, tmp_path):
    from hmde.pretraining.prepared import prepare_units, read_units

    pairs, docs, _ = read_pairs(pairs_file)
    model = HierarchicalEncoder.from_sentence_encoder(str(labse_dir))
    first = prepare_units(pairs_file, docs, model, 32, show_progress=False)
    assert first.built and read_units(first.path).ids == first.ids
    assert not prepare_units(pairs_file, docs, model, 32, show_progress=False).built
    cropped = prepare_units(pairs_file, docs, model, 1, show_progress=False)  # another crop: another file
    assert cropped.built and cropped.path != first.path
    assert all(len(u) <= 1 for u in cropped.units.values())
    model.config = model.config.replace(segmentation="chunks")
    assert prepare_units(pairs_file, docs, model, 32, show_progress=False).path not in (first.path, cropped.path)
    for doc_id, (text, lang) in docs.items():  # the step's own tokenisation, exactly
        assert first.ids[doc_id] == model.lower.token_ids(first.units[doc_id])


def test_a_units_cache_that_cannot_be_locked_is_one_line_naming_the_lock(labse_dir, pairs_file, tmp_path, capsys):
    """filelock opens its file with O_NOFOLLOW: a lock path that is a symlink (a run folder of links to
    another run's files, as stop 40 made) raised ELOOP as a traceback; hmde's CLI now says it in one line."""
    from hmde.pretraining.prepared import prepare_units

    pairs, docs, _ = read_pairs(pairs_file)
    model = HierarchicalEncoder.from_sentence_encoder(str(labse_dir))
    first = prepare_units(pairs_file, docs, model, 32, show_progress=False)
    stamp = first.path.stat().st_mtime_ns
    lock = Path(str(first.path) + ".lock")
    lock.unlink()
    lock.symlink_to(tmp_path / "elsewhere.lock")
    capsys.readouterr()
    assert main(["train", str(labse_dir), str(pairs_file), "-o", str(tmp_path / "m"), "--train-max-sentences", "32",
                 "--no-progress", "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"hmde: error: {lock}: Too many levels of symbolic links", err
    assert not [line for line in err if line.startswith("Traceback")]
    assert first.path.stat().st_mtime_ns == stamp and not (tmp_path / "m" / "model.safetensors").exists()


def test_sparse_embedding_gradients_train_as_dense_ones(labse_dir, pairs_file, tmp_path, monkeypatch):
    """Issue 17: token-embedding gradients accumulate sparsely over a step's passes and are summed into
    one dense gradient before clipping and AdamW: the weights equal dense training's to float rounding."""
    import hmde.pretraining.trainer as trainer_module
    from hmde.training.sparse_embeddings import densify

    seen = []

    def recording_densify(params):
        params = list(params)
        seen.append(sum(p.grad is not None and p.grad.is_sparse for p in params))
        densify(params)
        assert not any(p.grad is not None and p.grad.is_sparse for p in params)

    monkeypatch.setattr(trainer_module, "densify", recording_densify)
    initial = HierarchicalEncoder.from_sentence_encoder(str(labse_dir)).state_dict()
    models = {}
    for sparse in (True, False):
        trainer = _run(labse_dir, pairs_file, tmp_path / str(sparse))
        trainer.config.sparse_embedding_gradients = sparse
        models[sparse] = trainer.train()
    assert seen[:4] == [3] * 4  # word, position and token-type embeddings: sparse in each of the 4 steps
    assert seen[4:] == [0] * 4
    for sparse, model in models.items():  # the setting is restored after training
        assert not any(m.sparse for m in model.modules() if isinstance(m, torch.nn.Embedding))
    a, b = models[True].state_dict(), models[False].state_dict()
    key = next(k for k in a if k.endswith("word_embeddings.weight"))
    assert not torch.allclose(a[key], initial[key])  # the embeddings did train
    for k in a:  # a key bias has no true gradient (softmax ignores a shift); AdamW scales its rounding noise to lr
        x, y = a[k], b[k]
        if k.endswith("key.bias"):
            continue
        if k.endswith("in_proj_bias"):
            third = len(x) // 3
            x, y = torch.cat([x[:third], x[2 * third:]]), torch.cat([y[:third], y[2 * third:]])
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6, msg=k)


def test_sparse_embedding_gradients_leave_frozen_embeddings_alone():
    from hmde.training.sparse_embeddings import sparse_embedding_gradients

    model = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Embedding(10, 4, sparse=True), torch.nn.Embedding(10, 4))
    model[2].weight.requires_grad_(False)
    with sparse_embedding_gradients(model) as changed:
        assert changed == [model[0]] and [m.sparse for m in model] == [True, True, False]
    assert [m.sparse for m in model] == [False, True, False]  # a user's own sparse setting is kept
    with sparse_embedding_gradients(model, enabled=False) as changed:
        assert changed == [] and not model[0].sparse
    extra = torch.nn.Embedding(5, 4)  # requires a gradient but is not the optimizer's: its gradients stay dense
    with sparse_embedding_gradients([model, extra], trained=list(model.parameters())) as changed:
        assert changed == [model[0]] and not extra.sparse


def test_a_second_run_into_a_finished_run_needs_resume_or_overwrite(labse_dir, pairs_file, tmp_path, capsys):
    """Issue 29: ``train -o RUN`` over a finished run replaced its model and checkpoint and mixed the logs."""
    out = tmp_path / "run"
    args = ["train", str(labse_dir), str(pairs_file), "-o", str(out), *[a if a != "6" else "2" for a in TRAIN_ARGS]]
    assert main(args) == 0
    before = (out / "model.safetensors").read_bytes()
    log_lines = len((out / "train_log.jsonl").read_text().splitlines())
    assert main(args) == 2
    assert "pass --overwrite (or --resume to continue it)" in capsys.readouterr().err
    assert (out / "model.safetensors").read_bytes() == before
    (out / "notes.txt").write_text("mine")
    assert main([*args, "--overwrite"]) == 0
    assert len((out / "train_log.jsonl").read_text().splitlines()) == log_lines  # one run's log, not two
    assert (out / "notes.txt").read_text() == "mine"


def test_a_frozen_run_resumes_with_its_saved_sentence_vectors_bit_for_bit(labse_dir, pairs_file, tmp_path, monkeypatch):
    """--freeze-lower: the sentence vectors of the documents met before the checkpoint are saved with it
    and restored on --resume: nothing is embedded twice (hmde-e5's stage 1 spends minutes per new step
    on 2 cores) and the result equals the straight run's exactly."""
    from hmde.pretraining.frozen_vectors import FILE

    def frozen(out):
        return _frozen_run(labse_dir, pairs_file, out)

    full = frozen(tmp_path / "a").train()
    first = frozen(tmp_path / "b")
    first.train(stop_at_step=2)
    assert (tmp_path / "b" / "checkpoint" / FILE).exists()
    met = set(first.vector_cache)
    resumed_trainer = frozen(tmp_path / "b")
    embedded = _count_embedded(monkeypatch, resumed_trainer)
    resumed = resumed_trainer.train(resume=True)
    assert met <= set(resumed_trainer.vector_cache)
    new = set(resumed_trainer.vector_cache) - met  # only documents first met after the checkpoint are embedded
    assert sum(embedded) == sum(len(resumed_trainer.units(d)) for d in new)
    for (k, a), (_, b) in zip(full.state_dict().items(), resumed.state_dict().items()):
        assert torch.equal(a, b), k


def test_a_frozen_run_seeded_with_another_runs_vectors_embeds_nothing_and_trains_the_same(
        labse_dir, pairs_file, tmp_path, monkeypatch):
    """--frozen-vectors: the Table 3 control of hmde-e5 continues stage 1 with e5 frozen on the same
    pairs, whose vectors stage 1 already holds; seeded with them it embeds only the check's sample,
    and trains as a run that embedded everything itself (float summation order aside)."""
    from hmde.pretraining.frozen_vectors import FILE

    def frozen(out):
        return _frozen_run(labse_dir, pairs_file, out)

    source = frozen(tmp_path / "stage1")
    source.train()
    seed = tmp_path / "stage1" / "checkpoint" / FILE
    plain = frozen(tmp_path / "plain").train()
    seeded_trainer = frozen(tmp_path / "seeded")
    embedded = _count_embedded(monkeypatch, seeded_trainer)
    seeded = seeded_trainer.train(seed_vectors=seed)
    check = sum(len(seeded_trainer.units(d)) for d in sorted(source.vector_cache)[:2])
    assert sum(embedded) == check  # the sample check only: every document met was in the seed
    for (k, a), (_, b) in zip(plain.state_dict().items(), seeded.state_dict().items()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5, msg=k)
    assert (tmp_path / "seeded" / "checkpoint" / FILE).exists()  # saved with its checkpoint: a resume is exact

    other = frozen(tmp_path / "other")
    with torch.no_grad():
        next(other.model.lower.parameters()).add_(torch.randn_like(next(other.model.lower.parameters())))
    with pytest.raises(HmdeError, match=r"frozen_vectors\.safetensors: the vectors of .* differ from this lower encoder"):
        other.train(seed_vectors=seed)


@pytest.mark.parametrize("control_bf16", ["on", "off"])
def test_a_bf16_stage_1s_vectors_seed_its_control_in_either_precision(labse_dir, pairs_file, tmp_path, control_bf16):
    """hmde recipe e5's control failed at once on a CPU with AVX512-BF16 (and would on every GPU): stage 1
    had embedded under bf16 autocast (the default there), the seed check embedded again in fp32 and
    refused the gap (7.8e-4 on e5, over the old 1e-4). The same encoder's vectors are accepted whatever
    the precision of either run; an encoder moved like a short fine-tuning is still refused."""
    from hmde.pretraining.frozen_vectors import FILE, SEED_ATOL

    source = _frozen_run(labse_dir, pairs_file, tmp_path / "stage1")
    source.config.bf16 = "on"
    source.train()
    seed = tmp_path / "stage1" / "checkpoint" / FILE
    control = _frozen_run(labse_dir, pairs_file, tmp_path / "control")
    control.config.bf16 = control_bf16
    fresh = control._embed_again(sorted(source.vector_cache)[:2])
    gap = max(float((f - source.vector_cache[d]).abs().max()) for d, f in zip(sorted(source.vector_cache), fresh))
    assert 1e-4 < gap < SEED_ATOL  # bf16 against fp32: over the old tolerance, under the new one
    control.train(seed_vectors=seed)
    assert (tmp_path / "control" / "checkpoint" / FILE).exists()

    moved = _frozen_run(labse_dir, pairs_file, tmp_path / "moved")
    moved.config.bf16 = control_bf16
    with torch.no_grad():
        for param in moved.model.lower.parameters():
            param.mul_(1 + 0.05 * torch.randn_like(param))
    with pytest.raises(HmdeError, match=r"the vectors of .* differ from this lower encoder's by"):
        moved.train(seed_vectors=seed)


def test_frozen_vectors_without_freeze_lower_is_refused_in_one_line(labse_dir, pairs_file, tmp_path, capsys):
    from hmde.cli.main import main

    code = main(["train", str(labse_dir), str(pairs_file), "-o", str(tmp_path / "run"), "--frozen-vectors",
                 str(tmp_path / "x.safetensors"), "--no-progress"])
    assert code == 2 and "--frozen-vectors needs --freeze-lower" in capsys.readouterr().err


def test_a_time_budget_fits_the_steps_and_a_resume_keeps_them(labse_dir, pairs_file, tmp_path, monkeypatch):
    """``hmde train --time-budget``: the rate of steps 3-5 sizes the run (a GPU lease is minutes, not epochs);
    the fitted count is recorded, so a run stopped after the probe resumes to the same end."""
    import threading

    import hmde.pretraining.trainer as trainer_module

    clock = iter(range(0, 100_000, 10))  # every time.time() call of this thread advances 10 s
    real_time, this_thread = trainer_module.time.time, threading.get_ident()
    # time.time is global: a server thread left by another test (milvus-lite's gRPC) must keep its real clock
    monkeypatch.setattr(trainer_module.time, "time",
                        lambda: float(next(clock)) if threading.get_ident() == this_thread else real_time())

    def budgeted(out):
        trainer = _run(labse_dir, pairs_file, out)
        trainer.config.max_steps, trainer.config.time_budget_minutes = 40, 2.0
        return trainer

    budgeted(tmp_path / "a").train()
    log = [json.loads(line) for line in (tmp_path / "a" / "train_log.jsonl").read_text().splitlines()]
    fitted = [r["steps"] for r in log if r.get("event") == "time_budget"]
    assert fitted and all(5 < n < 40 for n in fitted)  # after the probe, and again where a refit changed it
    assert max(r.get("step", 0) for r in log) == fitted[-1] and (tmp_path / "a" / "model.safetensors").exists()
    recorded = json.loads((tmp_path / "a" / "training_config.json").read_text())
    assert recorded["budget_steps"] == fitted[-1] and recorded["time_budget_minutes"] == 2.0

    stopped = budgeted(tmp_path / "b")
    stopped.train(stop_at_step=6)
    assert stopped.stopped_at == 6
    monkeypatch.setattr(trainer_module.time, "time",  # a frozen clock would never fit again
                        lambda: 0.0 if threading.get_ident() == this_thread else real_time())
    budgeted(tmp_path / "b").train(resume=True)
    steps = [json.loads(line).get("step", 0) for line in (tmp_path / "b" / "train_log.jsonl").read_text().splitlines()]
    assert max(steps) == json.loads((tmp_path / "b" / "training_config.json").read_text())["budget_steps"]
