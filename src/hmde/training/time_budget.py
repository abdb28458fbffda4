"""Training sized to a span of time: the step count that fits a budget of minutes.

A GPU lease or a job slot is a span of time, not an epoch count. A trainer given a budget runs a few
untimed warm-up steps (the allocator, kernel autotuning), times the next few, and shrinks its step count,
and with it the linear learning-rate schedule, to what fits the budget counted from its first step.
"""

from __future__ import annotations


def fit_steps_to_budget(step: int, rate: float, elapsed_s: float, budget_s: float, total: int) -> int:
    """Total steps that end the optimisation within ``budget_s``, given ``rate`` steps per second measured
    at ``step`` after ``elapsed_s`` seconds: never grown past ``total`` (the epochs or steps asked for), never
    under ``step + 1``. 5% of the budget is held back for checkpoints and the final save."""
    fit = step + int((0.95 * budget_s - elapsed_s) * rate)
    return max(step + 1, min(total, fit))
