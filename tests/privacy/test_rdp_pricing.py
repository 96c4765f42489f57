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
