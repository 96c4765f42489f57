from __future__ import annotations

import math

import dp_accounting as dpa
import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import RdpAccountant
from dp_accounting.rdp import rdp_privacy_accountant as rdp_module
from scipy import stats

from raydp_synth.accountant.pricing import (
    ORDERS,
    compose_epsilon,
    dominates,
    draw_trial_count,
    parse_distribution,
    random_stopping_epsilon,
    random_stopping_event,
    rdp_curve,
    sampling_gamma,
)
from raydp_synth.errors import ConfigError
from raydp_synth.privacy.events import subsampled_gaussian_event

DELTA = 1e-5


def _run(sigma: float = 1.0, q: float = 64 / 60000, steps: int = 10_000) -> dpa.DpEvent:
    return subsampled_gaussian_event(noise_multiplier=sigma, sample_rate=q, num_steps=steps)


# docs/budget-pricing.md, section 6.3: the table, measured with dp-accounting 0.6.0
@pytest.mark.parametrize(
    ("what", "expected"),
    [
        ("one run", 0.8127),
        ("10 composed", 1.9170),
        ("mean 10 poisson", 1.4683),
        ("mean 10 geometric", 1.6102),
        ("mean 10 logarithmic", 1.4167),
        ("mean 10 tnb:0.5", 1.5175),
        ("mean 100 poisson", 4.3702),
        ("mean 100 geometric", 2.1764),
        ("100 composed", 7.0092),
    ],
)
def test_golden_epsilons(what, expected):
    run = _run()
    if what == "one run":
        eps = compose_epsilon([run], DELTA)
    elif what == "10 composed":
        eps = compose_epsilon([run] * 10, DELTA)
    elif what == "100 composed":
        eps = compose_epsilon([dpa.SelfComposedDpEvent(run, 100)], DELTA)
    else:
        _, mean, dist = what.split()
        eps = random_stopping_epsilon(
            run, mean=float(mean), shape=parse_distribution(dist), delta=DELTA
        )
    assert eps == pytest.approx(expected, rel=1e-3)


def test_random_stopping_event_is_dp_accountings():
    event = random_stopping_event(_run(), 10, parse_distribution("tnb:0.5"))
    assert event == dp_event.RepeatAndSelectDpEvent(_run(), 10.0, 0.5)
    with pytest.raises(ConfigError, match="mean"):
        random_stopping_event(_run(), 0.5, 1.0)
    with pytest.raises(ConfigError, match="shape"):
        random_stopping_event(_run(), 10, -1.0)


def test_compose_epsilon_of_nothing_is_zero():
    assert compose_epsilon([], DELTA) == 0.0


@pytest.mark.parametrize(
    ("spec", "shape"),
    [("poisson", math.inf), ("Geometric", 1.0), (" logarithmic ", 0.0), ("tnb:0.5", 0.5)],
)
def test_parse_distribution(spec, shape):
    assert parse_distribution(spec) == shape


@pytest.mark.parametrize("spec", ["", "binomial", "tnb:", "tnb:0", "tnb:-1", "tnb:inf", "tnb:x"])
def test_parse_distribution_rejects(spec):
    with pytest.raises(ConfigError, match="distribution"):
        parse_distribution(spec)


def _reference_pmf(dist: str, mean: float) -> tuple[np.ndarray, float, float]:
    """pmf on {0..K_MAX}, mean and variance from scipy's own distributions."""
    k = np.arange(0, 400)
    shape = parse_distribution(dist)
    if math.isinf(shape):
        d = stats.poisson(mean)
        return d.pmf(k), d.mean(), d.var()
    gamma = sampling_gamma(shape, mean)
    if shape == 1:
        d = stats.geom(gamma)  # support {1, 2, ...}
        return d.pmf(k), d.mean(), d.var()
    if shape == 0:
        d = stats.logser(1 - gamma)
        return d.pmf(k), d.mean(), d.var()
    nb = stats.nbinom(shape, gamma)  # failures before `shape` successes, on {0, 1, ...}
    p0 = nb.pmf(0)
    pmf = np.where(k >= 1, nb.pmf(k) / (1 - p0), 0.0)
    m1 = nb.mean() / (1 - p0)
    m2 = (nb.var() + nb.mean() ** 2) / (1 - p0)
    return pmf, m1, m2 - m1**2


@pytest.mark.parametrize("dist", ["poisson", "geometric", "logarithmic", "tnb:0.5", "tnb:3"])
@pytest.mark.parametrize("mean", [3.0, 10.0])
def test_draw_trial_count_matches_distribution(dist, mean):
    n = 20_000
    rng = np.random.default_rng(1234)
    draws = np.array([draw_trial_count(dist, mean, rng) for _ in range(n)])
    pmf, true_mean, var = _reference_pmf(dist, mean)
    # the distribution drawn from has (up to bisection precision) the requested mean
    assert true_mean == pytest.approx(mean, rel=1e-9)
    assert true_mean <= mean * (1 + 1e-12)
    # sample mean: 5 standard errors (false failure rate < 1e-6)
    assert abs(draws.mean() - mean) <= 5 * math.sqrt(var / n)
    if not math.isinf(parse_distribution(dist)):
        assert draws.min() >= 1
    # chi-square goodness of fit on the cells with >= 5 expected draws, tail lumped
    counts = np.bincount(draws, minlength=pmf.size)[: pmf.size]
    expected = pmf * n
    keep = expected >= 5
    observed = np.append(counts[keep], n - counts[keep].sum())
    expect = np.append(expected[keep], n - expected[keep].sum())
    assert stats.chisquare(observed, expect).pvalue > 1e-6


@pytest.mark.parametrize("shape", [0.0, 0.5, 1.0, 3.0])
def test_sampling_gamma_not_below_the_priced_gamma(shape):
    for mean in (1.5, 10.0, 100.0):
        priced = rdp_module._gamma_truncated_negative_binomial(shape, mean)
        assert sampling_gamma(shape, mean) >= priced
        assert sampling_gamma(shape, mean) == pytest.approx(priced, rel=1e-8)


def test_draw_trial_count_mean_one_and_validation():
    rng = np.random.default_rng(0)
    assert {draw_trial_count("logarithmic", 1, rng) for _ in range(10)} == {1}
    with pytest.raises(ConfigError):
        draw_trial_count("geometric", 0.5, rng)
    with pytest.raises(ConfigError):
        draw_trial_count("poisson", math.nan, rng)


def test_rdp_curve_is_the_accountants():
    event = _run(steps=100)
    accountant = RdpAccountant()
    accountant.compose(event)
    curve = rdp_curve(event)
    assert curve.shape == (len(ORDERS),)
    np.testing.assert_array_equal(curve, accountant.rdp)
    assert list(ORDERS) == [float(o) for o in rdp_module.DEFAULT_RDP_ORDERS]


def test_dominance():
    ref = _run(sigma=1.0, q=0.01, steps=100)
    assert dominates(ref, ref)
    assert dominates(ref, _run(sigma=1.3, q=0.01, steps=100))  # more noise
    assert dominates(ref, _run(sigma=1.0, q=0.005, steps=100))  # smaller sample rate
    assert dominates(ref, _run(sigma=1.0, q=0.01, steps=60))  # fewer steps
    assert not dominates(ref, _run(sigma=0.9, q=0.01, steps=100))  # less noise
    assert not dominates(ref, _run(sigma=1.0, q=0.01, steps=101))  # more steps
    assert not dominates(ref, dpa.NonPrivateDpEvent())
    # the same mechanisms composed in another order: equal up to float noise
    a, b = _run(sigma=1.0, q=0.01, steps=100), _run(sigma=2.0, q=0.1, steps=7)
    assert dominates(dpa.ComposedDpEvent([a, b]), dpa.ComposedDpEvent([b, a]))
    # a plan that beats the reference at one order only is not dominated
    single = subsampled_gaussian_event(noise_multiplier=3.0, sample_rate=None, num_steps=1)
    mixed = dpa.ComposedDpEvent([_run(sigma=1.0, q=0.01, steps=50), single])
    ref_curve, mixed_curve = rdp_curve(ref), rdp_curve(mixed)
    assert (mixed_curve < ref_curve).any() and (mixed_curve > ref_curve).any()
    assert not dominates(ref, mixed)
