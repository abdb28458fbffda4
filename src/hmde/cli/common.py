"""Helpers shared by the commands: model loading, devices, quiet third-party logging."""

from __future__ import annotations

import logging
import os
import sys

from ..errors import HmdeError
from ..registry import DEFAULT_MODEL, resolve_model_path


def quiet_libraries() -> None:
    """Silence the load reports and progress bars of transformers and the hub."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        import transformers

        transformers.utils.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()
    except Exception:  # pragma: no cover - logging helpers moved
        pass
    try:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    except Exception:  # pragma: no cover
        pass
    logging.getLogger("sentence_transformers").setLevel(logging.WARNING)


def pick_device(name: str | None) -> str:
    import torch

    if name in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise HmdeError("--device cuda was asked for, but no CUDA GPU is available; use --device cpu")
    return name


def autocast_dtype(bf16: bool):
    import torch

    return torch.bfloat16 if bf16 else None


def add_model_argument(parser, help_suffix: str = "") -> None:
    parser.add_argument(
        "model",
        nargs="?",
        default=DEFAULT_MODEL,
        metavar="MODEL",
        help=f"a saved hmde folder, a sentence encoder (folder or hub id) or a bundled model "
        f"(default: {DEFAULT_MODEL}){help_suffix}",
    )


def add_lawdr_fit_arguments(parser) -> None:
    """How LAWDR is fitted on the input; the defaults are the paper's (docs/model.md)."""
    parser.add_argument("--lawdr-m", type=int, help="LAWDR: language directions to remove (default: the smallest that "
                        "brings a linear language classifier below 55%%)")
    parser.add_argument("--lawdr-m-selection", choices=["svm", "logreg-cv"], default="svm",
                        help="LAWDR's classifier for choosing m: svm (the paper: linear SVM, 8:2 split; default) or "
                        "logreg-cv (logistic regression, 5-fold CV; earlier hmde)")
    parser.add_argument("--lawdr-kde", choices=["per-language", "pooled"], default="per-language",
                        help="LAWDR's density: per-language (the paper; default) or pooled over languages (earlier hmde)")


def lawdr_fit_options(args) -> dict:
    """MethodOptions fields from the flags of :func:`add_lawdr_fit_arguments` (absent: defaults)."""
    return {"lawdr_m": getattr(args, "lawdr_m", None),
            "lawdr_m_selection": getattr(args, "lawdr_m_selection", "svm"),
            "lawdr_kde": getattr(args, "lawdr_kde", "per-language")}


def load_model(name: str, device: str, want: str = "any", args=None):
    """Load ``name`` as ``("hmde", HierarchicalEncoder)`` or ``("sentence", SentenceEncoder)``,
    with the document-length flags of ``args`` (:mod:`hmde.length_settings`) applied."""
    kind, model = _load_model(name, device, want)
    if args is not None:
        from ..length_settings import apply_length_overrides, length_overrides

        apply_length_overrides(model, length_overrides(args))
    return kind, model


def _load_model(name: str, device: str, want: str = "any"):
    from ..hierarchical import HierarchicalEncoder, is_hmde_folder
    from ..sentence_encoder import SentenceEncoder

    try:
        path = resolve_model_path(name)
    except HmdeError:
        path = None
        if want == "hmde":
            raise
    if path is not None and is_hmde_folder(path):
        return "hmde", HierarchicalEncoder.from_pretrained(str(path), device=device)
    return "sentence", SentenceEncoder.load(str(path or name), device=device)


def warn(message: str) -> None:
    print(f"hmde: warning: {message}", file=sys.stderr)
