"""Document-length settings from the command line, and the paper's preset.

The paper truncates documents at 32 sentences and sentences at 128 tokens. hmde's
defaults lose nothing instead (long sentences are split, long documents windowed,
docs/model.md says why), so every command that encodes or trains takes the flags below,
and ``--preset paper`` sets all of the paper's at once. Explicit flags win over the preset.
"""

from __future__ import annotations

import argparse

from .config import LONG_DOCUMENT_MODES, LONG_SENTENCE_MODES, SEGMENTATION_MODES

PRESETS = {
    "paper": {"long_documents": "truncate", "long_sentences": "truncate", "segmentation": "sentences"},
}


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
    changes = dict(PRESETS.get(getattr(args, "preset", None) or "", {}))
    for name in ("long_documents", "long_sentences", "segmentation"):
        value = getattr(args, name, None)
        if value is not None:
            changes[name] = value
    return changes


def apply_length_overrides(model, changes: dict):
    """Apply ``changes`` to a loaded model for this run (the saved folder is not touched).

    A hierarchical model gets a new config; a sentence encoder is returned wrapped in a
    :class:`~hmde.hierarchical.HierarchicalEncoder` only where a method needs segmentation,
    so here it records the settings for :func:`hmde.methods.as_hierarchical`.
    """
    from .hierarchical import HierarchicalEncoder

    if not changes:
        return model
    if isinstance(model, HierarchicalEncoder):
        model.config = model.config.replace(**changes)
        model.lower.max_tokens = model.config.max_sentence_tokens
    else:
        model.length_overrides = dict(changes)
    return model
