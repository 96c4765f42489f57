"""The exact discrete Gaussian sampler (privacy/discrete_gaussian.py): its law against
the exact pmf, at small and large sigma, a test that rejects a wrong scale, its
building blocks, integer outputs, exact conversion of sigma^2, seed determinism."""

from __future__ import annotations

import math
import random
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from raydp_synth.privacy.discrete_gaussian import (
    bernoulli_exp,
    discrete_gaussian,
    discrete_gaussian_samples,
    discrete_laplace,
)

ALPHA = 1e-6  # every test's false-alarm rate
DRAWS = 30_000


def _pmf(sigma: float, support: np.ndarray) -> np.ndarray:
    """N_Z(0, sigma^2) on ``support``, normalised over |x| <= 40 sigma + 10 (the mass
    beyond is below 1e-300)."""
    bound = int(40 * sigma) + 10
    xs = np.arange(-bound, bound + 1, dtype=np.float64)
    z = np.exp(-xs**2 / (2 * sigma**2)).sum()
    return np.exp(-support.astype(np.float64)**2 / (2 * sigma**2)) / z


def _chi_square_pvalue(samples: list[int], pmf) -> float:
    """Pearson chi-square goodness of fit, bins of expected count >= 5 (the tails pooled)."""
    n = len(samples)
    lo, hi = min(samples), max(samples)
    span = np.arange(lo - 1, hi + 2)
    expected = pmf(span) * n
    keep = span[expected >= 5]
    counts = Counter(samples)
    observed = [sum(c for x, c in counts.items() if x < keep[0])]
    expect = [n * pmf(np.arange(keep[0] - 2000, keep[0])).sum()]
    for x in keep:
        observed.append(counts.get(int(x), 0))
        expect.append(n * float(pmf(np.array([x]))[0]))
    observed.append(sum(c for x, c in counts.items() if x > keep[-1]))
    expect.append(n - sum(expect))
    obs, exp = np.array(observed, dtype=float), np.array(expect)
    if exp[0] < 5:  # too little tail mass to test on its own: pool with the next bin
        obs[1] += obs[0]
        exp[1] += exp[0]
        obs, exp = obs[1:], exp[1:]
    if exp[-1] < 5:
        obs[-2] += obs[-1]
        exp[-2] += exp[-1]
        obs, exp = obs[:-1], exp[:-1]
    return float(stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue)


@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.7, 50.0])
def test_law_is_the_discrete_gaussian_and_a_wrong_scale_is_rejected(sigma):
    """Chi-square against the exact pmf at alpha 1e-6; the same test rejects the
    law at 1.1 sigma and at sigma / 1.1, and (at 0.5) the rounded continuous
    Gaussian, which a float sampler rounded to integers would give."""
    samples = discrete_gaussian_samples(sigma**2, random.Random(int(sigma * 1000)), DRAWS)
    assert all(type(x) is int for x in samples)
    assert _chi_square_pvalue(samples, lambda s: _pmf(sigma, s)) > ALPHA
    for wrong in (sigma * 1.1, sigma / 1.1):
        assert _chi_square_pvalue(samples, lambda s, w=wrong: _pmf(w, s)) < ALPHA, wrong
    if sigma == 0.5:
        def rounded(s):
            return stats.norm.cdf((s + 0.5) / sigma) - stats.norm.cdf((s - 0.5) / sigma)
        assert _chi_square_pvalue(samples, rounded) < ALPHA
    # mean 0 and the variance of the pmf, within 5 standard errors
    xs = np.array(samples, dtype=np.float64)
    support = np.arange(-int(40 * sigma) - 10, int(40 * sigma) + 11)
    var = float((_pmf(sigma, support) * support**2).sum())
    assert abs(xs.mean()) < 5 * math.sqrt(var / DRAWS)
    fourth = float((_pmf(sigma, support) * support.astype(float)**4).sum())
    assert abs((xs**2).mean() - var) < 5 * math.sqrt((fourth - var**2) / DRAWS)


def test_pmf_helper_is_normalised_and_matches_the_exact_series():
    """The test's pmf sums to 1 and P(0) is 1/sum_k exp(-k^2/(2 sigma^2)) computed in
    exact rationals of a truncated series (the rest is below 1e-40)."""
    for sigma in (0.5, 1.0, 50.0):
        support = np.arange(-int(40 * sigma) - 10, int(40 * sigma) + 11)
        assert _pmf(sigma, support).sum() == pytest.approx(1.0, abs=1e-12)
    # sigma = 0.5: exp(-2 k^2); 1 + 2 sum_{k>=1} exp(-2 k^2)
    series = 1 + 2 * sum(math.exp(-2 * k * k) for k in range(1, 10))
    assert _pmf(0.5, np.array([0]))[0] == pytest.approx(1 / series, rel=1e-14)


@pytest.mark.parametrize("gamma", [Fraction(0), Fraction(1, 3), Fraction(1), Fraction(5, 2)])
def test_bernoulli_exp_has_probability_exp_minus_gamma(gamma):
    rng = random.Random(11)
    n = 40_000
    hits = sum(bernoulli_exp(gamma.numerator, gamma.denominator, rng) for _ in range(n))
    p = math.exp(-gamma)
    if p == 1:
        assert hits == n
        return
    assert stats.binomtest(hits, n, p).pvalue > ALPHA
    assert stats.binomtest(hits, n, math.exp(-gamma * 1.1)).pvalue < ALPHA  # a 10% wrong gamma


def test_discrete_laplace_law():
    """P(Y = y) proportional to exp(-|y| / t), t = 3."""
    rng = random.Random(5)
    samples = [discrete_laplace(3, rng) for _ in range(DRAWS)]

    def pmf(s):
        return np.tanh(1 / 6) * np.exp(-np.abs(s) / 3)  # (1 - e^{-1/t}) / (1 + e^{-1/t})
    assert _chi_square_pvalue(samples, pmf) > ALPHA
    assert _chi_square_pvalue(samples, lambda s: np.tanh(1 / 8) * np.exp(-np.abs(s) / 4)) < ALPHA


def test_sigma_squared_is_taken_exactly_and_seeds_determine_the_draws():
    """A float sigma^2 is its exact Fraction: same draws from the same seed; different
    seeds give different draws; only ``randrange`` is used."""
    a = discrete_gaussian_samples(0.1, random.Random(3), 200)
    b = discrete_gaussian_samples(Fraction(0.1), random.Random(3), 200)
    assert a == b
    assert a != discrete_gaussian_samples(0.1, random.Random(4), 200)

    class OnlyRandrange:
        def __init__(self) -> None:
            self._rng = random.Random(3)

        def randrange(self, stop: int) -> int:
            return self._rng.randrange(stop)

    assert discrete_gaussian_samples(0.1, OnlyRandrange(), 200) == a


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, math.nan, Fraction(0)])
def test_rejects_a_bad_sigma_squared(bad):
    with pytest.raises(ValueError, match="sigma_squared"):
        discrete_gaussian(bad, random.Random(0))
