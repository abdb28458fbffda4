"""The saved hmde folder's own files: ``config.json`` (model_type hmde, the upper encoder's
settings, the lower encoder's folder) and ``model.safetensors`` (the upper encoder).

Why a module of its own: the model (:mod:`hmde.encoders.hierarchical`), its sentence-transformers
adapter (:mod:`hmde.st_router`) and the run records (:mod:`hmde.evaluation.provenance`) all
read this format; kept apart from the model, none of them needs to import another to do so.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..ground.atomic import atomic_path, write_text_atomic
from .config import HierarchicalConfig
from ..errors import HmdeError, ModelLoadError
from ..version import __version__

if TYPE_CHECKING:  # PyTorch loads with the weights: reading a folder's config (is_hmde_folder) needs none
    import torch
    from torch import nn

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
LOWER_DIR = "lower"
MODEL_TYPE = "hmde"
DOCUMENT_MODULE_TYPE = "hmde.st_router.HmdeDocumentModule"
ROUTER_CONFIG = "router_config.json"
QUERY_ROUTE, DOCUMENT_ROUTE = "query", "document"
ROOT_ID = "."  # the document module's folder inside a saved hmde folder: the root itself


def read_model_config(path: Path) -> dict:
    """Read and check an HMDE folder's config.json."""
    config_path = Path(path) / CONFIG_NAME
    if not config_path.exists():
        raise ModelLoadError(f"'{path}' has no {CONFIG_NAME}: it is not a saved hmde model")
    return parse_model_config(config_path)


def parse_model_config(config_path: Path) -> dict:
    """hmde's model config.json (``model_type`` hmde), checked."""
    try:
        meta = json.loads(config_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ModelLoadError(f"{config_path}: invalid JSON ({exc.msg}, line {exc.lineno})") from exc
    except UnicodeDecodeError as exc:
        raise ModelLoadError(f"{config_path}: not UTF-8 text (byte {exc.start}); save it as UTF-8 JSON") from exc
    if not isinstance(meta, dict):
        raise ModelLoadError(f"{config_path}: expected a JSON object, got {type(meta).__name__}")
    if meta.get("model_type") != MODEL_TYPE:
        raise ModelLoadError(
            f"'{config_path.parent}' is not an hmde model (config.json model_type={meta.get('model_type')!r}); "
            "for a sentence encoder use HierarchicalEncoder.from_sentence_encoder or `--queries`"
        )
    if "config" not in meta:
        raise ModelLoadError(f"{config_path}: field 'config' is missing")
    hidden = meta.get("hidden_size")
    if not isinstance(hidden, int) or isinstance(hidden, bool) or hidden < 1:
        raise ModelLoadError(f"{config_path}, field 'hidden_size': must be a positive integer, got {hidden!r}")
    lower = meta.get("lower_encoder", LOWER_DIR)
    if lower is not None and (not isinstance(lower, str) or not lower or "/" in lower or lower.startswith(".")):
        raise ModelLoadError(f"{config_path}, field 'lower_encoder': must name a folder beside it, got {lower!r}")
    try:
        config = HierarchicalConfig.from_dict(meta["config"])
    except HmdeError as exc:
        raise ModelLoadError(f"{config_path}: {exc}") from None
    if hidden % config.num_heads:
        raise ModelLoadError(f"{config_path}, field 'config.num_heads': {config.num_heads} heads do not divide the "
                             f"hidden size {hidden}")
    return meta


def load_upper_state(upper: nn.Module, weights: Path) -> None:
    """The upper encoder's weights from a safetensors file (stored in any float type)."""
    import torch
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        state = load_file(str(weights))
    except (OSError, SafetensorError) as exc:
        raise ModelLoadError(f"{weights}: not a readable safetensors file ({exc})") from exc
    damaged = next((k for k, v in state.items() if v.is_floating_point() and not torch.isfinite(v).all()), None)
    if damaged is not None:
        raise ModelLoadError(f"{weights}: tensor {damaged!r} holds NaN or infinite values (a diverged training run?); "
                             "retrain, or use an earlier checkpoint")
    missing, unexpected = upper.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
    if missing or unexpected:
        raise ModelLoadError(f"{weights}: weights do not match (missing {missing}, unexpected {unexpected})")


def write_upper(path: Path, upper: nn.Module, config: HierarchicalConfig, hidden_size: int,
                lower_encoder: str | None, dtype: torch.dtype | None = None) -> None:
    """model.safetensors (the upper encoder) then config.json, each atomically. ``lower_encoder``:
    the lower encoder's folder name, or None for the document module of a sentence-transformers save."""
    from safetensors.torch import save_file

    state = {k: v.detach().contiguous().cpu() for k, v in upper.state_dict().items()}
    if dtype is not None:
        state = {k: v.to(dtype) for k, v in state.items()}
    with atomic_path(path / WEIGHTS_NAME) as tmp:
        save_file(state, str(tmp), metadata={"format": "pt"})
    meta = {
        "model_type": MODEL_TYPE,
        "hmde_version": __version__,
        "hidden_size": hidden_size,
        "lower_encoder": lower_encoder,
        "config": config.to_dict(),
    }
    write_text_atomic(path / CONFIG_NAME, json.dumps(meta, indent=2, sort_keys=True) + "\n")


def declare_float32(folder: Path) -> None:
    """Weights stored in half precision, computed in float32: config.json says float32, so that plain
    sentence-transformers / transformers load them as hmde does (cast up on load) instead of running
    float16 on a CPU (slow, a warning, and vectors 1e-3 away from hmde's)."""
    config = folder / "config.json"
    if not config.exists():
        return
    data = json.loads(config.read_text(encoding="utf-8"))
    changed = False
    for key in ("dtype", "torch_dtype"):
        if data.get(key) not in (None, "float32"):
            data[key], changed = "float32", True
    if changed:
        write_text_atomic(config, json.dumps(data, indent=2, sort_keys=True) + "\n")


def is_hmde_folder(path: str | os.PathLike) -> bool:
    config_path = Path(path) / CONFIG_NAME
    if not config_path.exists():
        return False
    try:
        raw = config_path.read_bytes()
    except OSError:
        return False
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):  # damaged: if it was hmde's, parse_model_config says how
        return b'"model_type"' in raw and b'"hmde"' in raw
    if not isinstance(meta, dict):
        return (Path(path) / LOWER_DIR).is_dir()
    return meta.get("model_type") == MODEL_TYPE


def router_files(lower_dir: Path, lower_name: str) -> dict[str, Any]:
    """The contents of modules.json, router_config.json and config_sentence_transformers.json for an
    hmde folder whose lower encoder (a sentence-transformers folder) is ``lower_dir``, saved as ``lower_name``."""
    entries_path = lower_dir / "modules.json"
    try:
        entries = json.loads(entries_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelLoadError(f"{entries_path}: not a readable sentence-transformers modules.json ({exc})") from exc
    types, query = {}, []
    for entry in entries:
        model_id = f"{lower_name}/{entry['path']}" if entry.get("path") else lower_name
        types[model_id] = entry["type"]
        query.append(model_id)
    types[ROOT_ID] = DOCUMENT_MODULE_TYPE
    from sentence_transformers import __version__ as st_version

    try:
        from sentence_transformers.base.modules.router import Router
    except ImportError:  # pragma: no cover - sentence-transformers < 6
        from sentence_transformers.models import Router

    # the query route is the lower encoder alone, so it takes the lower encoder's query prompt
    # (multilingual-e5-small: "query: "); document sentences get theirs inside hmde's module
    try:
        lower_prompts = json.loads((lower_dir / "config_sentence_transformers.json").read_text(encoding="utf-8"))
        query_prompt = (lower_prompts.get("prompts") or {}).get(QUERY_ROUTE, "")
    except (OSError, json.JSONDecodeError, AttributeError):
        query_prompt = ""

    return {
        "modules.json": [{"idx": 0, "name": "0", "path": "", "type": f"{Router.__module__}.{Router.__name__}"}],
        ROUTER_CONFIG: {"types": types, "structure": {QUERY_ROUTE: query, DOCUMENT_ROUTE: [ROOT_ID]},
                        "parameters": {"default_route": DOCUMENT_ROUTE, "allow_empty_key": True,
                                       "route_mappings": {}}},
        "config_sentence_transformers.json": {"model_type": "SentenceTransformer",
                                              "__version__": {"sentence_transformers": st_version},
                                              "prompts": {QUERY_ROUTE: query_prompt} if query_prompt else {},
                                              "default_prompt_name": None,
                                              "similarity_fn_name": "cosine"},
    }


def write_sentence_transformers_files(path: Path) -> None:
    """modules.json, router_config.json and config_sentence_transformers.json of an hmde folder
    (:mod:`hmde.st_router`); also upgrades a folder saved before they existed."""
    for name, content in router_files(Path(path) / LOWER_DIR, LOWER_DIR).items():
        write_text_atomic(Path(path) / name, json.dumps(content, indent=2) + "\n")


def router_routes(path: Path) -> tuple[list[dict], str]:
    """A sentence-transformers save of an hmde model (a Router folder without hmde's root
    config.json): the query route's modules as modules.json entries, and the folder of
    hmde's document module (its config.json and upper weights)."""
    config_path = Path(path) / ROUTER_CONFIG
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
        types, structure = config["types"], config["structure"]
        query = [{"path": "" if model_id == ROOT_ID else model_id, "type": types[model_id]}
                 for model_id in structure[QUERY_ROUTE]]
        document = [model_id for model_id in structure[DOCUMENT_ROUTE] if types[model_id] == DOCUMENT_MODULE_TYPE]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ModelLoadError(f"{config_path}: not a readable Router config ({type(exc).__name__}: {exc})") from None
    if len(document) != 1:
        raise ModelLoadError(f"{config_path}: the document route has no hmde document module; not an hmde model")
    return query, document[0]
