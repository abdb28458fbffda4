"""What every ``hmde recipe`` shares: run one resumable step through hmde's own command line,
and install an exported model into the package.

Why a module of its own: the recipes (mini, use, e5) each import these two helpers; kept in
recipe.py they made recipe.py and recipe_use.py import each other.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from ..errors import HmdeError


def run_step(name: str, done: bool, argv: list[str]) -> None:
    """Run ``hmde ARGV`` unless ``done`` (its output exists): an interrupted recipe resumes here."""
    from .main import main

    if done:
        print(f"[recipe] {name}: done already, skipped")
        return
    print(f"[recipe] {name}: hmde {' '.join(argv)}", flush=True)
    t0 = time.time()
    status = main(argv)
    if status:
        raise HmdeError(f"recipe step '{name}' failed (exit status {status})")
    print(f"[recipe] {name}: {time.time() - t0:.0f} s", flush=True)


def install(export: Path, name: str) -> None:
    """Copy an exported model into the package as the bundled model ``name`` (no checkpoints or logs)."""
    from ..registry import PACKAGE_MODELS

    target = PACKAGE_MODELS / name
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(export, target, ignore=shutil.ignore_patterns("checkpoint", "*.jsonl", "training_config.json"))
    print(f"[recipe] installed into {target}")
