"""What every ``hmde recipe`` shares: run one resumable step through hmde's own command line,
build the sentence-query tasks of the evaluation, and install an exported model into the package.

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
    from .main import Terminated, main

    if done:
        print(f"[recipe] {name}: done already, skipped")
        return
    print(f"[recipe] {name}: hmde {' '.join(argv)}", flush=True)
    t0 = time.time()
    status = main(argv)
    if status == 143:  # the step was terminated (SIGTERM): so is the recipe, with the status schedulers requeue on
        raise Terminated()
    if status == 130:
        raise KeyboardInterrupt()
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


def build_sentence_tasks(data: Path, out: Path, news: Path, tasks: tuple[str, ...], long_news_files: tuple[str, ...]
                         ) -> None:
    """Sentence-query tasks ``source-querylang-doclang`` into ``out/sq-TASK``: Bible chapters, or 30-sentence
    WMT stretches of ``long_news_files`` that share no sentence with the training documents ``news``."""
    wmt, bible = data / "parallel" / "wmt", data / "bible"
    long_news = out / "wmt-long.jsonl.gz"
    run_step("long news documents", long_news.exists(), [
        "pseudo-documents", *[str(wmt / f"{f}.tsv.gz") for f in long_news_files], "--output", str(long_news),
        "--lines", "30"])
    for task in tasks:
        source, q, d = task.split("-")
        folder = out / f"sq-{task}"
        files = ([str(bible / f"{q}.jsonl.gz"), str(bible / f"{d}.jsonl.gz")] if source == "bible"
                 else [str(long_news), "--exclude", str(news)])
        run_step(f"sentence queries {task}", (folder / "documents.jsonl").exists(), [
            "sentence-queries", *files, "--query-lang", q, "--doc-lang", d, "-o", str(folder), "--max-queries", "1000"])
