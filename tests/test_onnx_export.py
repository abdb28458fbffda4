"""ONNX export: fp32 graphs reproduce encode_documents; the int8 lower encoder stays close."""

import numpy as np
import pytest
import torch

from hmde import HierarchicalEncoder
from hmde.cli.main import main
from hmde.errors import HmdeError, ModelLoadError

pytest.importorskip("onnxruntime", reason="ONNX export needs the onnx extra: pip install 'hmde[onnx]'")

DOCS = ["The cat sat on the mat. It was a sunny day in the old town.", ["Already.", "Split.", "Three."],
        "Die Katze saß. " * 40, ""]


def test_onnx_matches_pytorch_and_int8_is_close(hmde_dir, tmp_path):
    from hmde.export.onnx import OnnxHierarchicalEncoder

    assert main(["export", "onnx", str(hmde_dir), "-o", str(tmp_path / "onnx"), "--int8"]) == 0
    model = HierarchicalEncoder.from_pretrained(hmde_dir)
    expected = model.encode_documents(DOCS)  # 40 sentences: two windows, averaged
    onnx = OnnxHierarchicalEncoder(tmp_path / "onnx")
    np.testing.assert_allclose(onnx.encode_documents(DOCS), expected, atol=1e-4)
    np.testing.assert_allclose(onnx.encode_queries(["a query"]), model.encode_queries(["a query"]), atol=1e-4)
    int8 = OnnxHierarchicalEncoder(tmp_path / "onnx", int8=True).encode_documents(DOCS[:3])
    cos = (int8 * expected[:3]).sum(1) / np.linalg.norm(int8, axis=1) / np.linalg.norm(expected[:3], axis=1)
    assert (cos > 0.9).all()
    assert (tmp_path / "onnx" / "lower.int8.onnx").stat().st_size < (tmp_path / "onnx" / "lower.onnx").stat().st_size
    with pytest.raises(ModelLoadError, match="no config.json"):
        OnnxHierarchicalEncoder(tmp_path)
    with pytest.raises(HmdeError, match="runs in the precision it was exported in"):
        onnx.encode_documents(DOCS[:1], autocast_dtype=torch.bfloat16)


def test_encode_cli_onnx_backend_equals_torch(hmde_dir, tmp_path):
    import json

    src = tmp_path / "d.jsonl"
    src.write_text("".join(json.dumps({"doc_id": str(i), "text": t}) + "\n" for i, t in enumerate(DOCS[:2])))
    assert main(["export", "onnx", str(hmde_dir), "-o", str(tmp_path / "onnx")]) == 0
    assert main(["encode", str(hmde_dir), str(src), "-o", str(tmp_path / "t.npy"), "--no-progress"]) == 0
    assert main(["encode", str(tmp_path / "onnx"), str(src), "-o", str(tmp_path / "o.npy"), "--backend", "onnx"]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "o.npy"), np.load(tmp_path / "t.npy"), atol=1e-4)
