"""Export an HMDE to ONNX (optionally int8) and run it with ONNX Runtime.

Two graphs: ``lower.onnx`` (token ids + mask -> sentence vector, the lower encoder with
its own pooling and heads) and ``upper.onnx`` (sentence vectors + mask -> window
vector). Segmentation and windowing are the same torch-free functions the PyTorch model
uses, so :class:`OnnxHierarchicalEncoder` reproduces ``encode_documents`` (tested to
1e-4 in fp32). ``--int8`` adds ``lower.int8.onnx``: dynamic int8 quantisation of the
lower encoder's weights (ONNX Runtime), the part that holds nearly all the compute.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np

from ..atomic import atomic_dir
from ..config import HierarchicalConfig
from ..errors import HmdeError, ModelLoadError
from ..io.tagged_json import read_tagged_json
from ..segmentation import segment_document, window_ranges

FORMAT = "hmde-onnx/1"


def export_onnx(model, output: str | Path, int8: bool = False, opset: int = 17) -> Path:
    """Write ``output`` with lower.onnx, upper.onnx, the tokenizer and config.json."""
    import torch

    class Lower(torch.nn.Module):
        def __init__(self, encoder, with_types: bool):
            super().__init__()
            self.encoder, self.with_types = encoder, with_types

        def forward(self, input_ids, attention_mask):
            features = {"input_ids": input_ids, "attention_mask": attention_mask}
            if self.with_types:
                features["token_type_ids"] = torch.zeros_like(input_ids)
            return self.encoder.forward_features(features)  # the graph hmde runs, CLS shortcut included

    tok = model.lower.tokenizer
    with_types = "token_type_ids" in getattr(tok, "model_input_names", [])
    lower = Lower(model.lower, with_types).eval()
    upper = model.upper.eval()
    ids = torch.tensor(tok(["a b c d", "a"], padding=True)["input_ids"])
    mask = (ids != (tok.pad_token_id or 0)).long()
    sents = torch.randn(2, 3, model.dim)
    smask = torch.tensor([[True, True, True], [True, False, False]])
    with atomic_dir(output) as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer warnings about Python-side shape checks
        torch.onnx.export(lower, (ids, mask), str(tmp / "lower.onnx"), input_names=["input_ids", "attention_mask"],
                          output_names=["sentence_embedding"], opset_version=opset, dynamo=False,
                          dynamic_axes={"input_ids": {0: "batch", 1: "tokens"}, "attention_mask": {0: "batch", 1: "tokens"},
                                        "sentence_embedding": {0: "batch"}})
        # the upper encoder goes through the torch.export-based exporter: the TorchScript
        # tracer bakes nn.MultiheadAttention's batch x heads reshape into constants
        batch, units = torch.export.Dim("batch", min=1), torch.export.Dim("units", min=1, max=model.config.max_sentences)
        torch.onnx.export(upper, (sents, smask), str(tmp / "upper.onnx"), input_names=["sentences", "mask"],
                          output_names=["document"], opset_version=max(opset, 18), dynamo=True,
                          dynamic_shapes=({0: batch, 1: units}, {0: batch, 1: units}))
        if int8:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quantize_dynamic(str(tmp / "lower.onnx"), str(tmp / "lower.int8.onnx"), weight_type=QuantType.QInt8)
        tok.save_pretrained(str(tmp / "tokenizer"))
        meta = {"format": FORMAT, "dim": model.dim, "config": model.config.to_dict(), "int8": int8,
                "source": getattr(model, "source", None)}
        (tmp / "config.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return Path(output)


class OnnxHierarchicalEncoder:
    """``encode_documents``/``encode_queries`` on ONNX Runtime (CPU by default)."""

    def __init__(self, path: str | Path, int8: bool = False, providers: Sequence[str] | None = None,
                 max_batch_tokens: int = 8 * 128, threads: int | None = None):
        import onnxruntime as ort
        from transformers import AutoTokenizer

        path = Path(path)
        meta = read_tagged_json(path / "config.json", FORMAT, "exported model")
        lower_file = path / ("lower.int8.onnx" if int8 else "lower.onnx")
        if not lower_file.exists():
            raise ModelLoadError(f"{lower_file} is missing (export with --int8 for the quantised graph)")
        providers = list(providers or ["CPUExecutionProvider"])
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        self.lower = ort.InferenceSession(str(lower_file), options, providers=providers)
        self.upper = ort.InferenceSession(str(path / "upper.onnx"), options, providers=providers)
        self.tokenizer = AutoTokenizer.from_pretrained(str(path / "tokenizer"))
        self.config = HierarchicalConfig.from_dict(meta["config"])
        self.dim = int(meta["dim"])
        self.max_batch_tokens = max_batch_tokens

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        enc = self.tokenizer(list(texts), truncation=True, max_length=self.config.max_sentence_tokens)["input_ids"]
        order = sorted(range(len(enc)), key=lambda i: -len(enc[i]))
        out = np.zeros((len(enc), self.dim), np.float32)
        pad = self.tokenizer.pad_token_id or 0
        start = 0
        while start < len(order):
            longest = len(enc[order[start]])
            size = max(1, self.max_batch_tokens // max(1, longest))
            batch = order[start:start + size]
            ids = np.full((len(batch), longest), pad, dtype=np.int64)
            mask = np.zeros((len(batch), longest), dtype=np.int64)
            for r, i in enumerate(batch):
                ids[r, : len(enc[i])] = enc[i]
                mask[r, : len(enc[i])] = 1
            out[batch] = self.lower.run(None, {"input_ids": ids, "attention_mask": mask})[0]
            start += size
        return out

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(list(texts))

    def encode_documents(self, docs: Sequence, langs=None) -> np.ndarray:
        if isinstance(docs, str):
            raise HmdeError("encode_documents takes a list of documents, not one string")
        langs = langs if isinstance(langs, (list, tuple)) else [langs] * len(docs)
        cfg = self.config
        units = [segment_document(d, lang, cfg, self.tokenizer) for d, lang in zip(docs, langs)]
        flat = self._embed([u for doc in units for u in doc])
        per_doc = np.split(flat, np.cumsum([len(u) for u in units])[:-1]) if units else []
        out = np.zeros((len(docs), self.dim), np.float32)
        for d, sents in enumerate(per_doc):
            ranges = window_ranges(len(sents), cfg.max_sentences, cfg.long_documents)
            if not ranges:
                continue
            length = max(b - a for a, b in ranges)
            padded = np.zeros((len(ranges), length, self.dim), np.float32)
            mask = np.zeros((len(ranges), length), dtype=bool)
            for r, (a, b) in enumerate(ranges):
                padded[r, : b - a] = sents[a:b]
                mask[r, : b - a] = True
            windows = self.upper.run(None, {"sentences": padded, "mask": mask})[0]
            weights = np.array([b - a for a, b in ranges], np.float32)[:, None]
            out[d] = (windows * weights).sum(0) / weights.sum()
        return out
