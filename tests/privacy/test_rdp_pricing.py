"""RDP prices are ``RdpAccountant``'s own, bit for bit, also where the per-leaf
cache composes them (:func:`raydp_synth.privacy.accounting._rdp_of`)."""

from __future__ import annotations

import dp_accounting as dpa
import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant as rdp_module

from raydp_synth.privacy import accounting
from raydp_synth.privacy.accounting import CALIBRATION_ORDERS, ORDERS, epsilon_of, rdp_curve

DELTA = 1e-5


def _sgm(q: float, sigma: float, steps: int) -> dpa.DpEvent:
    return dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma)), steps)


EVENTS = {
    "one mechanism": _sgm(0.35, 1.1, 12),
    "a plan": dpa.ComposedDpEvent([_sgm(0.35, 18.8, 2), _sgm(0.35, 0.93, 6),
                                   dpa.GaussianDpEvent(40.0), _sgm(0.35, 0.93, 6)]),
    "nested, repeated": dpa.SelfComposedDpEvent(dpa.ComposedDpEvent([
        dpa.ComposedDpEvent([_sgm(0.01, 0.7, 3000), dpa.NoOpDpEvent()]),
        dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(5.0), 3),
        dpa.PoissonSampledDpEvent(0.0, dpa.GaussianDpEvent(1.0))]), 4),
}


def _accountant(event: dpa.DpEvent, orders) -> rdp_module.RdpAccountant:
    accountant = rdp_module.RdpAccountant(None if orders is None else list(orders))
    accountant.compose(event)
    return accountant


@pytest.mark.parametrize("orders", [None, CALIBRATION_ORDERS], ids=["ORDERS", "CALIBRATION"])
@pytest.mark.parametrize("what", sorted(EVENTS))
def test_rdp_and_epsilon_are_rdp_accountants_bit_for_bit(what: str, orders) -> None:
    event = EVENTS[what]
    assert accounting.gaussian_leaves(event) is not None  # the cached path prices it
    want = _accountant(event, orders)
    for _ in range(2):  # computed, then from the cache
        assert np.array_equal(rdp_curve(event, orders), np.asarray(want.rdp))
        assert epsilon_of(event, delta=DELTA, orders=orders) == want.get_epsilon(DELTA)


def test_cached_curves_are_read_only_and_default_grid_is_orders() -> None:
    curve = accounting._step_rdp(1.1, 0.35, None)
    assert not curve.flags.writeable
    assert len(curve) == len(ORDERS)


def test_other_events_are_priced_by_the_accountant() -> None:
    event = dp_event.RepeatAndSelectDpEvent(_sgm(0.35, 1.1, 12), 8.0, 1.0)
    assert accounting.gaussian_leaves(event) is None
    assert epsilon_of(event, delta=DELTA) == _accountant(event, None).get_epsilon(DELTA)


def test_bad_events_keep_the_accountants_errors() -> None:
    with pytest.raises(ValueError):
        epsilon_of(dpa.PoissonSampledDpEvent(1.5, dpa.GaussianDpEvent(1.0)), delta=DELTA)
    assert epsilon_of(dpa.GaussianDpEvent(0.0), delta=DELTA) == np.inf


def _random_plan(rng: np.random.Generator) -> dpa.DpEvent:
    """One to three (subsampled) Gaussian mechanisms over the ranges plans take."""
    parts = []
    for _ in range(int(rng.integers(1, 4))):
        sigma = float(np.exp(rng.uniform(np.log(0.3), np.log(30.0))))
        step = dpa.GaussianDpEvent(sigma)
        if rng.random() < 0.85:
            step = dpa.PoissonSampledDpEvent(float(np.exp(rng.uniform(np.log(1e-4), 0.0))), step)
        parts.append(dpa.SelfComposedDpEvent(step, int(np.exp(rng.uniform(0.0, np.log(3e4))))))
    return parts[0] if len(parts) == 1 else dpa.ComposedDpEvent(parts)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_search_grid_skips_only_orders_that_cannot_give_the_minimum(seed: int) -> None:
    """On a search grid the slow fractional orders are evaluated only where their
    lower bound (the RDP at the integer order below) could beat the minimum found:
    the epsilon is still ``RdpAccountant``'s on that grid, bit for bit, on plans drawn
    over the ranges calibration visits (seeded; 40 plans, deltas 1e-10 to 1e-3)."""
    rng = np.random.default_rng(seed)
    for _ in range(40):
        event, delta = _random_plan(rng), float(10 ** rng.uniform(-10, -3))
        accounting._step_rdp.cache_clear()  # every curve computed afresh, as in a new trial
        want = _accountant(event, CALIBRATION_ORDERS)
        expected = np.inf if np.isnan(np.asarray(want.rdp)).any() else want.get_epsilon(delta)
        assert epsilon_of(event, delta=delta, orders=CALIBRATION_ORDERS) == expected, event


def test_a_search_on_a_typical_plan_evaluates_no_order_below_two() -> None:
    """Where the minimum is far above the conversion's floor below order 2 (a
    mechanism's share of a usual budget), those orders, the slowest series, are not
    evaluated; the epsilon is still the full search grid's."""
    event = _sgm(0.044, 0.8, 12)
    integers, _ = accounting._split_orders(CALIBRATION_ORDERS)
    rdp_int = accounting._leaves_rdp(tuple(accounting.gaussian_leaves(event)), integers)
    best = float(rdp_module.compute_epsilon(np.array(integers), rdp_int, DELTA)[0])
    assert 0 < best < 5
    needed = accounting._fractions_to_evaluate(CALIBRATION_ORDERS, rdp_int, best, DELTA)
    assert min(CALIBRATION_ORDERS) < 2 and not [o for o in needed if o < 2]
    assert epsilon_of(event, delta=DELTA, orders=CALIBRATION_ORDERS) == (
        _accountant(event, CALIBRATION_ORDERS).get_epsilon(DELTA))
