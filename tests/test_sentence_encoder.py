import numpy as np
import pytest
import torch

from hmde import HmdeError, SentenceEncoder


SENTENCES = [
    "The cat sat on the mat.",
    "Die Katze saß auf der Matte, und es war ein sonniger Tag in der alten Stadt.",
    "猫はマットの上に座った。",
    "The cat sat on the mat.",  # a duplicate: embedded once, returned twice
    "x",
]


def test_labse_folder_matches_sentence_transformers(labse_dir):
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(labse_dir), device="cpu").encode(SENTENCES)
    ours = SentenceEncoder.load(str(labse_dir), device="cpu").encode(SENTENCES)
    assert ours.shape == reference.shape
    np.testing.assert_allclose(ours, reference, atol=1e-5)
    # LaBSE's Normalize module is applied: unit vectors
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_labse_dense_head_is_applied(labse_dir):
    enc = SentenceEncoder.load(str(labse_dir), device="cpu")
    batch = enc._features(enc.token_ids(["The cat sat on the mat."]))
    with torch.no_grad():
        cls = enc.model[0].auto_model(**batch).last_hidden_state[:, 0]
        dense = enc.model[2]
        expected = torch.nn.functional.normalize(torch.tanh(dense.linear(cls)), dim=-1)
    np.testing.assert_allclose(enc.encode(["The cat sat on the mat."]), expected.numpy(), atol=1e-5)


def test_plain_hf_folder_gets_pooling(hf_dir):
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(hf_dir))
    bert = AutoModel.from_pretrained(str(hf_dir)).eval()
    batch = tok(SENTENCES[:3], padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = bert(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    mean = (hidden * mask).sum(1) / mask.sum(1)
    np.testing.assert_allclose(SentenceEncoder.load(str(hf_dir)).encode(SENTENCES[:3]), mean.numpy(), atol=1e-5)
    cls = SentenceEncoder.load(str(hf_dir), pooling="cls").encode(SENTENCES[:3])
    np.testing.assert_allclose(cls, hidden[:, 0].numpy(), atol=1e-5)


def test_batching_and_order_do_not_change_vectors(labse_dir):
    enc = SentenceEncoder.load(str(labse_dir))
    one_by_one = np.stack([enc.encode([s])[0] for s in SENTENCES])
    np.testing.assert_allclose(enc.encode(SENTENCES, batch_size=1), one_by_one, atol=1e-5)
    np.testing.assert_allclose(enc.encode(SENTENCES, batch_size=64), one_by_one, atol=1e-5)


def test_gradients_flow_outside_inference(labse_dir):
    enc = SentenceEncoder.load(str(labse_dir))
    enc.train()
    enc.embed(SENTENCES).sum().backward()
    grads = [p.grad for p in enc.parameters() if p.requires_grad]
    assert any(g is not None and g.abs().sum() > 0 for g in grads)


def test_unreachable_hub_name_gives_clear_error():
    with pytest.raises(HmdeError, match="not a local folder.*hub could not be reached.*pass the folder"):
        SentenceEncoder.load("sentence-transformers/this-model-does-not-exist-here")


def test_missing_local_folder_error(tmp_path):
    with pytest.raises(HmdeError, match="does not exist"):
        SentenceEncoder.load(str(tmp_path / "nope"))


def test_folder_without_model_files_error(tmp_path):
    with pytest.raises(HmdeError, match="neither a sentence-transformers folder"):
        SentenceEncoder.load(str(tmp_path))


def test_cls_pooled_bert_runs_its_last_layer_for_the_first_token_only(labse_dir, hf_dir):
    enc = SentenceEncoder.load(str(labse_dir), device="cpu")
    assert enc.cls_last_layer  # LaBSE's shape: BERT -> CLS -> Dense -> Normalize
    last = enc.model[0].auto_model.encoder.layer[-1]
    seen = []
    hook = last.intermediate.register_forward_hook(lambda module, args, out: seen.append(tuple(args[0].shape)))
    fast = enc.encode(SENTENCES, batch_size=2)  # padded batches of different lengths
    hook.remove()
    assert seen and all(shape[1] == 1 for shape in seen)  # the feed-forward saw one position per sentence
    enc.cls_last_layer = False
    full = enc.encode(SENTENCES, batch_size=2)
    np.testing.assert_allclose(fast, full, atol=1e-5)
    from sentence_transformers import SentenceTransformer

    np.testing.assert_allclose(fast, SentenceTransformer(str(labse_dir), device="cpu").encode(SENTENCES), atol=1e-5)
    assert not SentenceEncoder.load(str(hf_dir)).cls_last_layer  # mean pooling reads every position
    assert SentenceEncoder.load(str(hf_dir), pooling="cls").cls_last_layer


def _real_sentences(n=300):
    import gzip
    import json
    from pathlib import Path

    bible = Path(__file__).resolve().parents[2] / "shared" / "data" / "bible" / "eng.jsonl.gz"
    if not bible.exists():
        from conftest import CORPUS

        return list(CORPUS)[:n]
    out = []
    with gzip.open(bible, "rt", encoding="utf-8") as f:
        for line in f:
            out += json.loads(line)["verses"]
            if len(out) >= n:
                return out[:n]
    return out


@pytest.fixture
def bf16_measured(monkeypatch):
    """Pins this machine's measured float32 / bf16 product speeds (GFLOP/s) for a test."""
    from hmde.encoders import precision

    def pin(fp32: float, bf16: float) -> None:
        monkeypatch.setitem(precision._measured, torch.bfloat16, (fp32, bf16))

    monkeypatch.delenv(precision.POLICY_VARIABLE, raising=False)
    return pin


def test_bf16_inference_runs_bf16_weights_close_to_fp32(labse_dir, bf16_measured):
    """Issue 17, item 1: --bf16 inference uses a bf16 copy of the weights (autocast alone re-cast
    the fp32 weights at every call); vectors stay within cosine 0.999 of fp32."""
    bf16_measured(60.0, 250.0)  # a CPU with native bf16
    enc = SentenceEncoder.load(str(labse_dir), device="cpu")
    sentences = _real_sentences()
    fp32 = enc.encode(sentences)
    bf16 = enc.encode(sentences, autocast_dtype=torch.bfloat16)
    cos = (fp32 * bf16).sum(1) / np.linalg.norm(fp32, axis=1) / np.linalg.norm(bf16, axis=1)
    assert cos.min() >= 0.999 and not np.array_equal(fp32, bf16)
    low = enc.low_precision_copy(torch.bfloat16)
    assert next(low.parameters()).dtype == torch.bfloat16 and next(enc.model.parameters()).dtype == torch.float32
    assert enc.low_precision_copy(torch.bfloat16) is low  # made once
    assert not any("low_precision" in k for k in enc.state_dict())  # never saved
    with torch.no_grad():
        next(enc.model.parameters()).add_(0.01)  # the fp32 weights changed (training): a new copy
    assert enc.low_precision_copy(torch.bfloat16) is not low


def test_the_bf16_copy_casts_each_weight_once_and_shares_the_tokenizer(labse_dir):
    """Issue 96, item 6: the inference copy is what deepcopy(model).to(bf16) gave, bit for bit, without a float32
    copy first or a deep copy of the tokenizer (1.2 s of every bf16 load of hmde-e5 before); the original keeps
    its float32 weights, tied weights stay tied, plain containers are the copy's own."""
    import copy

    from hmde.encoders.precision import cast_copy

    model = SentenceEncoder.load(str(labse_dir), device="cpu").model
    low = cast_copy(model, torch.bfloat16)
    reference = copy.deepcopy(model).to(torch.bfloat16)
    ours, theirs = low.state_dict(), reference.state_dict()
    assert list(ours) == list(theirs)
    assert all(ours[k].dtype == theirs[k].dtype and torch.equal(ours[k], theirs[k]) for k in ours)
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert all(p.requires_grad for p in model.parameters()) and not any(p.requires_grad for p in low.parameters())
    assert not {p.data_ptr() for p in low.parameters()} & {p.data_ptr() for p in model.parameters()}
    assert low[0].tokenizer is model[0].tokenizer and low[0] is not model[0]
    if hasattr(model, "prompts"):
        assert low.prompts == model.prompts and low.prompts is not model.prompts

    tied = torch.nn.Sequential(torch.nn.Embedding(5, 3), torch.nn.Linear(3, 5, bias=False))
    tied[1].weight = tied[0].weight
    cast = cast_copy(tied, torch.bfloat16)
    assert cast[1].weight is cast[0].weight and cast[0].weight.dtype == torch.bfloat16
    assert tied[0].weight.dtype == torch.float32


def test_bf16_keeps_float32_where_bf16_products_are_slower(labse_dir, bf16_measured, monkeypatch, caplog):
    """Issue 17: bf16 copies only where faster. An AVX512 CPU without bf16 units ran bf16
    products at 63 GFLOP/s against float32's 259: there --bf16 stays float32, says why once,
    and HMDE_LOW_PRECISION=always overrides."""
    bf16_measured(259.0, 63.0)
    enc = SentenceEncoder.load(str(labse_dir), device="cpu")
    sentences = _real_sentences(20)
    fp32 = enc.encode(sentences)
    with caplog.at_level("WARNING", logger="hmde.encoders.sentence_encoder"):
        kept = enc.encode(sentences, autocast_dtype=torch.bfloat16)
        enc.encode(sentences[:2], autocast_dtype=torch.bfloat16)
    np.testing.assert_allclose(kept, fp32, atol=1e-6)
    assert "_low_precision" not in enc.__dict__
    assert [r.getMessage() for r in caplog.records] == [
        "--bf16: inference stays float32 (bfloat16 products ran at 63 GFLOP/s here, float32 at 259; "
        "HMDE_LOW_PRECISION=always overrides)"]
    monkeypatch.setenv("HMDE_LOW_PRECISION", "always")
    forced = enc.encode(sentences, autocast_dtype=torch.bfloat16)
    assert np.abs(forced - fp32).max() > 1e-4 and "_low_precision" in enc.__dict__
    monkeypatch.setenv("HMDE_LOW_PRECISION", "sometimes")
    with pytest.raises(HmdeError, match="HMDE_LOW_PRECISION='sometimes': expected 'measure' or 'always'"):
        enc.encode(sentences, autocast_dtype=torch.bfloat16)


def test_product_speeds_are_measured_once_without_touching_the_random_state(monkeypatch):
    from hmde.encoders import precision

    monkeypatch.setattr(precision, "_measured", {})
    torch.manual_seed(3)
    expected = torch.rand(3)
    torch.manual_seed(3)
    fp32, bf16 = precision.product_speeds(torch.bfloat16)
    assert torch.equal(torch.rand(3), expected)
    assert fp32 > 0 and bf16 > 0 and precision.product_speeds(torch.bfloat16) == (fp32, bf16)
    assert precision.low_precision_is_faster(torch.device("cpu"), torch.bfloat16)[0] == (bf16 > fp32)


def test_training_with_bf16_autocast_keeps_fp32_weights_and_gradients(labse_dir):
    enc = SentenceEncoder.load(str(labse_dir), device="cpu")
    enc.model.train()
    out = enc.embed(["The cat sleeps."], autocast_dtype=torch.bfloat16)
    out.sum().backward()
    grads = [p.grad for p in enc.model.parameters() if p.grad is not None]
    assert grads and all(g.dtype == torch.float32 for g in grads)
    assert "_low_precision" not in enc.__dict__
