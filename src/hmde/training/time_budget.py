"""Training sized to a span of time: the step count that fits a budget of minutes.

A GPU lease or a job slot is a span of time, not an epoch count. A trainer given a budget runs a few
untimed warm-up steps (the allocator, kernel autotuning), times the next few, and shrinks its step count,
and with it the linear learning-rate schedule, to what fits the budget counted from its first step.
"""

from __future__ import annotations

import time


def fit_steps_to_budget(step: int, rate: float, elapsed_s: float, budget_s: float, total: int) -> int:
    """Total steps that end the optimisation within ``budget_s``, given ``rate`` steps per second measured
    at ``step`` after ``elapsed_s`` seconds: never grown past ``total`` (the epochs or steps asked for), never
    under ``step + 1``. 5% of the budget is held back for checkpoints and the final save."""
    fit = step + int((0.95 * budget_s - elapsed_s) * rate)
    return max(step + 1, min(total, fit))


class BudgetProbe:
    """The timing of one run: ``warmup`` untimed steps from ``start_step``, then ``probe`` timed ones, after which
    :meth:`fitted_total` gives the step count that fits ``minutes`` counted from ``t0`` (the run's first step).
    Both trainers use it; each re-plans its own learning-rate schedule with the count."""

    def __init__(self, minutes: float, start_step: int, t0: float, warmup: int, probe: int):
        self.budget_s, self.start_step, self.t0 = minutes * 60, start_step, t0
        self.warmup, self.probe, self.probe_t0 = warmup, probe, t0

    def fitted_total(self, step: int, total: int) -> int | None:
        """Call after each step: None, except once, after the last timed step, where the fitted count comes."""
        done = step - self.start_step
        if done == self.warmup:
            self.probe_t0 = time.time()
        elif done == self.warmup + self.probe:
            now = time.time()
            return fit_steps_to_budget(step, self.probe / max(now - self.probe_t0, 1e-9), now - self.t0,
                                       self.budget_s, total)
        return None
