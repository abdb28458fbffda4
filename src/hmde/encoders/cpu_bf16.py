"""bf16 inference on CPUs with AMX: what ``auto`` runs there (issue 96, item 0).

On a CPU with AMX's bf16 tiles, PyTorch's bf16 matrix products (oneDNN) run several times faster than float32 and
than ONNX Runtime's int8 graph. Measured on 600 WMT news sentences of six languages (105 characters each, two cores):
hmde-e5's lower encoder at 559-609 sentences/s in bf16 against 216 in float32, 235 for the smoothed int8 graph and
130 for sentence-transformers' ``encode`` (docs/speed.md), with a min cosine of 0.99997 to float32 where int8 keeps
0.9994. So ``auto`` runs PyTorch with a bf16 copy of the lower encoder's weights (the upper encoder stays float32)
where three things hold:

- the CPU has AMX's bf16 tiles (``amx_bf16`` among ``/proc/cpuinfo``'s flags): without them oneDNN's bf16 products
  ran at a quarter of float32's speed, or at best near int8's, so the ONNX graphs stay the default there;
- this process's probe product (:func:`hmde.encoders.precision.product_speeds`) runs bf16 at least
  :data:`MIN_SPEEDUP` times float32 (5.3x measured with AMX);
- the model's bf16 vectors keep a cosine of at least :data:`MIN_COSINE` (the fp32 graphs' threshold, so they count
  as float32 vectors: an index of them is searched and added to by float32 backends and back) to its float32
  vectors on the ONNX check's texts (:func:`hmde.export.cached.check_vectors`), checked once per model, PyTorch
  version and CPU into ``$HMDE_CACHE/bf16-NAME-HASH-torchX.Y-vN.json``, whose measured minima are read again at
  every use (a record that lacks them, or says ``passed`` without them, is measured again).

A query is embedded alone (bf16 vectors move with their batch: a query's vector must be the one every door gives
it; :meth:`hmde.encoders.sentence_encoder.SentenceEncoder.embed_ids`), on one OpenMP thread
(:func:`hmde.encoders.devices.one_thread`): waking the other thread for each of a few hundred small products cost
more than it saved (hmde-e5, one query on the model thread: 22-24 ms on two threads, 13-14 ms on one; ONNX
Runtime's fp32 graph 8 ms). A call of more than :data:`hmde.encoders.sentence_encoder.ALONE_LIMIT` queries (an
evaluation's) is batched instead: one at a time it ran at 75 queries/s against 250 for float32 in batches (XQuAD's
22 pairs took 7 min against 4).

``HMDE_CPU_BF16=off`` keeps the ONNX graphs on any CPU (``on``: bf16 wherever the probe and the check pass, AMX or
not). ``--backend torch --bf16`` asks for the same copy by hand.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from ..errors import HmdeError

VARIABLE = "HMDE_CPU_BF16"  # auto (default) | on | off
MIN_SPEEDUP = 3.0  # bf16 over float32 in the probe product (AMX: 5.3x measured)
MIN_COSINE = 0.9999  # as the fp32 graphs' check (hmde.export.cached.MIN_COSINE): the vectors stay fp32's family
VERSION = 1
_SAID: set = set()


def policy() -> str:
    value = os.environ.get(VARIABLE, "auto").strip().lower() or "auto"
    if value not in ("auto", "on", "off"):
        raise HmdeError(f"{VARIABLE}={value!r}: expected auto, on or off")
    return value


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as Linux lists them (empty elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


def cpu_name() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "unknown"
    return next((line.partition(":")[2].strip() for line in text.splitlines() if line.startswith("model name")),
                "unknown")


def wanted() -> bool:
    """Whether ``auto`` tries bf16 on this CPU (before the model's check): the policy, AMX, the probe."""
    chosen = policy()
    if chosen == "off" or (chosen == "auto" and "amx_bf16" not in cpu_flags()):
        return False
    import torch

    from .precision import product_speeds

    fp32, bf16 = product_speeds(torch.bfloat16)
    return bf16 >= MIN_SPEEDUP * fp32


def record_path(name: str) -> Path:
    import torch

    from ..evaluation.provenance import model_hash
    from ..ground.cache import cache_root
    from .registry import resolve_model_path

    path = resolve_model_path(name)
    digest = (model_hash(path) or "unhashed")[:16]
    version = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    return cache_root() / f"bf16-{Path(str(path)).name}-{digest}-torch{version}-v{VERSION}.json"


def trusted(record) -> bool:
    """Whether a record's measured minima (not its ``passed``) reach :data:`MIN_COSINE` for this CPU."""
    if not isinstance(record, dict) or record.get("version") != VERSION or record.get("cpu") != cpu_name():
        return False
    lows = record.get("min_cosine")
    if not isinstance(lows, dict) or set(lows) != {"queries", "sentences", "documents"}:
        return False
    return all(isinstance(v, (int, float)) and v >= MIN_COSINE for v in lows.values())


def _read(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def measured(record) -> bool:
    """Whether a record holds a measurement for this CPU (passed or not), so that it need not be made again."""
    return isinstance(record, dict) and record.get("version") == VERSION and record.get("cpu") == cpu_name() and (
        trusted(record) or record.get("refused") in ("slower", "cosine"))


def known_refused(name: str) -> bool:
    """Whether this CPU's record already says no for ``name`` (resolve then goes straight to ONNX)."""
    try:
        record = _read(record_path(name))
    except HmdeError:
        return False
    return measured(record) and not trusted(record)


def check(name: str, model) -> dict:
    """This CPU's record for ``model`` (loaded from ``name``, float32 PyTorch): read where it holds a measurement,
    else measured (float32 against a bf16 copy on the check texts) and written atomically."""
    import torch

    from ..export.cached import check_vectors, lowest_cosines
    from ..ground.atomic import write_text_atomic

    path = record_path(name)
    record = _read(path)
    if measured(record):
        return record
    record = {"version": VERSION, "model": str(name), "cpu": cpu_name(), "torch": torch.__version__.split("+")[0],
              "threshold": MIN_COSINE}
    lower = model.lower
    if not lower.low_precision_pays(torch.bfloat16):
        record["refused"] = "slower"
    else:
        reference = check_vectors(model)
        lower.inference_dtype = torch.bfloat16
        try:
            record["min_cosine"] = lowest_cosines(reference, check_vectors(model))
        finally:
            lower.inference_dtype = None
        record["passed"] = trusted(record)
        if not record["passed"]:
            record["refused"] = "cosine"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(record, indent=2) + "\n")
    return record


def use_bf16(name: str, model) -> bool:
    """Give ``model``'s lower encoder a bf16 inference copy where its check passed on this CPU; else say why, once,
    and leave it float32 (the caller then runs the ONNX graphs)."""
    import torch

    record = check(name, model)
    if trusted(record):
        model.lower.inference_dtype = torch.bfloat16
        return True
    if name not in _SAID:
        _SAID.add(name)
        why = "its bf16 products are not faster here" if record.get("refused") == "slower" else \
            f"its bf16 vectors kept a min cosine of {min(record['min_cosine'].values()):.5f} to float32 " \
            f"(threshold {MIN_COSINE})"
        logging.getLogger("hmde").info("%s runs its ONNX graphs on this CPU, not PyTorch in bf16: %s", name, why)
    return False
