"""The document-length flags every command that encodes or trains takes (``--preset paper`` and the
three settings), turned into the library's changes (:func:`hmde.encoders.length_settings.length_changes`)."""

from __future__ import annotations

import argparse

from ..encoders.config import LONG_DOCUMENT_MODES, LONG_SENTENCE_MODES, SEGMENTATION_MODES
from ..encoders.length_settings import PRESETS, length_changes


def add_length_arguments(parser: argparse.ArgumentParser) -> None:
    parser = parser.add_argument_group("document length (the paper's: --preset paper)")
    parser.add_argument("--preset", choices=sorted(PRESETS),
                        help="paper: every setting as in the paper (the hierarchical model's document vectors, documents "
                        "truncated at 32 sentences, sentences at 128 tokens, sentence segmentation; an index stores one "
                        "vector per document); explicit flags still win")
    parser.add_argument("--long-documents", choices=LONG_DOCUMENT_MODES,
                        help="documents over 32 sentences: windows (default: every sentence counts) or truncate "
                        "(the paper)")
    parser.add_argument("--long-sentences", choices=LONG_SENTENCE_MODES,
                        help="sentences over 128 tokens: split (default: nothing is lost) or truncate (the paper)")
    parser.add_argument("--segmentation", choices=SEGMENTATION_MODES,
                        help="sentences (default, the paper) or chunks of 128 tokens (the paper's ablation)")


def length_overrides(args: argparse.Namespace) -> dict:
    """HierarchicalConfig fields the arguments set: the preset's, then the explicit flags."""
    return length_changes(getattr(args, "preset", None), getattr(args, "long_documents", None),
                          getattr(args, "long_sentences", None), getattr(args, "segmentation", None))
