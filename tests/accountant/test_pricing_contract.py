"""Every pricing strategy of the accountant's table keeps the contract
(tests/accountant/pricing_contract.py), and a strategy registered at runtime is
covered by the same suite without touching any other file."""

from __future__ import annotations

import math

import pytest
from dp_accounting import dp_event

from raydp_synth.accountant.gauges import budget_gauges, running_values
from raydp_synth.accountant.strategies import PRICING, pricing_class
from raydp_synth.accountant.strategies.dp_hypo import DpHypoPricing
from raydp_synth.privacy.accounting import epsilon_of
from raydp_synth.privacy.events import event_to_json, subsampled_gaussian_event
from tests.accountant.pricing_contract import PricingExample, check_pricing_contract
from tests.accountant.toy_pricing import CappedComposePricing

DELTA = 1e-5


def _plan(sigma: float, q: float | None = None, steps: int = 1) -> dict:
    return event_to_json(subsampled_gaussian_event(noise_multiplier=sigma, sample_rate=q,
                                                   num_steps=steps))


REFERENCE = _plan(3.0, 0.1, 50)
TRIAL = _plan(3.5, 0.1, 40)  # dominated by REFERENCE

#: One worked example per strategy; the golden prices are the statement's epsilon
#: after the example's grants, as first measured (dp-accounting 0.4.4).
EXAMPLES = {
    "compose": PricingExample(
        settings={"epsilon": 4.0, "delta": DELTA, "mode": "compose", "trials": 3},
        plans=(_plan(4.0), _plan(5.0)), golden_epsilon=1.2157983045,
        other_settings={"epsilon": 5.0}),
    "random-stopping": PricingExample(
        settings={"epsilon": 6.0, "delta": DELTA, "mode": "random-stopping", "trials": 2,
                  "distribution": "geometric", "reference_event": REFERENCE},
        plans=(TRIAL, REFERENCE), trial_count=2, golden_epsilon=1.6431174055,
        other_settings={"distribution": "poisson"}),
    "dp-hypo": PricingExample(
        settings={"epsilon": 8.0, "delta": DELTA, "mode": "random-stopping", "trials": 2,
                  "distribution": "geometric", "reference_event": REFERENCE,
                  "density_ratio": 1.5},
        plans=(TRIAL,), trial_count=1, golden_epsilon=4.1299700685,
        other_settings={"density_ratio": 2.0}),
    "subsampled": PricingExample(
        settings={"epsilon": 6.0, "delta": DELTA, "mode": "subsampled", "trials": 2,
                  "distribution": "geometric", "reference_event": REFERENCE,
                  "tune_fraction": 0.1},
        plans=(TRIAL, TRIAL), trial_count=2, final=_plan(2.0, 0.05, 100),
        golden_epsilon=1.3493459376, other_settings={"tune_fraction": 0.2}),
}


def test_every_mode_of_the_table_has_an_example() -> None:
    assert set(PRICING) <= set(EXAMPLES)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_strategy_keeps_the_contract(name: str, tmp_path) -> None:
    check_pricing_contract(EXAMPLES[name], tmp_path)


def test_dp_hypo_prices_random_stopping_with_a_density_ratio(tmp_path) -> None:
    from raydp_synth.accountant.core import StudySettings

    assert StudySettings(**EXAMPLES["dp-hypo"].settings).pricing() is DpHypoPricing
    statement = check_pricing_contract(EXAMPLES["dp-hypo"], tmp_path)
    assert statement["density_ratio"] == 1.5 and "DP-HyPO" in statement["theorem"]


def test_compose_golden_price_is_dp_accountings_own(tmp_path) -> None:
    """The compose example's golden price, re-priced by dp-accounting alone: RDP's
    epsilon of the two Gaussians is an upper bound of the stated (min of RDP and PLD)."""
    composed = dp_event.ComposedDpEvent([dp_event.GaussianDpEvent(4.0),
                                         dp_event.GaussianDpEvent(5.0)])
    assert EXAMPLES["compose"].golden_epsilon <= epsilon_of(composed, delta=DELTA) + 1e-9


def test_random_stopping_golden_price_is_dp_accountings_own() -> None:
    """Papernot & Steinke's price, by dp-accounting's RDP accountant alone."""
    from raydp_synth.privacy.events import event_from_json

    event = dp_event.RepeatAndSelectDpEvent(event_from_json(REFERENCE), 2.0, 1.0)
    assert EXAMPLES["random-stopping"].golden_epsilon == pytest.approx(
        epsilon_of(event, delta=DELTA), rel=1e-9)


def test_an_unknown_mode_is_refused_in_one_line() -> None:
    from raydp_synth.errors import ConfigError

    with pytest.raises(ConfigError, match="must be one of compose, random-stopping, subsampled"):
        pricing_class("grid")


# ------------------------------------------------------- a strategy added at runtime


def test_a_strategy_registered_at_runtime_keeps_the_contract(monkeypatch, tmp_path) -> None:
    """tests/accountant/toy_pricing.py's strategy, one table line away: the contract
    runs on it unchanged, the gauges fail closed for it, and its cap refuses."""
    monkeypatch.setitem(PRICING, CappedComposePricing.name, CappedComposePricing)
    example = PricingExample(
        settings={"epsilon": 4.0, "delta": DELTA, "mode": CappedComposePricing.name,
                  "trials": 2},
        plans=(_plan(4.0), _plan(5.0)), golden_epsilon=EXAMPLES["compose"].golden_epsilon)
    check_pricing_contract(example, tmp_path)
    assert set(budget_gauges(CappedComposePricing.name)) == {"spent", "unspent"}
    assert running_values(CappedComposePricing.name, spent_epsilon=1.0, unspent_epsilon=1.0,
                          trials_granted=1, trials_refused=0) == {}


def test_the_toy_strategys_cap_refuses_a_third_trial(monkeypatch, tmp_path) -> None:
    from raydp_synth.accountant.core import StudyBudget, StudySettings, new_study_header

    monkeypatch.setitem(PRICING, CappedComposePricing.name, CappedComposePricing)
    settings = StudySettings(epsilon=4.0, delta=DELTA, mode=CappedComposePricing.name, trials=2)
    budget = StudyBudget(settings, new_study_header(settings, name="toy"))
    for trial in ("a", "b"):
        budget.record(budget.decide(trial, _plan(20.0)))
    third = budget.decide("c", _plan(20.0))
    assert not third.granted and "cap" in third.reason
    assert math.isfinite(budget.spent_epsilon())


# ------------------------------------------------ unspent is not what still fits


def test_a_plan_above_the_unspent_epsilon_still_fits_under_compose() -> None:
    """The gauge's 'unspent' is the budget less the spent; composition is not
    additive, so a second plan of the first's epsilon fits although that epsilon is
    above the unspent one: the accountant's fits() answers, and grants it."""
    from raydp_synth.accountant.core import StudyBudget, StudySettings, new_study_header
    from raydp_synth.privacy import pricing

    sigma = 2.0
    both = pricing.epsilon(dp_event.ComposedDpEvent([dp_event.GaussianDpEvent(sigma)] * 2),
                           delta=DELTA)
    settings = StudySettings(epsilon=both * 1.001, delta=DELTA, mode="compose", trials=2)
    budget = StudyBudget(settings, new_study_header(settings, name="s"))
    plan = event_to_json(dp_event.GaussianDpEvent(sigma))
    budget.record(budget.decide("first", plan))
    one = budget.spent_epsilon()
    assert one > budget.unspent_epsilon()  # the same plan again "does not fit" the gauge
    assert budget.fits(plan) and not budget.fits(event_to_json(dp_event.GaussianDpEvent(1.0)))
    assert budget.spent_epsilon() == one and len(budget.grants) == 1  # a question only
    assert budget.decide("second", plan).granted
    assert not budget.fits({"type": "Nope"})
