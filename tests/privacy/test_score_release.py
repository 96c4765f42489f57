"""The selection score as a discrete release (issue 42): discrete noise at the planned
scale, the OS's generator unless a user's seed is given, and its pricing (RDP: the
Gaussian's curve; PLD: the discrete Gaussian's own, which is above the continuous
one's at some epsilons, so the continuous PLD would not be a valid price)."""

from __future__ import annotations

import random
import secrets

import dp_accounting as dpa
import mpmath
import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_module

from raydp_synth.privacy import pricing
from raydp_synth.privacy.accounting import epsilon_of
from raydp_synth.privacy.events import DiscreteGaussianDpEvent, event_from_json, event_to_json
from raydp_synth.privacy.plan import Mechanism, PrivacyPlan
from raydp_synth.privacy.selection_score import (
    SELECTION_SCORE,
    release_score,
    score_noise_source,
)
from tests.stats import std_interval

LABELS = np.arange(200) % 10
PREDICTED = np.where(np.arange(200) < 137, LABELS, (LABELS + 1) % 10)  # 137 correct


def _score(sigma: float) -> Mechanism:
    return Mechanism(name=SELECTION_SCORE, noise_multiplier=sigma, sample_rate=None,
                     num_steps=1, sensitivity=1.0)


def _noise(sigma: float, source: random.Random, draws: int) -> np.ndarray:
    return np.array([
        release_score(PREDICTED, LABELS, mechanism=_score(sigma), public=False,
                      noise_source=source, classifier="logreg").value * 200 - 137
        for _ in range(draws)])


def test_release_is_the_count_plus_an_integer_at_the_planned_scale():
    sigma, draws = 2.5, 20_000
    noise = _noise(sigma, random.Random(1), draws)
    assert np.abs(noise - np.round(noise)).max() < 1e-9  # an integer, up to float rounding
    lo, hi = std_interval(draws)
    std = np.sqrt(np.mean(noise**2))
    assert lo <= std / sigma <= hi
    for wrong in (sigma * 1.05, sigma / 1.05, sigma / 200):
        assert not lo <= std / wrong <= hi


def test_without_a_seed_the_noise_comes_from_the_os():
    """A trial and a run without --dp-seed: SystemRandom, so the same inputs give
    different releases (ten draws at sigma 50 all equal: probability < 1e-20)."""
    source = score_noise_source(None)
    assert isinstance(source, secrets.SystemRandom)
    values = {release_score(PREDICTED, LABELS, mechanism=_score(50.0), public=False,
                            noise_source=score_noise_source(None), classifier="logreg").value
              for _ in range(10)}
    assert len(values) > 1


def test_a_user_seed_reproduces_the_release_and_another_seed_does_not():
    first = _noise(50.0, score_noise_source(12345), 20)
    assert np.array_equal(first, _noise(50.0, score_noise_source(12345), 20))
    assert not np.array_equal(first, _noise(50.0, score_noise_source(12346), 20))
    assert not isinstance(score_noise_source(12345), secrets.SystemRandom)


def test_call_sites_use_the_discrete_source():
    """The train driver and a tune trial release through the single-run pipeline's
    ``score_noise_source`` (no torch generator; the user's --dp-seed in a run, no
    seed in a trial)."""
    import inspect

    from raydp_synth.train import driver, pipeline
    from raydp_synth.tune import trial

    assert "noise_source=score_noise_source(reproducibility_seed)" in inspect.getsource(pipeline)
    assert "reproducibility_seed=request.dp_seed" in inspect.getsource(driver)
    assert "reproducibility_seed=None" in inspect.getsource(trial)
    for module in (driver, pipeline, trial):
        assert "manual_seed(derived_seed(dp_seed, \"selection_score\"))" not in inspect.getsource(module)


def test_score_event_is_discrete_and_serialises():
    plan = PrivacyPlan(mechanisms=(_score(3.0),), delta=1e-5, target_epsilon=10.0)
    event = plan.event().events[0]
    assert event == DiscreteGaussianDpEvent(3.0)
    assert event_from_json(event_to_json(event)) == event
    assert event != dpa.GaussianDpEvent(3.0)


def _continuous_delta(eps: float, sigma: float) -> mpmath.mpf:
    e, s = mpmath.mpf(eps), mpmath.mpf(sigma)
    return mpmath.ncdf(-e * s + 1 / (2 * s)) - mpmath.e**e * mpmath.ncdf(-e * s - 1 / (2 * s))


def _discrete_delta(eps: float, sigma: float) -> mpmath.mpf:
    """sum_x (P(x) - e^eps P(x - 1))_+ for P = N_Z(0, sigma^2), exactly up to 30 digits."""
    s = mpmath.mpf(sigma)
    bound = int(30 * sigma) + 10
    w = [mpmath.e**(-mpmath.mpf(x)**2 / (2 * s * s)) for x in range(-bound - 1, bound + 1)]
    z = sum(w[1:])
    ee = mpmath.e**eps
    return sum(max(w[i] - ee * w[i - 1], 0) for i in range(1, len(w))) / z


@pytest.mark.parametrize("sigma", [0.5, 1.0, 2.0, 5.0, 10.0])
def test_discrete_profile_is_not_below_the_continuous_one(sigma):
    """Why PLD needs the discrete Gaussian's own loss (option (b) of issue 42): at some
    epsilon of every sigma the plans use, the discrete Gaussian's delta(epsilon)
    (exact, 30 digits) exceeds the continuous Gaussian's; at epsilon 0 (total
    variation) it always does. RDP is unaffected (zCDP, Canonne-Kamath-Steinke 2020)."""
    mpmath.mp.dps = 30
    grid = [0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0]
    excess = [float(_discrete_delta(e, sigma) / _continuous_delta(e, sigma)) for e in grid]
    assert excess[0] > 1
    assert max(excess) > 1.001


@pytest.mark.parametrize("sigma", [0.8, 1.5, 4.0, 12.0])
def test_pld_prices_the_score_with_the_discrete_gaussian_and_rdp_with_the_gaussian(sigma):
    """The plan's PLD of the score is dp-accounting's discrete-Gaussian PLD, which
    dominates the exact discrete delta on a grid of epsilons; RDP is the Gaussian's."""
    mpmath.mp.dps = 30
    event = _score(sigma).event()
    price = pricing.price(event, delta=1e-5)
    assert price.rdp == epsilon_of(dpa.GaussianDpEvent(sigma), delta=1e-5)
    pld = pld_module.from_discrete_gaussian_mechanism(
        sigma, sensitivity=1, value_discretization_interval=pricing.PLD_INTERVAL,
        pessimistic_estimate=True, use_connect_dots=True)
    assert price.pld == pytest.approx(pld.get_epsilon_for_delta(1e-5), rel=1e-12)  # after the identity
    for eps in (0.0, 0.1, 0.5, 1.0, 2.0, 4.0):
        assert pld.get_delta_for_epsilon(eps) >= float(_discrete_delta(eps, sigma)) * (1 - 1e-9)


def test_an_event_pld_cannot_fold_with_a_discrete_score_falls_back_to_rdp():
    """PLDAccountant would price a DiscreteGaussianDpEvent as a continuous Gaussian:
    an event outside the leaf path that holds one is priced by RDP alone."""
    event = dpa.ComposedDpEvent([DiscreteGaussianDpEvent(2.0), dpa.LaplaceDpEvent(3.0)])
    got = pricing.price(event, delta=1e-5)
    assert got.pld is None and got.epsilon == got.rdp
