"""The step count of a run given minutes (hmde.training.time_budget): fitted after a probe, then again."""

import hmde.training.time_budget as time_budget
from hmde.training.time_budget import BudgetProbe


def _clocked(monkeypatch, times):
    clock = iter(times)
    monkeypatch.setattr(time_budget.time, "time", lambda: float(next(clock)))


def test_steps_that_speed_up_after_the_probe_are_fitted_again(monkeypatch):
    """A 60-second budget, 2 untimed steps, 3 timed: steps 3-5 take 5 s each, later ones 1 s (a GPU tunes each
    new shape once). Hand-computed: after step 5, 3 steps in 15 s at 25 s: 5 + int((57 - 25) x 0.2) = 11, with
    refits at steps 6 and 8 (a quarter, a half and three quarters of 11, less those already run); at step 6,
    4 steps in 16 s: 6 + int((57 - 26) x 0.25) = 13; at step 8, 6 in 18 s: 8 + int((57 - 28) / 3) = 17."""
    _clocked(monkeypatch, [10, 25, 26, 28])  # time.time() at steps 2, 5, 6 and 8 only
    probe = BudgetProbe(1.0, start_step=0, t0=0.0, warmup=2, probe=3)
    fitted = {step: probe.fitted_total(step, total=1000) for step in range(1, 10)}
    assert fitted == {1: None, 2: None, 3: None, 4: None, 5: 11, 6: 13, 7: None, 8: 17, 9: None}


def test_a_refit_never_passes_the_steps_asked_for_and_says_nothing_when_unchanged(monkeypatch):
    _clocked(monkeypatch, [10, 25, 26, 28])
    probe = BudgetProbe(1.0, start_step=0, t0=0.0, warmup=2, probe=3)
    assert [probe.fitted_total(step, total=12) for step in range(1, 10)] == [None, None, None, None, 11, 12, None,
                                                                              None, None]


def test_a_resumed_run_probes_from_where_it_starts(monkeypatch):
    """start_step 100 (a resume): the probe counts its steps from there, and refits fall after it."""
    _clocked(monkeypatch, [10, 25, 26, 28])
    probe = BudgetProbe(1.0, start_step=100, t0=0.0, warmup=2, probe=3)
    assert [probe.fitted_total(step, total=1000) for step in range(101, 110)] == [None, None, None, None, 111, 113,
                                                                                  None, 117, None]
