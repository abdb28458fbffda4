"""Resolve model names: local folders, models bundled with hmde, hub ids.

``hmde-mini`` is trained here from open data (see the model card in its folder) and
ships inside the package, so every command works on a machine with no hub access.
"""

from __future__ import annotations

from pathlib import Path

from .errors import ModelLoadError, unreachable_model_message

PACKAGE_MODELS = Path(__file__).parent / "models"
DEFAULT_MODEL = "hmde-mini"


def bundled_models() -> list[str]:
    if not PACKAGE_MODELS.is_dir():
        return []
    return sorted(p.name for p in PACKAGE_MODELS.iterdir() if (p / "config.json").exists())


def resolve_model_path(name_or_path: str) -> Path:
    """Return the local folder of a model name, downloading hub ids when possible."""
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return path
    bundled = PACKAGE_MODELS / str(name_or_path)
    if (bundled / "config.json").exists():
        return bundled
    if str(name_or_path) == DEFAULT_MODEL:
        raise ModelLoadError(
            f"the default model '{DEFAULT_MODEL}' is not bundled with this installation of hmde; "
            "rebuild it with `hmde recipe mini --data ../shared/data` or pass a model folder"
        )
    if path.exists() or str(name_or_path).startswith((".", "/", "~")) or str(name_or_path).count("/") > 1:
        raise ModelLoadError(f"model folder '{name_or_path}' does not exist")
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(str(name_or_path)))
    except Exception as exc:  # hub errors come in many types; all mean "not available"
        raise ModelLoadError(unreachable_model_message(str(name_or_path))) from exc
