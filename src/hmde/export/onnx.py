"""Export an HMDE to ONNX (optionally int8) and run it with ONNX Runtime.

Two graphs: ``lower.onnx`` (token ids + mask -> sentence vector, the lower encoder with
its own pooling and heads) and ``upper.onnx`` (sentence vectors + mask -> window
vector); on CPUs hmde makes and checks them itself on first use (:mod:`hmde.export.cached`). :class:`OnnxHierarchicalEncoder` is a ``HierarchicalEncoder`` whose two encoders
are ONNX Runtime sessions: segmentation, batching and windowing are the PyTorch model's own
code, so it reproduces ``encode_documents`` (tested to 1e-4 in fp32). ``--int8`` adds ``lower.int8.onnx``
(:func:`quantize_lower`): the lower encoder, which holds nearly all the compute, with per-channel int8 weights and
int8 activations except in its feed-forward down-projections, smoothed first where hmde ships the model's
calibration (:mod:`hmde.export.smoothing`; measured: docs/speed.md).
"""

from __future__ import annotations

import contextlib
import io
import json
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch import nn

from ..ground.atomic import atomic_dir
from ..encoders.config import HierarchicalConfig
from ..errors import HmdeError, ModelLoadError
from .folder import FORMAT, is_onnx_export  # noqa: F401  (hmde.export.onnx.is_onnx_export, as before)
from ..encoders.hierarchical import HierarchicalEncoder
from ..io.tagged_json import read_tagged_json
from ..encoders.sentence_encoder import SentenceEncoder



def export_onnx(model, output: str | Path, int8: bool = False, opset: int = 17, ranges=None,
                lock: bool = True) -> Path:
    """Write ``output`` with lower.onnx, upper.onnx, the tokenizer and config.json (``int8``: also lower.int8.onnx,
    smoothed with calibration ``ranges`` where given: :func:`quantize_lower`). ``lock=False``: ``output`` is a
    temporary folder of the caller's, which holds the lock."""
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
    # the torch.export-based exporter prints its progress on stdout, which carries a command's output, and logs
    # a warning per torchvision operator it cannot register
    with atomic_dir(output, lock=lock) as tmp, warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            _quiet_logger("torch.onnx"):
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
            quantize_lower(tmp / "lower.onnx", tmp / "lower.int8.onnx", ranges)
        tok.save_pretrained(str(tmp / "tokenizer"))
        meta = {"format": FORMAT, "dim": model.dim, "config": model.config.to_dict(), "int8": int8,
                "int8_smoothed": bool(int8 and ranges is not None),
                "source": getattr(model, "source", None)}
        from ..text.coverage import model_languages

        known = model_languages(model)  # the languages' warnings keep working on the graph
        if known is not None:
            meta["covered_languages"] = {"label": known[0], "languages": sorted(known[1])}
        if model.lower.prompts:  # e.g. multilingual-e5-small's query:/passage: prefixes travel with the graph
            meta["prompts"], meta["document_prompt"] = model.lower.prompts, model.lower.document_prompt
        (tmp / "config.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return Path(output)


def down_projections(graph: Path) -> list[str]:
    """The matrix products of ``graph`` whose constant weight maps more inputs to fewer outputs (a transformer's
    feed-forward down-projection, 1536 -> 384 in e5-small): where int8 activations cost the most fidelity
    (measured on hmde-e5: keeping them float32 lifts the min cosine to fp32 from 0.982 to 0.995)."""
    import onnx

    model = onnx.load(str(graph), load_external_data=False)
    shapes = {i.name: list(i.dims) for i in model.graph.initializer}
    return [n.name for n in model.graph.node if n.op_type == "MatMul" and len(n.input) == 2
            and len(shapes.get(n.input[1], [])) == 2 and shapes[n.input[1]][0] > shapes[n.input[1]][1]]


def quantize_lower(source: Path, target: Path, ranges=None) -> None:
    """ONNX Runtime's dynamic int8 quantisation of the lower graph: per-channel weights, matrix products only
    (the embedding table stays float32), the down-projections kept float32 (:func:`down_projections`); with
    calibration ``ranges`` (:mod:`hmde.export.smoothing`), the other products' activations smoothed first and
    quantised with fixed scales (each sentence's vector independent of its batch)."""
    import os
    import tempfile

    from onnxruntime.quantization import QuantType, quantize_dynamic

    kept = down_projections(source)

    def quantize(graph) -> None:
        with _quiet_logger(None):  # the quantiser's advice to pre-process, on the root logger
            quantize_dynamic(str(graph), str(target), weight_type=QuantType.QInt8, per_channel=True,
                             op_types_to_quantize=["MatMul"], nodes_to_exclude=kept)

    if ranges is None:
        quantize(source)
        return
    from .smoothing import fix_activation_scales, smooth

    fd, smoothed = tempfile.mkstemp(prefix=".lower.smoothed.", suffix=".onnx", dir=Path(target).parent)
    os.close(fd)
    try:
        smooth(source, smoothed, ranges, skip=kept)
        quantize(smoothed)
        fix_activation_scales(target, ranges)
    finally:
        Path(smoothed).unlink(missing_ok=True)


class OnnxSentenceEncoder(SentenceEncoder):
    """The lower encoder on ONNX Runtime: :class:`~hmde.encoders.sentence_encoder.SentenceEncoder`'s tokenization,
    deduplication and token-budget batching, with the exported graph in place of the PyTorch modules."""

    def __init__(self, session, tokenizer, dim: int, max_tokens: int, max_batch_tokens: int,
                 prompts: dict | None = None, document_prompt: str = "", covered: dict | None = None):
        nn.Module.__init__(self)
        # (label, languages) of the encoder it was exported from (hmde.text.coverage.model_languages), if known
        self.declared_languages = (covered["label"], frozenset(covered["languages"])) if covered else None
        self.session, self._tokenizer, self._dim = session, tokenizer, dim
        self.max_tokens, self.max_batch_tokens = max_tokens, max_batch_tokens
        self._prompts, self._document_prompt = dict(prompts or {}), document_prompt
        self.cls_last_layer = False  # the exported graph already is whatever hmde ran

    @property
    def tokenizer(self):
        return self._tokenizer

    @property
    def prompts(self) -> dict[str, str]:
        return dict(self._prompts)

    @property
    def document_prompt(self) -> str:
        return self._document_prompt

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def default_batch_size(self) -> int:
        return max(1, self.max_batch_tokens // self.max_tokens)

    def forward_features(self, features: dict[str, torch.Tensor], model=None, normalized: bool = True) -> torch.Tensor:
        if not normalized:  # the exported graph ends where the folder does (Normalize included)
            raise HmdeError("an ONNX model gives its final vectors only: fine-tune with --backend torch")
        inputs = {k: features[k].cpu().numpy().astype(np.int64) for k in ("input_ids", "attention_mask")}
        return torch.from_numpy(self.session.run(None, inputs)[0])

    def low_precision_pays(self, dtype: torch.dtype) -> bool:
        raise HmdeError("an ONNX model runs in the precision it was exported in: bf16 applies to --backend torch")

    def save(self, path) -> None:
        raise HmdeError("an ONNX model cannot be saved as a sentence-transformers folder: export from the PyTorch model")


class OnnxUpper(nn.Module):
    """The upper encoder's graph, called as :class:`~hmde.encoders.document_encoder.DocumentEncoder` is."""

    def __init__(self, session):
        super().__init__()
        self.session = session

    def forward(self, sentences: torch.Tensor, mask: torch.Tensor, return_sentences: bool = False) -> torch.Tensor:
        if return_sentences:
            raise HmdeError("the exported upper graph gives document vectors only: contextualised sentence vectors "
                            "need --backend torch")
        out = self.session.run(None, {"sentences": sentences.float().cpu().numpy(), "mask": mask.cpu().numpy()})[0]
        return torch.from_numpy(out)


class OnnxHierarchicalEncoder(HierarchicalEncoder):
    """An exported HMDE on ONNX Runtime (CPU by default), for inference.

    It is a :class:`~hmde.encoders.hierarchical.HierarchicalEncoder` whose lower and upper encoders
    are ONNX Runtime sessions, so ``encode_documents``, ``encode_queries``, every document
    method (``first``, ``seg``, ``mean``, ``lawdr``) and every command run the same code on
    either backend. It has no parameters: it cannot be trained or fine-tuned.
    """

    def __init__(self, path: str | Path, int8: bool = False, providers: Sequence[str] | None = None,
                 max_batch_tokens: int = 8 * 128, threads: int | None = None):
        import onnxruntime as ort
        from transformers import AutoTokenizer

        nn.Module.__init__(self)
        path = Path(path)
        meta = read_tagged_json(path / "config.json", FORMAT, "exported model")
        lower_file = path / ("lower.int8.onnx" if int8 else "lower.onnx")
        if not lower_file.exists():
            raise ModelLoadError(f"{lower_file} is missing (export with --int8 for the quantised graph)")
        providers = list(providers or ["CPUExecutionProvider"])
        options = session_options(ort, threads)
        self.config = HierarchicalConfig.from_dict(meta["config"])
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(path / "tokenizer"))
        except Exception as exc:  # transformers raises OSError, ValueError, TypeError... for a damaged folder
            raise ModelLoadError(f"{path / 'tokenizer'}: not a readable tokenizer ({_last_line(exc)}); export the "
                                 "model again") from None
        self.lower = OnnxSentenceEncoder(_session(ort, lower_file, options, providers),
                                         tokenizer, int(meta["dim"]), self.config.max_sentence_tokens, max_batch_tokens,
                                         meta.get("prompts"), meta.get("document_prompt", ""),
                                         meta.get("covered_languages"))
        self.upper = OnnxUpper(_session(ort, path / "upper.onnx", options, providers))
        self.source, self.int8 = str(path), bool(int8)
        self.eval()

    def save_pretrained(self, path, dtype=None) -> None:
        raise HmdeError("an ONNX model cannot be saved as an hmde folder: save the PyTorch model it was exported from")


@contextlib.contextmanager
def _quiet_logger(name: str):
    import logging

    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def session_options(ort, threads: int | None = None):
    """ONNX Runtime's settings for hmde's sessions: ``threads`` (default: hmde's thread setting,
    :func:`hmde.encoders.devices.cpu_threads`, else one per core) whose idle threads sleep instead of spinning, so
    that a machine busy with other work does not slow a search several times (benchmarks/speed.py)."""
    from ..encoders.devices import cpu_threads

    options = ort.SessionOptions()
    threads = threads or cpu_threads()
    if threads:
        options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return options


def _last_line(exc: BaseException) -> str:
    lines = [x.strip() for x in str(exc).strip().splitlines() if x.strip()]
    return lines[-1][:300] if lines else type(exc).__name__


def _session(ort, graph: Path, options, providers):
    """An ONNX Runtime session of one exported graph; a missing, truncated or damaged graph (or its
    external ``.data`` file) is one line naming the graph, not ONNX Runtime's traceback."""
    if not graph.is_file():
        raise ModelLoadError(f"{graph} is missing; export the model again")
    try:
        return ort.InferenceSession(str(graph), options, providers=providers)
    except Exception as exc:  # onnxruntime's Fail, InvalidProtobuf, NoSuchFile...
        raise ModelLoadError(f"{graph}: not a loadable ONNX graph ({_last_line(exc)}); export the model "
                             "again") from None
