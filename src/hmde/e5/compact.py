"""Export a trained HMDE on multilingual-e5-small in the compact form that ships (hmde-e5).

The lower encoder's first module becomes :class:`hmde.e5.module.E5Transformer`, which saves only
the tensors (or token-table rows) training changed, in fp16; the upper encoder is saved in fp16
as every bundled hmde model's is. Pooling, normalisation and the prompts are e5's own.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..errors import HmdeError


def use_compact_lower(model) -> None:
    """Swap ``model.lower``'s Transformer for an E5Transformer with the same weights (in place)."""
    from .module import E5Transformer

    st = model.lower.model
    first = st[0]
    if isinstance(first, E5Transformer):
        return
    auto = getattr(first, "auto_model", None)
    if auto is None or getattr(auto.config, "model_type", None) != "bert" or auto.config.hidden_size != 384:
        raise HmdeError("the lower encoder is not multilingual-e5-small: no compact export")
    compact = E5Transformer.from_wheel(first.max_seq_length)
    missing, unexpected = compact.auto_model.load_state_dict(auto.state_dict(), strict=False)
    if missing or unexpected:
        raise HmdeError(f"the lower encoder's weights do not fit multilingual-e5-small ({missing or unexpected})")
    st._modules[next(iter(st._modules))] = compact.to(auto.device)


def export_compact(trained: str | Path, export: str | Path) -> Path:
    """Load the trained HMDE folder ``trained`` and write its compact form into ``export``."""
    from ..encoders.hierarchical import HierarchicalEncoder

    model = HierarchicalEncoder.from_pretrained(trained, device="cpu")
    use_compact_lower(model)
    model.save_pretrained(export, dtype=torch.float16)
    return Path(export)
