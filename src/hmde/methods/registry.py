"""The registry of document methods: every caller asks it by name."""

from __future__ import annotations

from ..errors import HmdeError
from .base import DocumentMethod
from .first import FirstMethod
from .hmde import HmdeMethod
from .lawdr import LawdrMethod
from .longformer import LongformerMethod
from .mean import MeanMethod
from .seg import SegMethod

REGISTRY: dict[str, type[DocumentMethod]] = {
    cls.name: cls for cls in (HmdeMethod, FirstMethod, SegMethod, MeanMethod, LawdrMethod, LongformerMethod)}


def method_class(name: str) -> type[DocumentMethod]:
    """The class of method ``name``; one line naming the choices when there is none."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise HmdeError(f"unknown method '{name}' (choose from {', '.join(REGISTRY)})") from None


def default_method(is_hmde_model: bool, model: str | None = None, preset: str | None = None) -> str:
    """The method a command uses when none is given: the one a bundled ``model`` recommends
    (:data:`hmde.encoders.registry.RECOMMENDED_METHODS`), else hmde on an hmde model and mean on a sentence
    encoder. ``preset="paper"`` gives an hmde model the paper's ``hmde``."""
    if not is_hmde_model:
        return MeanMethod.name
    if preset == "paper":
        return HmdeMethod.name
    from ..encoders.registry import recommended_method

    return recommended_method(model) or HmdeMethod.name


__all__ = ["REGISTRY", "DocumentMethod", "method_class", "default_method"]
