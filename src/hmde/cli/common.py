"""Helpers shared by the commands: model loading, devices, quiet third-party logging."""

from __future__ import annotations

import sys

from .arg_types import finite_float, thread_count
from ..errors import HmdeError
from ..encoders.devices import pick_device  # noqa: F401  (the commands pick devices through it)
from ..encoders.model_loading import load_model as load_named_model
from ..encoders.registry import DEFAULT_MODEL
from ..encoders.quiet import quiet_libraries  # noqa: F401  (main quiets them before any command)


BF16_HELP = ("inference with a bf16 copy of the lower encoder's weights where that is faster: GPUs with "
             "bf16, and CPUs whose bf16 products measure faster than float32 (else float32, said once; "
             "HMDE_LOW_PRECISION=always forces the copy; the USE-m port: GPUs only); the upper encoder "
             "and the vectors stay float32 (cosine >= 0.999)")


def autocast_dtype(bf16: bool):
    import torch

    return torch.bfloat16 if bf16 else None


DEVICE_HELP = "cpu, cuda, cuda:1 ... (default: cuda if available)"


def add_device_argument(parser, help: str = DEVICE_HELP) -> None:
    """``--device`` and ``--threads``, for every command that runs a model (main applies ``--threads``)."""
    parser.add_argument("--device", default="auto", help=help)
    parser.add_argument("--threads", type=thread_count, default=None, help="CPU threads for the model (default: "
                        "torch's, one per core; on a machine busy with other work, 1 can be several times faster: "
                        "docs/defaults.md)")


def add_model_argument(parser, help_suffix: str = "", default: str | None = DEFAULT_MODEL,
                       default_help: str | None = None) -> None:
    parser.add_argument(
        "model",
        nargs="?",
        default=default,
        metavar="MODEL",
        help=f"a saved hmde folder, a sentence encoder (folder or hub id) or a bundled model "
        f"(default: {default_help or default}){help_suffix}",
    )


def add_lawdr_fit_arguments(parser) -> None:
    """How LAWDR is fitted on the input; the defaults are the paper's (docs/model.md)."""
    parser = parser.add_argument_group("LAWDR's fit (--method lawdr)")
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


from ..encoders.backends import BACKENDS  # noqa: E402  (auto, torch, onnx, onnx-int8)


def add_backend_argument(parser, default: str | None = "auto", help_suffix: str = "") -> None:
    parser.add_argument("--backend", choices=BACKENDS, default=default,
                        help="auto (default: ONNX Runtime for hmde's bundled models on a CPU, their graphs made and "
                        "checked against PyTorch on first use; PyTorch on a GPU and for other models), torch "
                        "(PyTorch), onnx or onnx-int8 (ONNX Runtime on an hmde model or a folder written by `hmde "
                        "export onnx`; int8: its quantised lower encoder, faster, vectors less close; inference only)"
                        + help_suffix)


def add_sentence_scoring_arguments(parser, when: str, top: int = 1, doc_weight: float = 0.0) -> None:
    """How multi-vector scoring (hmde.index.multivector) ranks a document; ``when``: where the flags apply."""
    parser.add_argument("--top-sentences", type=int, default=top, metavar="K",
                        help=f"{when}: a document scores the sum of its K best sentences' cosines (default {top}: "
                        f"{'its best sentence' if top == 1 else 'the best ones'}); search shows these K sentences as "
                        "evidence")
    parser.add_argument("--doc-weight", type=finite_float, default=doc_weight, metavar="W",
                        help=f"{when}: plus W times the query's cosine with the document vector (default {doc_weight:g})")


def check_backend_options(args) -> None:
    """Flags that only the PyTorch backend has: with ``auto`` they choose PyTorch, with an ONNX backend they are
    refused, before anything is read or loaded."""
    backend = getattr(args, "backend", None) or "torch"
    if backend == "auto" and needs_torch(args):
        args.backend = "torch"
        return
    if backend in ("torch", "auto"):
        return
    from ..encoders.backends import check_onnx_model

    check_onnx_model(getattr(args, "model", None), backend)
    if getattr(args, "bf16", False):
        raise HmdeError(f"--bf16 applies to --backend torch; an ONNX model runs as exported (--backend {backend})")
    if getattr(args, "engine", "local") == "ray":
        raise HmdeError("--engine ray encodes with the PyTorch backend; drop --backend")
    method = getattr(args, "method", None)
    if method:
        from ..methods import method_class

        if method_class(method).torch_only:
            raise HmdeError(f"--method {method} runs on the PyTorch backend only")


def needs_torch(args) -> bool:
    """Whether a command's flags need PyTorch: bf16, the Ray engine, a PyTorch-only method, HMDE's contextualised
    sentence vectors, a fine-tuning protocol."""
    method = getattr(args, "method", None)
    if method:
        from ..methods import method_class

        try:
            if method_class(method).torch_only:
                return True
        except Exception:  # an unknown method is named by the command's own check
            return False
    return bool(getattr(args, "bf16", False) or getattr(args, "engine", "local") == "ray"
                or getattr(args, "sentence_vectors", None) == "context"
                or getattr(args, "protocol", None) in ("finetune", "both"))  # xldc's; `hmde eval`'s own
    # subcommand is also held as ``protocol`` (clir, xsr, align, xldc), which runs on any backend


def warn(message: str) -> None:
    print(f"hmde: warning: {message}", file=sys.stderr)


def load_model(name: str, device: str, args=None, languages=None, want: str = "any", backend: str | None = None):
    """What a command names, loaded with its --backend (else ``backend``: None is PyTorch, for training) and
    document-length flags (the library's :func:`hmde.encoders.model_loading.load_model` takes them as values,
    never the parsed arguments)."""
    from .length_arguments import length_overrides

    if sys.stderr.isatty():  # the seconds before the first progress bar are not silent on a terminal
        print(f"hmde: loading {name} ...", file=sys.stderr, flush=True)
    return load_named_model(name, device, want, backend=getattr(args, "backend", None) or backend,
                            lengths=length_overrides(args) if args is not None else None, languages=languages)
