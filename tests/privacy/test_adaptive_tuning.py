"""DP-HyPO pricing (raydp_synth.privacy.adaptive_tuning): c = 1 is Papernot-Steinke
exactly, the bound grows with c, and a hand-computed value on a Gaussian base."""

from __future__ import annotations

import math

import dp_accounting as dpa
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rdp_module

from raydp_synth.errors import ConfigError
from raydp_synth.privacy.accounting import ORDERS, random_stopping_epsilon
from raydp_synth.privacy.adaptive_tuning import (
    adaptive_random_stopping_epsilon,
    adaptive_random_stopping_floor,
    adaptive_random_stopping_rdp,
    validate_density_ratio,
)

BASE = dpa.GaussianDpEvent(8.0)  # RDP lambda / (2 * 64) at every order
SHAPES = (0.0, 0.5, 1.0, 2.0)


@pytest.mark.parametrize("shape", [*SHAPES, math.inf])
def test_c_one_is_papernot_steinke_exactly(shape):
    ps = random_stopping_epsilon(BASE, mean=8, shape=shape, delta=1e-5)
    assert adaptive_random_stopping_epsilon(BASE, mean=8, shape=shape, delta=1e-5,
                                            density_ratio=1) == ps
    # the curve path (dp-accounting's compute_epsilon on the same grid) agrees too
    assert adaptive_random_stopping_epsilon(BASE, mean=8, shape=shape, delta=1e-5,
                                            density_ratio=1.0, orders=ORDERS) == ps


@pytest.mark.parametrize("shape", SHAPES)
def test_monotone_in_c_and_never_below_c_one(shape):
    ps = random_stopping_epsilon(BASE, mean=8, shape=shape, delta=1e-5)
    eps = [adaptive_random_stopping_epsilon(BASE, mean=8, shape=shape, delta=1e-5,
                                            density_ratio=c) for c in (1, 1.01, 1.5, 2, 4, 10)]
    assert all(a < b for a, b in zip(eps, eps[1:], strict=False))
    assert min(eps) == eps[0] == ps


def test_curve_dominates_papernot_steinke_at_every_order():
    ps = adaptive_random_stopping_rdp(BASE, mean=8, shape=1.0, density_ratio=1)
    hypo = adaptive_random_stopping_rdp(BASE, mean=8, shape=1.0, density_ratio=2)
    assert np.all(hypo >= ps)


def _theorem_1_by_hand(c: float, *, shape: float = 1.0, mean: float = 8.0) -> float:
    """Wang et al. (2023), "DP-HyPO", Theorem 1, typed from its statement on a
    Gaussian base of sigma 8 (eps(l) = l / 128 at every order), order by order:

    eps'(l) = eps(l) + (1 + eta)(1 - 1/h) eps(h) + (l/(l-1) + 1 + eta) ln(C/c_low)
              + (1 + eta) ln(1/gamma) / h + ln E[K] / (l - 1),

    minimised over h, with C = c and c_low = 1/c; then the lower-order envelope
    (RDP grows with the order) and dp-accounting's RDP -> (eps, delta) conversion.
    Independent of the code under test but for gamma and that conversion."""
    grid = np.asarray(ORDERS)
    gamma = rdp_module._gamma_truncated_negative_binomial(shape, mean)
    ratio = math.log(c / (1 / c))
    holder = min((1 + shape) * (1 - 1 / h) * h / 128 + (1 + shape) * math.log(1 / gamma) / h
                 for h in grid)
    raw = [o / 128 + holder + (o / (o - 1) + 1 + shape) * ratio + math.log(mean) / (o - 1)
           if o > 1 else math.inf for o in grid]
    bound = [min(raw[j] for j in range(len(grid)) if grid[j] >= grid[i]) for i in range(len(grid))]
    return float(rdp_module.compute_epsilon(list(grid), bound, 1e-5)[0])


def test_golden_value_by_hand():
    """Geometric stopping (eta = 1, gamma = 1/8), E[K] = 8, c = 2: the code prices
    DP-HyPO's Theorem 1 as typed by hand above."""
    gamma = rdp_module._gamma_truncated_negative_binomial(1.0, 8.0)
    assert gamma == pytest.approx(1 / 8)
    got = adaptive_random_stopping_epsilon(BASE, mean=8, shape=1.0, delta=1e-5, density_ratio=2)
    assert got == pytest.approx(_theorem_1_by_hand(2.0), rel=1e-9)
    assert got == pytest.approx(5.230, abs=5e-4)  # pinned: docs/budget-pricing.md 6.2b


@pytest.mark.parametrize(("shape", "mean", "c"), [(1.0, 8.0, 1.5), (0.0, 8.0, 2.0),
                                                   (0.5, 4.0, 1.25), (2.0, 16.0, 4.0)])
def test_theorem_1_by_hand_across_laws_and_c(shape, mean, c):
    got = adaptive_random_stopping_epsilon(BASE, mean=mean, shape=shape, delta=1e-5,
                                           density_ratio=c)
    assert got == pytest.approx(_theorem_1_by_hand(c, shape=shape, mean=mean), rel=1e-9)


@pytest.mark.parametrize("c", [1.1, 1.25, 2.0])
def test_the_floor_is_theorem_1_for_trials_that_release_nothing(c):
    """What a dp-hypo study costs before any trial trains (the study refuses a budget
    at or below it): Theorem 1 as above with eps(l) = 0, by hand; below the price of
    any search whose trials release something; c = 1 is random stopping's."""
    eta, mean = 1.0, 8.0
    grid = np.asarray(ORDERS)
    gamma = rdp_module._gamma_truncated_negative_binomial(eta, mean)
    holder = min((1 + eta) * math.log(1 / gamma) / h for h in grid)
    raw = [holder + (o / (o - 1) + 1 + eta) * 2 * math.log(c) + math.log(mean) / (o - 1)
           for o in grid]
    bound = [min(raw[j:]) for j in range(len(grid))]
    by_hand = float(rdp_module.compute_epsilon(list(grid), bound, 1e-5)[0])
    floor = adaptive_random_stopping_floor(mean=mean, shape=eta, delta=1e-5, density_ratio=c)
    assert floor == pytest.approx(by_hand, rel=1e-9)
    assert floor < adaptive_random_stopping_epsilon(BASE, mean=mean, shape=eta, delta=1e-5,
                                                    density_ratio=c)
    assert adaptive_random_stopping_floor(mean=mean, shape=eta, delta=1e-5, density_ratio=1) < floor
    if c == 1.25:
        assert floor == pytest.approx(1.349, abs=5e-4)  # above epsilon 1: docs 6.2b


def test_the_adapting_term_is_not_divided_by_lambda_hat():
    """The (1 + eta) ln(C/c) of the Hoelder step is paid in full: at every order the
    curve exceeds Papernot-Steinke's by at least (1 + eta) ln(C/c) (an earlier
    reconstruction divided it by lambda-hat and under-priced c > 1)."""
    c, eta = 2.0, 1.0
    ps = adaptive_random_stopping_rdp(BASE, mean=8, shape=eta, density_ratio=1)
    hypo = adaptive_random_stopping_rdp(BASE, mean=8, shape=eta, density_ratio=c)
    assert np.all(hypo - ps >= (1 + eta) * 2 * math.log(c) - 1e-12)


def test_poisson_and_bad_c_are_refused():
    with pytest.raises(ConfigError, match="truncated negative binomial"):
        adaptive_random_stopping_epsilon(BASE, mean=8, shape=math.inf, delta=1e-5, density_ratio=2)
    for bad in (0.5, math.inf, math.nan, True, "2"):
        with pytest.raises(ConfigError, match="--hypo-c"):
            validate_density_ratio(bad)
