"""Stated epsilons are the smaller of RDP's and PLD's (privacy/pricing.py): golden values,
PLDAccountant's numbers bit for bit, and RDP alone where a theorem needs it."""

from __future__ import annotations

import math

import dp_accounting as dpa
import pytest
from dp_accounting.pld.pld_privacy_accountant import PLDAccountant
from dp_accounting.pld.privacy_loss_distribution import from_discrete_gaussian_mechanism

from raydp_synth.privacy import pricing
from raydp_synth.privacy.accounting import epsilon_of, random_stopping_event
from raydp_synth.privacy.events import DiscreteGaussianDpEvent, subsampled_gaussian_event
from raydp_synth.privacy.plan import Mechanism, PrivacyPlan

DELTA = 1e-5
RUN = subsampled_gaussian_event(noise_multiplier=1.0, sample_rate=64 / 60000, num_steps=10_000)
# DPAF's default plan on digits-size data (n=1442) at epsilon 10, as RDP calibrated it
# before PLD pricing (tests/privacy/default_plans.json before this change).
DPAF = PrivacyPlan(mechanisms=(
    Mechanism(name="classifier", noise_multiplier=2.715698528858377, sample_rate=0.044382801664355064,
              num_steps=68, sensitivity=1.0),
    Mechanism(name="conv2", noise_multiplier=9.096824273932201, sample_rate=0.3550624133148405,
              num_steps=282, sensitivity=1.0),
    Mechanism(name="dpagg", noise_multiplier=3.8060123024199073, sample_rate=0.3550624133148405,
              num_steps=282, sensitivity=11.313708498984761),
    Mechanism(name="selection_score", noise_multiplier=1.508895038087959, sample_rate=None,
              num_steps=1, sensitivity=1.0),
), delta=DELTA, target_epsilon=10.0)

EVENTS = {
    "subsampled Gaussian": RUN,
    "DPAF default plan": DPAF.event(),
    "10 composed": dpa.ComposedDpEvent([RUN] * 10),
    "random stopping, mean 10 Poisson": random_stopping_event(RUN, 10, math.inf),
}


# golden (RDP, PLD, stated), dp-accounting 0.6.0, delta 1e-5 (docs/budget-pricing.md, 6.3)
@pytest.mark.parametrize(("what", "rdp", "pld", "stated"), [
    ("subsampled Gaussian", 0.8127, 0.5107, 0.5107),
    ("DPAF default plan", 9.9881, 9.1600, 9.1600),
    ("10 composed", 1.9170, 1.7596, 1.7596),
    ("random stopping, mean 10 Poisson", 1.4683, None, 1.4683),
])
def test_golden_prices(what, rdp, pld, stated):
    got = pricing.price(EVENTS[what], delta=DELTA)
    assert got.rdp == pytest.approx(rdp, abs=1e-4)
    assert got.pld == (None if pld is None else pytest.approx(pld, abs=1e-4))
    assert got.epsilon == pytest.approx(stated, abs=1e-4)
    assert got.accountant.startswith("dp_accounting.pld.PLDAccountant" if pld else
                                     "dp_accounting.rdp.RdpAccountant")


@pytest.mark.parametrize("what", ["subsampled Gaussian", "DPAF default plan", "10 composed"])
def test_pld_is_pld_accountants_bit_for_bit(what):
    """The cached leaf-and-fold path gives PLDAccountant's own epsilon (pessimistic
    estimates, add-or-remove-one, the stated interval). The selection score's discrete
    Gaussian, which PLDAccountant would price as a continuous one, is composed last
    from dp-accounting's discrete-Gaussian PLD (connect-the-dots, pessimistic)."""
    event = EVENTS[what]
    accountant = PLDAccountant(dpa.NeighboringRelation.ADD_OR_REMOVE_ONE, pricing.PLD_INTERVAL)
    if what == "DPAF default plan":
        *training, score = event.events
        assert isinstance(score, DiscreteGaussianDpEvent)
        accountant.compose(dpa.ComposedDpEvent(training))
        expected = accountant._pld.compose(from_discrete_gaussian_mechanism(
            score.noise_multiplier, sensitivity=1, value_discretization_interval=pricing.PLD_INTERVAL,
            pessimistic_estimate=True, use_connect_dots=True)).get_epsilon_for_delta(DELTA)
    else:
        accountant.compose(event)
        expected = accountant.get_epsilon(DELTA)
    assert pricing.price(event, delta=DELTA).pld == expected
    assert pricing.price(event, delta=DELTA).rdp == epsilon_of(event, delta=DELTA)


def test_random_stopping_stays_rdp():
    """PLD cannot price RepeatAndSelect: the theorem's RDP bound is stated, alone."""
    event = EVENTS["random stopping, mean 10 Poisson"]
    got = pricing.price(event, delta=DELTA)
    assert got.pld is None and got.epsilon == epsilon_of(event, delta=DELTA)
    assert got.accountant == pricing.RDP_ACCOUNTANT


def test_other_events_fall_back_to_pld_accountant_and_non_private_is_inf():
    laplace = dpa.LaplaceDpEvent(1.0)
    accountant = PLDAccountant(dpa.NeighboringRelation.ADD_OR_REMOVE_ONE, pricing.PLD_INTERVAL)
    accountant.compose(laplace)
    assert pricing.price(laplace, delta=DELTA).pld == accountant.get_epsilon(DELTA)
    assert pricing.epsilon(dpa.NonPrivateDpEvent(), delta=DELTA) == math.inf


def test_composition_prices_as_the_composed_event():
    """The accountant's growing composition and a trial's one-shot price agree exactly."""
    other = subsampled_gaussian_event(noise_multiplier=2.0, sample_rate=0.1, num_steps=50)
    grown = pricing.compose([RUN, other, dpa.LaplaceDpEvent(3.0)])
    assert grown.price(DELTA) == pricing.price(
        dpa.ComposedDpEvent([RUN, other, dpa.LaplaceDpEvent(3.0)]), delta=DELTA)
    two = pricing.compose([other, other])
    assert two.epsilon(DELTA) == pricing.epsilon(
        dpa.ComposedDpEvent([other, dpa.SelfComposedDpEvent(other, 1)]), delta=DELTA)


def test_plan_statement_names_its_accountant():
    price = DPAF.price()
    assert DPAF.epsilon() == price.epsilon == price.pld < price.rdp
    assert price.to_dict()["accountant"] == pricing.STATED.pld_accountant
    assert "pessimistic" in price.to_dict()["accountant"]
