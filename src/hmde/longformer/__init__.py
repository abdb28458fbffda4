"""Multilingual Longformer from a BERT-style sentence encoder (the paper's "mLongformer" baseline)."""

from .convert import convert_to_longformer
from .encode import LongformerEncoder

__all__ = ["convert_to_longformer", "LongformerEncoder"]
