"""A compose study under the stated pricing (the smaller of RDP's and PLD's epsilon):
plans that trials calibrate are granted, and a plan over the total is refused."""

from __future__ import annotations

from types import SimpleNamespace

import dp_accounting as dpa
import pytest

from raydp_synth.accountant.core import REASON_BUDGET, StudyBudget, StudySettings, new_study_header
from raydp_synth.privacy import pricing
from raydp_synth.privacy.accounting import epsilon_of, random_stopping_event
from raydp_synth.privacy.calibration import MechanismSpec, calibrate_plan
from raydp_synth.privacy.events import event_to_json, subsampled_gaussian_event
from raydp_synth.tune.planning import plan_for_compose

DELTA = 1e-5
SPECS = [
    MechanismSpec(name="train", sample_rate=0.05, num_steps=200, sensitivity=1.0, share=1.0),
    MechanismSpec(name="score", sample_rate=None, num_steps=1, sensitivity=1.0, share=0.2),
]


def _method():
    """The part of a Method that planning uses: ``plan`` with a study's price."""
    def plan(config, *, target_epsilon, delta, data, score_share, price):
        return calibrate_plan(SPECS, target_epsilon=target_epsilon, delta=delta, price=price)
    return SimpleNamespace(plan=plan)


def _budget(epsilon: float, trials: int) -> StudyBudget:
    settings = StudySettings(epsilon=epsilon, delta=DELTA, mode="compose", trials=trials)
    return StudyBudget(settings, new_study_header(settings, name="test"))


def _ask(budget: StudyBudget, trial_id: str, event: dpa.DpEvent):
    decision = budget.decide(trial_id, event_to_json(event))
    budget.record(decision)
    return decision


@pytest.mark.slow  # three calibrations (~5-8 s)
def test_plans_calibrated_by_trials_are_granted_and_use_the_budget():
    total, trials = 4.0, 3
    budget, granted = _budget(total, trials), []
    for i in range(trials):
        plan = plan_for_compose(_method(), None, None, target_epsilon=total, delta=DELTA,
                                granted=granted, remaining_trials=trials - i, score_share=0.0)
        assert _ask(budget, f"t{i}", plan.event()).granted
        granted.append(plan.event())
    spent = budget.spent_price()
    assert spent is not None and 0.99 * total <= spent.epsilon <= total
    assert spent.pld is not None and spent.pld < spent.rdp  # PLD is what made room
    assert spent.rdp > total  # RDP alone would have refused the last plan
    statement = budget.statement()
    assert statement["epsilon"] == spent.epsilon
    assert statement["accountant"] == pricing.STATED.pld_accountant
    assert statement["pricing"]["epsilon_rdp"] == spent.rdp


def test_refuses_a_plan_over_the_total_under_the_stated_pricing():
    run = subsampled_gaussian_event(noise_multiplier=1.0, sample_rate=0.05, num_steps=200)
    stated = pricing.epsilon(run, delta=DELTA)
    assert stated < epsilon_of(run, delta=DELTA)
    refused = _ask(_budget(stated * (1 - 1e-6), 2), "t0", run)
    assert not refused.granted and refused.reason.startswith(REASON_BUDGET)
    budget = _budget(stated, 2)  # exactly fits, though RDP's epsilon is above it
    assert _ask(budget, "t0", run).granted
    assert not _ask(budget, "t1", run).granted  # the second copy does not
    assert budget.spent_epsilon() == stated


def test_random_stopping_is_stated_by_rdp_alone():
    """Random stopping's theorem is an RDP theorem, and PLD cannot price RepeatAndSelect."""
    reference = subsampled_gaussian_event(noise_multiplier=1.0, sample_rate=0.02, num_steps=200)
    expected = epsilon_of(random_stopping_event(reference, 2.0, 1.0), delta=DELTA)
    settings = StudySettings(epsilon=2 * expected, delta=DELTA, mode="random-stopping", trials=2,
                             distribution="geometric", reference_event=event_to_json(reference))
    statement = StudyBudget(settings, new_study_header(settings, name="test")).statement()
    assert statement["epsilon"] == expected
    assert statement["accountant"] == pricing.RDP_ACCOUNTANT
    assert statement["pricing"]["epsilon_pld"] is None
