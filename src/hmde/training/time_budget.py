"""Training sized to a span of time: the step count that fits a budget of minutes.

A GPU lease or a job slot is a span of time, not an epoch count. A trainer given a budget runs a few
untimed warm-up steps (the allocator, kernel autotuning), times the next few, and shrinks its step count,
and with it the linear learning-rate schedule, to what fits the budget counted from its first step.

The first count is only an estimate: on a GPU, steps keep getting faster long after the probe (every new
sequence-length shape is tuned once; the loader's prefetch fills). Measured on an H200 (hmde-e5's joint
stage, docs/hmde-e5.md), the probe's rate was 0.6 of the later one and a 4.5-minute budget ended after
2.8. So the count is fitted again at a quarter, a half and three quarters of the way, from the rate of
every step since the probe; the trainer re-plans its schedule each time.
"""

from __future__ import annotations

import time


def fit_steps_to_budget(step: int, rate: float, elapsed_s: float, budget_s: float, total: int) -> int:
    """Total steps that end the optimisation within ``budget_s``, given ``rate`` steps per second measured
    at ``step`` after ``elapsed_s`` seconds: never grown past ``total`` (the epochs or steps asked for), never
    under ``step + 1``. 5% of the budget is held back for checkpoints and the final save."""
    fit = step + int((0.95 * budget_s - elapsed_s) * rate)
    return max(step + 1, min(total, fit))


REFITS = (0.25, 0.5, 0.75)  # fractions of the run at which the count is fitted again


class BudgetProbe:
    """The timing of one run: ``warmup`` untimed steps from ``start_step``, then ``probe`` timed ones, after which
    :meth:`fitted_total` gives the step count that fits ``minutes`` counted from ``t0`` (the run's first step);
    it gives a new count again at each of :data:`REFITS` of the way to the last count, from the rate of every
    step since the probe began. Both trainers use it; each re-plans its own learning-rate schedule with the
    count. ``total`` caps every count (the epochs or steps asked for)."""

    def __init__(self, minutes: float, start_step: int, t0: float, warmup: int, probe: int):
        self.budget_s, self.start_step, self.t0 = minutes * 60, start_step, t0
        self.warmup, self.probe, self.probe_t0 = warmup, probe, t0
        self.refit_at: list[int] = []
        self.last: int | None = None

    def fitted_total(self, step: int, total: int) -> int | None:
        """Call after each step: a step count where one is fitted (after the probe, then at each refit that
        changes it), else None."""
        done = step - self.start_step
        if done == self.warmup:
            self.probe_t0 = time.time()
            return None
        if done < self.warmup + self.probe or (done > self.warmup + self.probe and step not in self.refit_at):
            return None
        now = time.time()
        timed = done - self.warmup
        fitted = fit_steps_to_budget(step, timed / max(now - self.probe_t0, 1e-9), now - self.t0, self.budget_s, total)
        if done == self.warmup + self.probe:
            self.refit_at = sorted({round(self.start_step + f * (fitted - self.start_step)) for f in REFITS}
                                   - set(range(step + 1)))
        elif fitted == self.last:
            return None
        self.last = fitted
        return fitted
