"""Mixed precision: one place that turns "bf16 or not" into an autocast context, and that
decides whether a low-precision weight copy is worth running on this machine at all."""

from __future__ import annotations

import contextlib
import os
import time

import torch

from ..errors import HmdeError

POLICY_VARIABLE = "HMDE_LOW_PRECISION"  # "measure" (default) or "always"
# one sentence batch's product (512 tokens x hidden 768 x 768): what an encoder's layers run
_PROBE_SHAPE = (512, 768, 768)
_measured: dict[torch.dtype, tuple[float, float]] = {}


def autocast_context(device_type: str, dtype: torch.dtype | None):
    """``torch.autocast`` for ``dtype`` on ``device_type``, or a no-op context when ``dtype`` is None."""
    return torch.autocast(device_type, dtype=dtype) if dtype is not None else contextlib.nullcontext()


def low_precision_forced() -> bool:
    """``HMDE_LOW_PRECISION=always``: run the low-precision copy wherever ``--bf16`` asks for it."""
    value = os.environ.get(POLICY_VARIABLE, "measure")
    if value not in ("measure", "always"):
        raise HmdeError(f"{POLICY_VARIABLE}={value!r}: expected 'measure' or 'always'")
    return value == "always"


def product_speeds(dtype: torch.dtype) -> tuple[float, float]:
    """GFLOP/s of one sentence batch's matrix product on this CPU in float32 and in ``dtype``,
    measured once per process (alternating, best of 5; under 0.1 s)."""
    if dtype not in _measured:
        m, k, n = _PROBE_SHAPE
        gen = torch.Generator().manual_seed(0)  # leaves the global random state alone
        a, b = torch.randn(m, k, generator=gen), torch.randn(k, n, generator=gen)
        pairs = {torch.float32: (a, b), dtype: (a.to(dtype), b.to(dtype))}
        best = {d: float("inf") for d in pairs}
        with torch.inference_mode():
            for d, (x, y) in pairs.items():
                x @ y  # warm-up: kernel selection, packing
            for _ in range(5):
                for d, (x, y) in pairs.items():
                    t0 = time.perf_counter()
                    x @ y
                    best[d] = min(best[d], time.perf_counter() - t0)
        flops = 2.0 * m * k * n / 1e9
        _measured[dtype] = (flops / best[torch.float32], flops / best[dtype])
    return _measured[dtype]


def low_precision_is_faster(device: torch.device, dtype: torch.dtype) -> tuple[bool, str]:
    """Whether ``dtype`` weights beat float32 on ``device``, and why.

    GPUs: bf16 where the GPU supports it (tensor cores), fp16 always. CPUs differ by
    orders: with AMX or AVX512-BF16 bf16 products outrun float32, without them oneDNN
    converts and runs them at a quarter of float32's speed (63 vs 259 GFLOP/s measured on an
    AVX512 Xeon), so a CPU is measured rather than guessed.
    """
    if device.type == "cuda":
        ok = dtype != torch.bfloat16 or torch.cuda.is_bf16_supported()
        return ok, "" if ok else "this GPU has no bf16 support"
    if device.type != "cpu":
        return True, ""
    fp32, low = product_speeds(dtype)
    name = str(dtype).split(".")[-1]
    return low > fp32, f"{name} products ran at {low:.0f} GFLOP/s here, float32 at {fp32:.0f}"


def cast_copy(module: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """A copy of ``module`` for inference whose floating-point parameters and buffers are ``dtype`` (the original
    is untouched), made without what ``deepcopy(module).to(dtype)`` spent at every load (hmde-e5's lower encoder on
    two cores: 1.2 s and 0.67 GB more memory at its peak; this: 0.07 s, docs/speed.md): each float tensor is cast
    straight into the copy (float32 weights are never copied first; tied weights stay tied, and nothing requires
    grad), and the objects a module holds beside its tensors and submodules (a tokenizer, whose deep copy alone
    took 0.47 s, a config, a formatter) are shared with the original, not copied; plain containers (a dict of
    prompts) are copied."""
    import copy

    memo: dict = {}
    for tensor in list(module.parameters()) + list(module.buffers()):
        if id(tensor) in memo or not tensor.is_floating_point():
            continue
        cast = tensor.detach().to(dtype, copy=True)
        memo[id(tensor)] = torch.nn.Parameter(cast, requires_grad=False) if isinstance(
            tensor, torch.nn.Parameter) else cast
    plain = (dict, list, tuple, set, frozenset, str, bytes, int, float, bool, type(None))
    for sub in module.modules():
        for key, value in vars(sub).items():
            if not key.startswith("_") and not isinstance(value, (torch.nn.Module, torch.Tensor) + plain):
                memo[id(value)] = value
    return copy.deepcopy(module, memo)
