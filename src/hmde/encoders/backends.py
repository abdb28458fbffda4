"""Which runtime runs a model: the fastest one that keeps its vectors, unless a caller names one.

- ``torch``: PyTorch. GPUs, training, bf16, HMDE's contextualised sentence vectors and the Longformer baseline.
- ``onnx``: ONNX Runtime on float32 graphs: a folder written by ``hmde export onnx``, or a model's graphs that hmde
  makes and checks against PyTorch in its cache on first use (:mod:`hmde.export.cached`).
- ``onnx-int8``: the same with the int8 lower graph (faster; its vectors differ more: docs/speed.md).
- ``auto``, what every inference path asks for by default (the command line, :class:`hmde.Index`, the server, the
  integrations): on a CPU with AMX, for hmde's bundled models, PyTorch with a bf16 copy of the lower encoder where
  it is faster and its check passed (:mod:`hmde.encoders.cpu_bf16`; float32's family of vectors); on other CPUs
  ``onnx-int8`` where hmde ships the model's int8 calibration
  and the smoothed int8 graph passed its check (hmde-e5), else ``onnx`` once the fp32 graphs passed theirs;
  ``torch`` everywhere else (a GPU, another model, no ONNX Runtime, a failed check: said once).
- ``auto-fp32`` (internal: what reads an index of float32 vectors): ``auto`` without int8.

An index records the family of vectors it was built with: ``onnx-int8`` for int8, else the backend asked for
(``auto``, ``torch``, ``onnx``: fp32 graphs and PyTorch give the same vectors, the check's threshold); searching or
adding to it defaults to a backend of the same family (:func:`same_vectors`, :func:`for_reading`).
"""

from __future__ import annotations

import logging
from pathlib import Path

BACKENDS = ("auto", "torch", "onnx", "onnx-int8")
DEFAULT = "auto"
FP32 = "auto-fp32"

_SAID: set = set()


def same_vectors(a: str | None, b: str | None) -> bool:
    """Whether two backends give the same vectors (int8 does not give fp32's)."""
    return ((a or "torch") == "onnx-int8") == ((b or "torch") == "onnx-int8")


def for_reading(recorded: str | None) -> str:
    """The backend that searches (or adds to) an index built with ``recorded``: the fastest that gives fp32 vectors
    (indexes of earlier hmde recorded ``torch`` or ``auto``), int8 for int8."""
    return "onnx-int8" if recorded == "onnx-int8" else FP32


def recorded(asked: str | None, model) -> str:
    """What an index built by ``model``, loaded for backend ``asked``, records: ``onnx-int8`` where the model runs
    the int8 graph (``auto`` may choose it), else ``asked``."""
    return "onnx-int8" if getattr(model, "int8", False) else (asked or DEFAULT)


def auto_models() -> set[str]:
    """The bundled hmde models that ``auto`` runs on ONNX Runtime (their folders' names)."""
    from .model_folder import is_hmde_folder
    from .registry import PACKAGE_MODELS

    if not PACKAGE_MODELS.is_dir():
        return set()
    return {p.name for p in PACKAGE_MODELS.iterdir() if p.is_dir() and is_hmde_folder(p)}


def bundled_hmde(name: str) -> bool:
    """Whether ``name`` is one of :func:`auto_models`, by name or by folder."""
    from .registry import PACKAGE_MODELS

    if str(name) in auto_models():
        return True
    path = Path(str(name)).expanduser()
    return path.is_dir() and path.resolve().parent == PACKAGE_MODELS.resolve() and path.name in auto_models()


def resolve(name: str, device: str, backend: str | None, bf16: bool = True) -> str:
    """``torch``, ``torch-bf16``, ``onnx`` or ``onnx-int8`` for loading ``name`` on ``device`` when ``backend`` was
    asked for (None: ``torch``, the library's own default for training code). ``torch-bf16`` (``auto`` on a CPU with
    AMX, :mod:`hmde.encoders.cpu_bf16`) is PyTorch with a bf16 inference copy, once the model's check passes
    (``bf16=False``: its check failed, so the ONNX graphs)."""
    backend = backend or "torch"
    if backend not in (DEFAULT, FP32):
        return backend
    from ..export.folder import is_onnx_export

    if is_onnx_export(name):
        return "onnx"
    if str(device).split(":")[0] != "cpu" or not bundled_hmde(name):
        return "torch"
    from . import cpu_bf16

    if bf16 and cpu_bf16.wanted() and not cpu_bf16.known_refused(name):
        return "torch-bf16"
    if not _has_onnxruntime():
        return "torch"
    from ..export.cached import describe, ensure_export, trusted

    try:
        folder, record = ensure_export(name)
    except Exception as exc:  # an export that fails (an operator, a disk) must not stop a search: PyTorch runs it
        _say_once(name, f"the ONNX graphs of {name} could not be made ({str(exc).splitlines()[0][:200]}); "
                  "running PyTorch")
        return "torch"
    if not trusted(record):
        _say_once(name, f"the ONNX graphs of {name} are not used: {describe(record)}; running PyTorch")
        return "torch"
    return "onnx-int8" if backend == DEFAULT and _int8_trusted(name, folder, record) else "onnx"


def _int8_trusted(name: str, folder: Path, record: dict) -> bool:
    """Whether ``name``'s smoothed int8 graph (made once where hmde ships its calibration) passed its check;
    ``folder`` and ``record``: its export and check, as :func:`resolve` read them."""
    from ..export.cached import describe, ensure_export, int8_form, trusted
    from ..export.smoothing import FORM

    if int8_form(folder) != FORM:
        return False
    try:
        if (record.get("int8") or {}).get("form") != FORM:  # not made yet: made once here
            _, record = ensure_export(name, int8=True)
    except Exception as exc:
        _say_once((name, "int8"), f"the int8 graph of {name} could not be made ({str(exc).splitlines()[0][:200]}); "
                  "running its fp32 graphs")
        return False
    if not trusted(record, int8=True):
        _say_once((name, "int8"), f"the int8 graph of {name} is not used: {describe(record, int8=True)}; running its "
                  "fp32 graphs")
        return False
    return True


def _has_onnxruntime() -> bool:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def _say_once(key, message: str) -> None:
    if key not in _SAID:
        _SAID.add(key)
        logging.getLogger("hmde").warning(message)


def for_job(backend: str | None, sentence_vectors: str | None = None) -> str | None:
    """``backend``, except that ``auto`` is PyTorch for HMDE's contextualised sentence vectors (``context``),
    which only PyTorch's upper encoder gives."""
    return "torch" if backend in (DEFAULT, FP32) and sentence_vectors == "context" else backend


def for_index(meta, asked: str | None = None) -> str:
    """The backend that searches or adds to an index (its ``meta``): ``asked``, else (also for ``auto``) one that
    gives its vectors (:func:`for_reading`); PyTorch where it holds contextualised sentence vectors
    (:func:`for_job`)."""
    chosen = asked if asked and asked != DEFAULT else for_reading(meta.backend)
    return for_job(chosen, meta.sentence_vectors)


def for_adding(asked: str | None, meta, path) -> str:
    """The backend that adds to the index at ``path`` (its ``meta``): ``asked`` where it gives the index's vectors
    (refused in one line where it does not), else one that does."""
    from ..errors import HmdeError

    if asked and asked != DEFAULT and not same_vectors(asked, meta.backend):
        raise HmdeError(f"index {path} was encoded with --backend {meta.backend}; add to it with that backend (or "
                        f"leave --backend out), not {asked}")
    return for_index(meta, asked)


def check_onnx_model(name: str, backend: str) -> None:
    """An ONNX backend asked for a model it cannot run (a sentence encoder), refused in one line before anything
    loads: ONNX Runtime runs hmde models (bundled, a folder) and folders written by ``hmde export onnx``."""
    from ..errors import HmdeError
    from ..export.folder import is_onnx_export
    from .model_folder import is_hmde_folder
    from .registry import resolve_model_path

    if backend not in ("onnx", "onnx-int8") or not name or is_onnx_export(name):
        return
    try:
        path = resolve_model_path(name)
    except HmdeError:
        path = None
    if path is None or not is_hmde_folder(path):
        raise HmdeError(f"--backend {backend} runs hmde models (a bundled name, an hmde folder or a folder written by "
                        f"`hmde export onnx`); '{name}' is not one: use --backend torch")
