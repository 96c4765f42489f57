"""The accountant's ``subsampled`` mode (Koskela & Kulkarni 2023, variant 1): a
random-stopping tuning phase on a Poisson(q) subset, priced amplified, composed with
one final run; the final run is granted once, after the K tuning grants, and only
within the budget."""

from __future__ import annotations

import math

import pytest

from raydp_synth.accountant.core import (
    FINAL_PHASE,
    REASON_BUDGET,
    REASON_FINAL_DONE,
    REASON_INVALID,
    REASON_NOT_DOMINATED,
    REASON_TRIAL_COUNT,
    REASON_TUNING_UNFINISHED,
    SUBSAMPLED_BOUND,
    StudyBudget,
    StudySettings,
    new_study_header,
)
from raydp_synth.errors import ConfigError
from raydp_synth.privacy.accounting import rdp_curve
from raydp_synth.privacy.events import event_from_json, event_to_json, subsampled_gaussian_event
from raydp_synth.privacy.subsampled_tuning import (
    amplified_tuning_rdp,
    epsilon_from_rdp,
    variant1_rdp,
)
from tests.fixed_schedule import FixedSchedule, SubsampledPlans, gaussian_spec, subsampled_plans

DELTA = 1e-5
#: The fixed plan of the golden values: E_ref is 50 steps of a Gaussian at rate 0.1 (on
#: the subset's m records); the final run 50 steps at the same rate on all n records.
Q, MEAN, SHAPE = 0.1, 4, 1.0  # geometric K


def _trial(sigma: float):
    return subsampled_gaussian_event(noise_multiplier=sigma, sample_rate=0.1, num_steps=50)


@pytest.fixture(scope="module")
def split() -> SubsampledPlans:
    """E_ref and the final run as the study plans them (tune/planning.py), the
    tuning phase at 0.2 of epsilon 4."""
    run = FixedSchedule(gaussian_spec("run", sample_rate=0.1, num_steps=50))
    return subsampled_plans(epsilon=4.0, delta=DELTA, tune_fraction=Q, mean=MEAN, shape=SHAPE,
                            tuning_share=0.2, trial=run, final=run)


def _trial_sigma(split: SubsampledPlans) -> float:
    return split.reference.mechanism("run").noise_multiplier


def _final_sigma(split: SubsampledPlans) -> float:
    return split.final.mechanism("run").noise_multiplier


def _settings(split, epsilon: float = 4.0) -> StudySettings:
    return StudySettings(epsilon=epsilon, delta=DELTA, mode="subsampled", trials=MEAN,
                         distribution="geometric", tune_fraction=Q,
                         reference_event=event_to_json(split.reference.event()))


def _budget(split, trial_count: int = 2) -> StudyBudget:
    settings = _settings(split)
    header = new_study_header(settings, name="s") | {"trial_count": trial_count}
    return StudyBudget(settings, header)


def _apply(budget: StudyBudget, decision) -> None:
    budget.record(decision)


def _draw(budget: StudyBudget, *trial_ids: str) -> list[dict]:
    """The search's draws of ``trial_ids`` (a tuning trial is granted only if drawn);
    their ledger entries."""
    entries = []
    for trial_id in trial_ids:
        drawn, entry = budget.decide_draw(trial_id)
        assert drawn and entry is not None
        budget.take_draws(entry)
        entries.append(entry)
    return entries


def test_golden_variant1_statement_on_a_fixed_plan(split) -> None:
    """Computed by the code that runs (the study's planners, E_ref then the final run,
    then the accountant's statement after K tuning grants and the final grant), pinned."""
    assert _trial_sigma(split) == pytest.approx(2.3409, rel=2e-3)
    assert _final_sigma(split) == pytest.approx(1.2606, rel=2e-3)
    budget = _budget(split)
    draws = _draw(budget, "a", "b")
    for t in ("a", "b"):
        _apply(budget, budget.decide(t, event_to_json(_trial(_trial_sigma(split)))))
    final = event_to_json(split.final.event())
    decision = budget.decide("final", final, final=True)
    assert decision.granted and decision.entry["phase"] == FINAL_PHASE
    _apply(budget, decision)
    s = budget.statement()
    assert s["mode"] == "subsampled" and s["tune_fraction"] == Q and s["variant"] == 1
    assert s["theorem"] == SUBSAMPLED_BOUND and "Zhu & Wang" in s["theorem"]
    assert s["tuning_epsilon"] == pytest.approx(0.8, rel=2e-3)  # the share: 0.2 x 4
    assert s["tuning_epsilon"] == pytest.approx(0.7994, abs=5e-4)
    assert s["final_run_epsilon"] == pytest.approx(3.8229, abs=5e-4)
    # calibrate_plan (rtol 2e-3) uses at least 1 - 2e-3 of the budget, never more.
    assert s["epsilon"] == s["total_epsilon"] == pytest.approx(3.9987, abs=5e-4)
    assert s["epsilon"] <= 4.0
    # The statement is the composition evaluated by the functions of the bound.
    tune = amplified_tuning_rdp(split.reference.event(), mean=MEAN, shape=SHAPE,
                                tune_fraction=Q)
    assert s["epsilon"] == epsilon_from_rdp(
        variant1_rdp(tune, event_from_json(final)), DELTA)
    assert s["final_run_epsilon"] == epsilon_from_rdp(rdp_curve(event_from_json(final)), DELTA)
    assert split.total_epsilon == pytest.approx(s["epsilon"], rel=1e-9)
    # Replay gives the same statement.
    entries = [new_study_header(_settings(split), name="s") | {"trial_count": 2},
               *draws, *(g for g in budget.grants.values())]
    assert StudyBudget.replay(entries).statement()["epsilon"] == s["epsilon"]


def test_the_final_run_is_refused_beyond_the_total_before_k_and_twice(split) -> None:
    budget = _budget(split)
    final = event_to_json(split.final.event())
    early = budget.decide("final", final, final=True)
    assert not early.granted and early.reason.startswith(REASON_TUNING_UNFINISHED)
    _draw(budget, "a", "b")
    for t in ("a", "b"):
        _apply(budget, budget.decide(t, event_to_json(_trial(_trial_sigma(split)))))
    assert not budget.can_grant()  # K tuning trials: the search stops
    third = budget.decide("c", event_to_json(_trial(_trial_sigma(split))))
    assert not third.granted and third.reason == REASON_TRIAL_COUNT
    # A final run a little less noised than the split's would exceed the total.
    greedy = budget.decide("final", event_to_json(_trial(_final_sigma(split) * 0.98)),
                           final=True)
    assert not greedy.granted and greedy.reason.startswith(REASON_BUDGET)
    assert budget.spent_epsilon() == pytest.approx(budget.ledger_statement()["tuning_epsilon"])
    _apply(budget, budget.decide("final", final, final=True))
    again = budget.decide("final2", final, final=True)
    assert not again.granted and again.reason == REASON_FINAL_DONE
    assert budget.spent_epsilon() <= 4.0


def test_tuning_trials_must_be_dominated_and_final_only_in_subsampled_mode(split) -> None:
    budget = _budget(split)
    _draw(budget, "a")
    loud = budget.decide("a", event_to_json(_trial(_trial_sigma(split) * 0.9)))
    assert not loud.granted and loud.reason.startswith(REASON_NOT_DOMINATED)
    rs = StudySettings(epsilon=4.0, delta=DELTA, mode="random-stopping", trials=MEAN,
                       distribution="geometric",
                       reference_event=event_to_json(_trial(_trial_sigma(split))))
    other = StudyBudget(rs, new_study_header(rs, name="r"))
    refused = other.decide("x", event_to_json(_trial(5.0)), final=True)
    assert not refused.granted and refused.reason.startswith(REASON_INVALID)


def test_settings_refuse_a_bad_fraction_and_a_tuning_phase_that_takes_everything(split) -> None:
    ref = event_to_json(_trial(_trial_sigma(split)))
    for q in (0.0, 1.0, -0.1, math.nan, None):
        with pytest.raises(ConfigError, match="tuning fraction"):
            StudySettings(epsilon=4.0, delta=DELTA, mode="subsampled", trials=MEAN,
                          distribution="geometric", tune_fraction=q, reference_event=ref)
    with pytest.raises(ConfigError, match="nothing of"):
        StudySettings(epsilon=0.5, delta=DELTA, mode="subsampled", trials=MEAN,
                      distribution="geometric", tune_fraction=Q, reference_event=ref)
    with pytest.raises(ConfigError, match="subsampled only"):
        StudySettings(epsilon=4.0, delta=DELTA, mode="compose", trials=2, tune_fraction=Q)
    header = new_study_header(_settings(split), name="s")
    assert header["tune_fraction"] == Q and isinstance(header["trial_count"], int)
