"""Which parts of the lower (sentence) encoder a joint HMDE run updates.

Why: the paper updates every weight of LaBSE during document-level pretraining. On a small
budget (2 CPU cores, a few hundred pairs) updating a 100M-parameter encoder may drift from
what it knew about sentences, and most of those parameters are the token embedding table
(96M of multilingual-e5-small's 118M). ``hmde train --lower-trainable`` therefore offers
three settings, measured against each other in docs/hmde-e5.md:

- ``all``: every weight (the paper; default);
- ``no-embeddings``: the token, position and type embeddings stay as they are;
- ``top-N``: only the last N transformer layers learn (embeddings and lower layers frozen).

Parts are found by the parameter names of Hugging Face encoders (``embeddings.``,
``layer.<i>.``), so any BERT/XLM-R-style lower encoder works; an encoder without such
names (USE-m) is refused with a one-line error instead of silently training everything.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..errors import HmdeError

if TYPE_CHECKING:
    from torch import nn

CHOICES_HELP = "all (the paper), no-embeddings, or top-N (the last N transformer layers)"
_LAYER = re.compile(r"(?:^|\.)layers?\.(\d+)\.")


def parse_lower_trainable(spec: str) -> str:
    """Validate a ``--lower-trainable`` value (argparse type): returns it unchanged."""
    if spec in ("all", "no-embeddings"):
        return spec
    match = re.fullmatch(r"top-(\d+)", spec)
    if match and int(match.group(1)) > 0:
        return spec
    raise ValueError(f"expected {CHOICES_HELP}, not {spec!r}")


def _layer_index(name: str) -> int | None:
    match = _LAYER.search(name)
    return int(match.group(1)) if match else None


def freeze_lower_parts(lower: nn.Module, spec: str) -> list[str]:
    """Turn off gradients of the lower encoder's parameters that ``spec`` keeps fixed.

    Returns the names of the parameters left trainable (for the log and the tests)."""
    spec = parse_lower_trainable(spec)
    named = list(lower.named_parameters())
    if spec == "all":
        return [n for n, p in named if p.requires_grad]
    embeddings = [n for n, _ in named if ".embeddings." in f".{n}"]
    layers = {i for n, _ in named if (i := _layer_index(n)) is not None}
    if not embeddings or not layers:
        raise HmdeError(f"--lower-trainable {spec}: the lower encoder has no Hugging Face embedding and layer "
                        "parameters to tell apart; use --lower-trainable all")
    if spec == "no-embeddings":
        keep = lambda n: n not in embeddings
    else:
        top = int(spec.split("-")[1])
        if top > len(layers):
            raise HmdeError(f"--lower-trainable {spec}: the lower encoder has only {len(layers)} layers")
        first = max(layers) + 1 - top
        keep = lambda n: (i := _layer_index(n)) is not None and i >= first
    for name, param in named:
        if not keep(name):
            param.requires_grad_(False)
    return [n for n, p in named if p.requires_grad]
