"""Load what a command names: an hmde model (a folder, a bundled name, a hub id, an ONNX export)
or a sentence encoder, as ``(kind, model)``. Library code (the index, the Ray actors) and the
command line load through here, so every caller resolves names the same way.
"""

from __future__ import annotations

from ..errors import HmdeError
from .registry import resolve_model_path


def load_model(name: str, device: str, want: str = "any", backend: str | None = None, lengths: dict | None = None,
               languages=None):
    """Load ``name`` as ``("hmde", HierarchicalEncoder)`` or ``("sentence", SentenceEncoder)``, with the
    document-length settings ``lengths`` applied (HierarchicalConfig fields; :mod:`hmde.encoders.length_settings`).
    ``backend`` (:mod:`hmde.encoders.backends`): ``torch`` (also None), ``onnx``/``onnx-int8`` (an exported folder,
    or an hmde model's graphs made and checked in hmde's cache; a HierarchicalEncoder too), or ``auto``: ONNX
    Runtime for a bundled model on a CPU, PyTorch otherwise.
    ``hmde-auto`` is routed by ``languages`` (:mod:`hmde.encoders.routing`); a caller that records the model
    (an index) routes first and passes the name it got."""
    from .backends import resolve
    from .quiet import quiet_libraries
    from .routing import route

    quiet_libraries()  # Python callers too: no load bars or prompt notices
    name = route(name, languages)
    asked, backend = backend, resolve(name, device, backend)
    if backend == "torch-bf16":
        from .cpu_bf16 import use_bf16

        kind, model = _load_model(name, "cpu", want)
        if not use_bf16(name, model):  # its check failed on this CPU (said once): the ONNX graphs, as elsewhere
            backend = resolve(name, device, asked, bf16=False)
            if backend != "torch":
                kind, model = _load_onnx(name, backend)
    else:
        kind, model = _load_onnx(name, backend) if backend != "torch" else _load_model(name, device, want)
    if lengths:
        from .length_settings import apply_length_overrides

        apply_length_overrides(model, lengths)
    return kind, model


def _load_onnx(name: str, backend: str):
    """An exported folder, or the checked graphs of an hmde model in hmde's cache (made on first use)."""
    from ..export.onnx import OnnxHierarchicalEncoder, is_onnx_export

    int8 = backend == "onnx-int8"
    if is_onnx_export(name):
        return "hmde", OnnxHierarchicalEncoder(name, int8=int8)
    from ..export.cached import describe, ensure_export, trusted
    from .backends import check_onnx_model

    check_onnx_model(name, backend)
    folder, record = ensure_export(name, int8=int8)
    if not int8 and not trusted(record):
        import logging

        logging.getLogger("hmde").warning("the ONNX graphs of %s differ from PyTorch (%s); using them as asked",
                                          name, describe(record))
    return "hmde", OnnxHierarchicalEncoder(folder, int8=int8)


def _load_model(name: str, device: str, want: str = "any"):
    from ..export.folder import is_onnx_export
    from .hierarchical import HierarchicalEncoder
    from .model_folder import is_hmde_folder
    from .sentence_encoder import SentenceEncoder

    if is_onnx_export(name):
        raise HmdeError(f"'{name}' is an ONNX export: run it with --backend onnx (or onnx-int8)")
    try:
        path = resolve_model_path(name)
    except HmdeError:
        path = None
        if want == "hmde":
            raise
    if path is not None and is_hmde_folder(path):
        return "hmde", HierarchicalEncoder.from_pretrained(str(path), device=device)
    return "sentence", SentenceEncoder.load(str(path or name), device=device)
