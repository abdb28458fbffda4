"""``hmde train``'s checks of its run folder before any model loads: a run is continued with --resume (with
the settings and model it was started with) or replaced with --overwrite, never mixed."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import HmdeError


def check_run_output(output: Path, resume: bool, overwrite: bool) -> None:
    """Before any work: an OUTPUT that holds an earlier run (a model or a checkpoint) is continued with
    --resume or replaced with --overwrite, never silently mixed with a new run (it replaced the model
    and checkpoint and interleaved the two runs' logs). --overwrite removes only what a run writes."""
    import shutil

    from ..encoders.hierarchical import is_hmde_folder
    from ..ground.output_dirs import check_replaceable
    from ..pretraining.trainer import CHECKPOINT_DIR, RUN_ENTRIES

    if resume and overwrite:
        raise HmdeError("--resume continues the run in OUTPUT and --overwrite replaces it: pass one")
    if resume:
        return
    if output.is_dir() and {e.name for e in output.iterdir()} <= set(RUN_ENTRIES) - {CHECKPOINT_DIR}:
        return  # a run killed before its first checkpoint: nothing to resume, nothing to replace (recipes rerun)
    check_replaceable(output, "hmde training run", lambda p: is_hmde_folder(p) or (p / CHECKPOINT_DIR).exists(),
                      overwrite, flag="--overwrite (or --resume to continue it)")
    if overwrite and output.is_dir():
        for name in RUN_ENTRIES:
            target = output / name
            if target.is_symlink():  # the link is the run's; what it points to is not hmde's to delete
                target.unlink()
            elif target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()


# flag -> the training_config.json field it sets: a resumed run must ask for what its checkpoint was trained
# with (another --lr was silently ignored, another --batch-size silently used)
RESUMED_SETTINGS = {"lr": "lr", "batch_size": "batch_size", "grad_accum": "grad_accum", "seed": "seed",
                    "weight_decay": "weight_decay", "temperature": "temperature", "warmup": "warmup",
                    "freeze_lower": "freeze_lower", "lower_trainable": "lower_trainable", "symmetric": "symmetric",
                    "anchor_side": "anchor_side", "query_loss_weight": "query_weight",
                    "sentence_loss_weight": "sentence_weight"}


def starting_model_name(model: str) -> str:
    """What a run records as the model it started from: a bundled name, else the folder's absolute path."""
    path = Path(model).expanduser()
    return str(path.resolve()) if path.exists() else str(model)


def check_resume_arguments(output: Path, args: argparse.Namespace) -> None:
    """Before any model loads: --resume continues the run in OUTPUT with the settings it was started with
    (its training_config.json) and from the same model; any other is refused in one line."""
    import json

    from ..pretraining.trainer import CHECKPOINT_DIR, CONFIG_FILE

    config_path = output / CONFIG_FILE
    if not (output / CHECKPOINT_DIR).exists() or not config_path.is_file():
        return  # nothing to resume: the trainer starts the run (as before)
    try:
        recorded = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        raise HmdeError(f"{config_path}: not readable JSON; start a new run with --overwrite") from None
    if not isinstance(recorded, dict):
        raise HmdeError(f"{config_path}: must hold a JSON object; start a new run with --overwrite")
    started = recorded.get("start_model")
    if started and started != starting_model_name(args.model) and not (output / "config.json").exists():
        raise HmdeError(f"{output} was started from {started}, not {args.model}: resume with that model (or start "
                        "a new run with --overwrite)")
    for flag, field_name in RESUMED_SETTINGS.items():
        if field_name in recorded and getattr(args, flag, None) is not None:
            asked = getattr(args, flag)
            if field_name == "lr" and isinstance(recorded[field_name], (int, float)):
                same = abs(float(asked) - float(recorded[field_name])) <= 1e-12 * max(1.0, abs(float(asked)))
            else:
                same = asked == recorded[field_name]
            if not same:
                raise HmdeError(f"{output} was trained with --{flag.replace('_', '-')} {recorded[field_name]}; resume "
                                f"with the same value, not {asked} (or start a new run with --overwrite)")
