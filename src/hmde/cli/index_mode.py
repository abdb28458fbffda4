"""``hmde index build``: one vector per document, or every sentence's too, decided from the flags before any
work (:mod:`hmde.cli.index_build` calls it first)."""

from __future__ import annotations

import argparse

from ..methods import method_class
from ..errors import HmdeError
from ..encoders.routing import AUTO


def choose_index_mode(args: argparse.Namespace) -> None:
    """One vector per document, or also every sentence's (``args.multi_vector``, None until decided here).

    The default, on either engine and without ``--preset paper``, is multi-vector with the sentence encoder's
    own sentence vectors: `hmde search` then ranks by the best sentence fused with the document vector, the best
    ranking measured (docs/defaults.md). ``--add`` takes the index's mode instead.
    """
    explicit = args.multi_vector
    if args.sentence_vectors == "context" and args.engine == "ray":
        raise HmdeError("--sentence-vectors context builds with --engine local (the Ray engine stores the sentence "
                        "encoder's own sentence vectors: --sentence-vectors lower)")
    if args.sentence_vectors and args.multi_vector is False:
        raise HmdeError("--sentence-vectors describes a multi-vector index; leave it out with --single-vector")
    if args.sentence_vectors == "context" and args.method and not method_class(args.method).contextual:
        raise HmdeError(f"--sentence-vectors context stores HMDE's contextualised sentence vectors: method hmde, "
                        f"not {args.method}")
    if args.add:
        return
    if explicit is None:
        args.multi_vector = getattr(args, "preset", None) != "paper"
    if args.multi_vector:
        args.sentence_vectors = args.sentence_vectors or "lower"


def check_multi_vector_model(args: argparse.Namespace) -> None:
    """Contextualised sentence vectors need the hierarchical model on PyTorch: checked on the folder,
    before loading it."""
    from ..encoders.model_folder import is_hmde_folder
    from ..encoders.registry import resolve_model_path

    if not args.multi_vector or args.sentence_vectors != "context":
        return
    if args.backend != "torch":
        raise HmdeError("--sentence-vectors context needs --backend torch: the exported upper graph gives document "
                        "vectors only")
    try:
        hmde_model = args.model == AUTO or is_hmde_folder(resolve_model_path(args.model))
    except HmdeError:
        hmde_model = False
    if not hmde_model:
        raise HmdeError(f"--sentence-vectors context stores HMDE's contextualised sentence vectors: '{args.model}' is "
                        "not an hmde model")
