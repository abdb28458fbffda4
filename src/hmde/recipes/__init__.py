"""The pipelines that build the bundled models (hmde-mini, hmde-use, hmde-e5) from the open data: each
step an ``hmde`` command, skipped when its output exists. ``run("e5", RecipeOptions(...))`` from Python."""

from __future__ import annotations

from .options import RecipeOptions

NAMES = ("mini", "use", "e5")


def run(name: str, options: RecipeOptions) -> int:
    """Run (or resume) the recipe ``name``; steps run as :func:`hmde.recipes.steps.commands` says."""
    if name == "use":
        from .use import run_use

        return run_use(options)
    if name == "e5":
        from .e5 import run_e5

        return run_e5(options)
    if name == "mini":
        from .mini import run_mini

        return run_mini(options)
    from ..errors import HmdeError

    raise HmdeError(f"unknown recipe '{name}' (choose from {', '.join(NAMES)})")
