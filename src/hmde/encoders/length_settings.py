"""Document-length settings, and the paper's preset (the flags that set them: :mod:`hmde.cli.length_arguments`).

The paper truncates documents at 32 sentences and sentences at 128 tokens. hmde's
defaults lose nothing instead (long sentences are split, long documents windowed,
docs/model.md says why), so every command that encodes or trains takes the flags below,
and ``--preset paper`` sets all of the paper's at once. Explicit flags win over the preset.
"""

from __future__ import annotations

PRESETS = {
    "paper": {"long_documents": "truncate", "long_sentences": "truncate", "segmentation": "sentences"},
}


def length_changes(preset: str | None = None, long_documents: str | None = None, long_sentences: str | None = None,
                   segmentation: str | None = None) -> dict:
    """HierarchicalConfig fields to change: the preset's, then the explicit settings (None: not given)."""
    if preset is not None and preset not in PRESETS:
        from ..errors import HmdeError

        raise HmdeError(f"unknown preset '{preset}' (choose from {', '.join(sorted(PRESETS))})")
    changes = dict(PRESETS.get(preset or "", {}))
    given = {"long_documents": long_documents, "long_sentences": long_sentences, "segmentation": segmentation}
    changes.update({name: value for name, value in given.items() if value is not None})
    return changes


def apply_length_overrides(model, changes: dict):
    """Apply ``changes`` to a loaded model for this run (the saved folder is not touched).

    A hierarchical model gets a new config; a sentence encoder is returned wrapped in a
    :class:`~hmde.encoders.hierarchical.HierarchicalEncoder` only where a method needs segmentation,
    so here it records the settings for :func:`hmde.methods.vectorizer.as_hierarchical`.
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
