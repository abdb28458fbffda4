"""What every recipe shares: run one resumable step as an ``hmde`` command, build the sentence-query
tasks of the evaluation, and install an exported model into the package.

A step is an ``hmde`` command line: what a user could type to redo it. Who runs it is the caller's
choice (:func:`commands`): the command line runs them in its own process (``hmde recipe``), a Python
caller by default in a child process (``python -m hmde``), so that this library never imports the
command line.
"""

from __future__ import annotations

import contextlib
import contextvars
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

from ..errors import HmdeError, Terminated

Runner = Callable[[list[str]], int]  # runs ``hmde ARGV``, returns its exit status


def in_child_process(argv: list[str]) -> int:
    return subprocess.call([sys.executable, "-m", "hmde", *argv])


_RUNNER: contextvars.ContextVar[Runner] = contextvars.ContextVar("hmde_recipe_runner", default=in_child_process)


@contextlib.contextmanager
def commands(runner: Runner) -> Iterator[None]:
    """Within the block, recipe steps run through ``runner`` (``hmde recipe`` passes its own ``main``)."""
    token = _RUNNER.set(runner)
    try:
        yield
    finally:
        _RUNNER.reset(token)


def run_step(name: str, done: bool, argv: list[str]) -> None:
    """Run ``hmde ARGV`` unless ``done`` (its output exists): an interrupted recipe resumes here."""
    if done:
        print(f"[recipe] {name}: done already, skipped")
        return
    print(f"[recipe] {name}: hmde {' '.join(argv)}", flush=True)
    t0 = time.time()
    status = _RUNNER.get()(argv)
    if status == 143:  # the step was terminated (SIGTERM): so is the recipe, with the status schedulers requeue on
        raise Terminated()
    if status == 130:
        raise KeyboardInterrupt()
    if status:
        raise HmdeError(f"recipe step '{name}' failed (exit status {status})")
    print(f"[recipe] {name}: {time.time() - t0:.0f} s", flush=True)


def run_folders(options) -> tuple[Path, Path]:
    """The shared data folder (checked: parallel/, bible/, eval/) and the run folder of a recipe."""
    data, out = Path(options.data), Path(options.output)
    for sub in ("parallel", "bible", "eval"):
        if not (data / sub).is_dir():
            raise HmdeError(f"{data} has no {sub}/ folder: point --data at the shared data")
    return data, out


def install(export: Path, name: str) -> None:
    """Copy an exported model into the package as the bundled model ``name`` (no checkpoints or logs)."""
    from ..encoders.registry import PACKAGE_MODELS

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
