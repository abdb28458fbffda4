"""Smoothed int8 for a lower graph: SmoothQuant (Xiao et al., 2023) on ONNX Runtime's dynamic quantisation.

ONNX Runtime quantises a matrix product's activations with one scale for the whole tensor, so a few input channels
with large values (a transformer's outlier features) set the step for every other channel: that is what costs an
int8 graph its fidelity (docs/speed.md). Smoothing moves that range into the weights, exactly in float arithmetic:
for the activations ``X`` read by products with weights ``W``, a factor ``s_j`` per input channel

    X W = (X diag(1/s)) (diag(s) W),    s_j = max|X_j| ** alpha / max_k |W_jk| ** (1 - alpha)

is applied as one ``Mul`` before the products (shared by the query, key and value projections, which read the same
activations) and folded into their weights, which then quantise per output channel. ``max|X_j|`` comes from
calibration texts (:func:`activation_ranges`); hmde ships the ranges of its bundled models (``activation_ranges/``,
named by the model's content hash, made by ``benchmarks/int8_calibration.py`` from the shared data's WMT sentences)
rather than texts. Measured on hmde-e5 (docs/speed.md): alpha 0.8 with the feed-forward down-projections in
float32 lifts the min cosine to fp32 from 0.9923 to 0.9994 on 1,000 Tatoeba sentences.

The activations' int8 scales are then fixed from the same ranges (:func:`fix_activation_scales`) instead of
measured on each batch: ONNX Runtime's dynamic quantisation gives a whole batch one scale, so a sentence's vector
would depend on the sentences batched with it (a query alone and in a batch of three ranked two near-tied
documents apart). With fixed scales every sentence's vector is its own, at the same fidelity (min cosine 0.99920
fixed against 0.99923 per batch, docs/speed.md).

Ranges are stored by position: the k-th activation tensor (in the graph's order) read by products with constant
weights, with its width, so that an exporter that names tensors differently still finds them; a graph whose
products do not match the ranges' count and widths is refused (:func:`matching_ranges`).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np

ALPHA = 0.8  # measured on hmde-e5 (docs/speed.md): 0.6 / 0.7 / 0.8 / 0.9 -> min cosine 0.99921 / 0.99938 / 0.99940 / 0.99936
RANGES = Path(__file__).resolve().parent / "activation_ranges"
FORM = "smoothquant-static-a0.8-v1"  # the int8 graph's recipe, recorded in the check so that a new one remakes it


def weighted_inputs(model) -> list[tuple[str, list]]:
    """``(activation name, [MatMul nodes])`` for each activation tensor read by products with a constant 2-D weight,
    in the graph's order."""
    consts = {i.name: i for i in model.graph.initializer}
    groups: dict[str, list] = {}
    for node in model.graph.node:
        if node.op_type == "MatMul" and len(node.input) == 2 and node.input[1] in consts \
                and len(consts[node.input[1]].dims) == 2:
            groups.setdefault(node.input[0], []).append(node)
    return list(groups.items())


def activation_ranges(graph: str | Path, tokenizer, texts: Sequence[str], batch_size: int = 32,
                      max_tokens: int = 128) -> list[np.ndarray]:
    """The largest absolute value of each input channel of each weighted product's activations
    (:func:`weighted_inputs`), over the real (unpadded) tokens of ``texts`` run through the float32 ``graph``."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    model = onnx.load(str(graph))
    names = [name for name, _ in weighted_inputs(model)]
    for name in names:
        model.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    del model
    wanted = [o.name for o in session.get_outputs()][1:]
    highest: dict[str, np.ndarray] = {}
    for start in range(0, len(texts), batch_size):
        batch = tokenizer(list(texts[start:start + batch_size]), padding=True, truncation=True,
                          max_length=max_tokens, return_tensors="np")
        mask = batch["attention_mask"].astype(bool)
        outputs = session.run(wanted, {"input_ids": batch["input_ids"].astype(np.int64),
                                       "attention_mask": batch["attention_mask"].astype(np.int64)})
        for name, value in zip(wanted, outputs):
            rows = value[mask] if value.ndim == 3 else value.reshape(-1, value.shape[-1])
            top = np.abs(rows).max(0)
            highest[name] = top if name not in highest else np.maximum(highest[name], top)
    return [highest[name].astype(np.float32) for name in names]


def ranges_file(model_hash: str) -> Path:
    return RANGES / f"{model_hash[:16]}.npz"


def save_ranges(path: str | Path, ranges: Sequence[np.ndarray]) -> None:
    """``ranges`` as an ``.npz`` of float32 arrays (no pickles), written through a temporary file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".npz", dir=path.parent)
    os.close(fd)
    try:
        np.savez_compressed(tmp, **{f"a{k:03d}": np.asarray(r, np.float32) for k, r in enumerate(ranges)})
        os.chmod(tmp, 0o644)  # package data: readable by everyone
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def load_ranges(model_hash: str | None) -> list[np.ndarray] | None:
    """The shipped ranges of the model with this content hash, or None."""
    if not model_hash or not ranges_file(model_hash).is_file():
        return None
    with np.load(ranges_file(model_hash), allow_pickle=False) as data:
        return [data[k] for k in sorted(data.files)]


def matching_ranges(model, ranges: Sequence[np.ndarray]) -> bool:
    """Whether ``ranges`` fit the graph's weighted products (count and widths)."""
    groups = weighted_inputs(model)
    consts = {i.name: i for i in model.graph.initializer}
    return len(groups) == len(ranges) and all(
        int(consts[nodes[0].input[1]].dims[0]) == len(r) for (_, nodes), r in zip(groups, ranges))


def smooth(source: str | Path, target: str | Path, ranges: Sequence[np.ndarray], alpha: float = ALPHA,
           skip: Sequence[str] = ()) -> None:
    """Write ``target``: the float32 graph ``source`` with each weighted product's activations divided by their
    smoothing factors and its weights multiplied by them (the same function up to float rounding); products named
    in ``skip`` (kept in float32 by the quantiser) are left as they are."""
    import onnx
    from onnx import helper, numpy_helper

    from ..errors import ModelLoadError

    model = onnx.load(str(source))
    if not matching_ranges(model, ranges):
        raise ModelLoadError(f"{source}: the int8 calibration ranges do not fit this graph's matrix products")
    consts = {i.name: i for i in model.graph.initializer}
    inserted = []
    for k, ((name, nodes), highest) in enumerate(zip(weighted_inputs(model), ranges)):
        if all(n.name in skip for n in nodes):
            continue
        weights = [numpy_helper.to_array(consts[n.input[1]]) for n in nodes]
        reach = np.max([np.abs(w).max(1) for w in weights], axis=0)
        factor = (np.clip(highest, 1e-5, None) ** alpha / np.clip(reach, 1e-5, None) ** (1 - alpha)).astype(np.float32)
        inverse = numpy_helper.from_array((1.0 / factor).astype(np.float32), f"smooth{k}.inverse")
        model.graph.initializer.append(inverse)
        smoothed = f"smooth{k}.output"
        inserted.append((nodes[0], helper.make_node("Mul", [name, inverse.name], [smoothed], name=f"smooth{k}")))
        for node, w in zip(nodes, weights):
            consts[node.input[1]].CopyFrom(numpy_helper.from_array((w * factor[:, None]).astype(np.float32),
                                                                   node.input[1]))
            node.input[0] = smoothed
    nodes = list(model.graph.node)
    for first, mul in inserted:  # right before the first product that reads it: the order stays topological
        nodes.insert(nodes.index(first), mul)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    onnx.save(model, str(target))


def fix_activation_scales(graph: str | Path, ranges: Sequence[np.ndarray]) -> None:
    """Rewrite the int8 ``graph`` (ONNX Runtime's dynamic quantisation of a :func:`smooth`-ed graph) in place so
    that each smoothed activation is quantised with a fixed scale: ``DynamicQuantizeLinear`` becomes
    ``QuantizeLinear`` over ``[-A, A]``, ``A`` the largest calibrated ``|X_j| / s_j`` (uint8, zero point 128)."""
    import onnx
    from onnx import helper, numpy_helper

    from ..errors import ModelLoadError

    model = onnx.load(str(graph))
    consts = {i.name: i for i in model.graph.initializer}
    nodes = []
    for node in model.graph.node:
        if node.op_type != "DynamicQuantizeLinear":
            nodes.append(node)
            continue
        source = node.input[0]
        if not (source.startswith("smooth") and source.endswith(".output")
                and f"{source[:-len('.output')]}.inverse" in consts):
            raise ModelLoadError(f"{graph}: the int8 graph quantises {source!r}, which was not smoothed")
        k = int(source[len("smooth"):-len(".output")])
        inverse = numpy_helper.to_array(consts[f"smooth{k}.inverse"])
        reach = float((np.asarray(ranges[k], np.float64) * inverse).max())
        scale, zero = node.output[1], node.output[2]
        model.graph.initializer.extend([numpy_helper.from_array(np.array(2 * reach / 255, np.float32), scale),
                                        numpy_helper.from_array(np.array(128, np.uint8), zero)])
        nodes.append(helper.make_node("QuantizeLinear", [source, scale, zero], [node.output[0]],
                                      name=f"{node.name}.fixed"))
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    onnx.save(model, str(graph))
