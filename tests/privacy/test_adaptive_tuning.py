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


def test_golden_value_by_hand():
    """Geometric stopping (eta = 1), E[K] = 8, c = 2, base Gaussian(sigma = 8).

    eps(l) = l / 128; gamma = 1/8 (geometric); ln(c_high/c_low) = 2 ln 2.
    eps'(l) = l/128 + ln 8/(l-1) + 2 min_h[(1-1/h) h/128 + (ln 8 + 2 ln 2)/h]
              + l/(l-1) * 2 ln 2, then the lower-order monotone envelope, then
    dp-accounting's RDP -> (eps, delta) conversion. Computed order by order below.
    """
    grid = np.asarray(ORDERS)
    gamma = rdp_module._gamma_truncated_negative_binomial(1.0, 8.0)
    assert gamma == pytest.approx(1 / 8)
    holder = min((1 - 1 / h) * h / 128 + (math.log(1 / gamma) + 2 * math.log(2)) / h
                 for h in grid)
    raw = [o / 128 + math.log(8) / (o - 1) + 2 * holder + o / (o - 1) * 2 * math.log(2)
           if o > 1 else math.inf for o in grid]
    bound = [min(raw[j] for j in range(len(grid)) if grid[j] >= grid[i]) for i in range(len(grid))]
    expected, _ = rdp_module.compute_epsilon(list(grid), bound, 1e-5)
    got = adaptive_random_stopping_epsilon(BASE, mean=8, shape=1.0, delta=1e-5, density_ratio=2)
    assert got == pytest.approx(expected, rel=1e-9)
    assert got == pytest.approx(2.605, abs=5e-4)  # pinned: the number the tests above produce


def test_poisson_and_bad_c_are_refused():
    with pytest.raises(ConfigError, match="truncated negative binomial"):
        adaptive_random_stopping_epsilon(BASE, mean=8, shape=math.inf, delta=1e-5, density_ratio=2)
    for bad in (0.5, math.inf, math.nan, True, "2"):
        with pytest.raises(ConfigError, match="--hypo-c"):
            validate_density_ratio(bad)
