"""An exact sampler of the discrete Gaussian N_Z(0, sigma^2), for exactly released
noisy integers (the selection score's count).

The discrete Gaussian with parameter sigma^2 puts mass proportional to
``exp(-y^2 / (2 sigma^2))`` on each integer y. Added to an integer query of
sensitivity 1 it is (1/(2 sigma^2))-zCDP, the continuous Gaussian's RDP curve
(Canonne, Kamath & Steinke 2020, "The Discrete Gaussian for Differential Privacy",
Theorem 4); its (epsilon, delta) profile is *not* below the continuous Gaussian's at
every epsilon, so PLD prices it with its own privacy loss
(docs/budget-pricing.md, section 5).

Algorithm (Canonne, Kamath & Steinke 2020, Algorithm 1 and section 5):

1. ``t = floor(sigma) + 1``; draw Y from the discrete Laplace distribution with
   scale t, P(Y = y) proportional to ``exp(-|y| / t)``;
2. accept Y with probability ``exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2))``
   (a Bernoulli(exp(-gamma)) draw), otherwise start again.

The discrete Laplace draw (their Algorithm 2, with s = 1): U uniform on
{0, ..., t-1}; keep it with probability exp(-U/t), else redraw; V geometric, the
number of successes of Bernoulli(exp(-1)) before the first failure; X = U + t V; a
uniform sign B, rejecting (B = 1, X = 0) so that 0 is not counted twice; return
(1 - 2B) X. Bernoulli(exp(-gamma)) (their Proposition 1/section 5.1): for gamma in
[0, 1], draw A_k ~ Bernoulli(gamma / k) for k = 1, 2, ... until the first A_k = 0,
and return 1 if that k is odd (P = sum_k (-gamma)^k / k! = exp(-gamma)); for
gamma > 1, floor(gamma) independent Bernoulli(exp(-1)) draws must all be 1, then
one Bernoulli(exp(-(gamma - floor(gamma)))).

Why it is exact: every probability above is a rational number n/d, so each
Bernoulli(n/d) is the exact event ``randrange(d) < n`` on a uniform integer, and no
step rounds. sigma^2 is converted to a :class:`fractions.Fraction` exactly (a float
is a dyadic rational; the score passes the exact square of its float sigma), so the
sampled law is exactly N_Z(0, sigma^2) for that number, given a source of exactly
uniform integers. ``secrets.SystemRandom`` (production:
:func:`~raydp_synth.privacy.secret_rng.secret_integers` of None) and
``random.Random`` (seeded reproducibility and tests) both draw ``randrange`` by
rejection from whole random bits, exactly uniform. A floating-point sampler has
neither property: its output lattice and rounding reveal the input (Mironov 2012,
"On Significance of the Least Significant Bits for Differential Privacy"), and a
seeded float generator is an enumerable stream (architecture invariant 14). The
running time depends on the random draws only, never on the query.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Protocol

__all__ = [
    "IntegerSource",
    "bernoulli_exp",
    "discrete_gaussian",
    "discrete_gaussian_samples",
    "discrete_laplace",
]


class IntegerSource(Protocol):
    """Uniform integers: ``randrange(n)`` is uniform on {0, ..., n-1}
    (``random.Random``, ``secrets.SystemRandom``)."""

    def randrange(self, stop: int, /) -> int: ...


def _bernoulli(numerator: int, denominator: int, rng: IntegerSource) -> bool:
    """Bernoulli(numerator / denominator), exactly."""
    return rng.randrange(denominator) < numerator


def _bernoulli_exp_at_most_one(numerator: int, denominator: int, rng: IntegerSource) -> bool:
    """Bernoulli(exp(-gamma)) for gamma = numerator / denominator in [0, 1]: the first
    k with A_k ~ Bernoulli(gamma / k) equal to 0 is odd with probability exp(-gamma)."""
    k = 1
    while _bernoulli(numerator, denominator * k, rng):
        k += 1
    return k % 2 == 1


def bernoulli_exp(numerator: int, denominator: int, rng: IntegerSource) -> bool:
    """Bernoulli(exp(-gamma)) for gamma = numerator / denominator >= 0, exactly
    (Canonne, Kamath & Steinke 2020, section 5.1)."""
    if numerator < 0 or denominator <= 0:
        raise ValueError(f"Expected gamma={numerator}/{denominator} >= 0.")
    for _ in range(numerator // denominator):  # exp(-gamma) = exp(-1)^floor * exp(-rest)
        if not _bernoulli_exp_at_most_one(1, 1, rng):
            return False
    return _bernoulli_exp_at_most_one(numerator % denominator, denominator, rng)


def discrete_laplace(scale: int, rng: IntegerSource) -> int:
    """Y with P(Y = y) proportional to exp(-|y| / scale), for an integer scale >= 1
    (Canonne, Kamath & Steinke 2020, Algorithm 2 with s = 1, t = scale)."""
    if scale < 1:
        raise ValueError(f"Expected scale={scale} >= 1.")
    while True:
        u = rng.randrange(scale)
        if not bernoulli_exp(u, scale, rng):
            continue
        v = 0
        while _bernoulli_exp_at_most_one(1, 1, rng):
            v += 1
        x = u + scale * v
        negative = rng.randrange(2) == 1
        if negative and x == 0:
            continue
        return -x if negative else x


def _exact_variance(sigma_squared: float | Fraction) -> Fraction:
    if isinstance(sigma_squared, Fraction):
        value = sigma_squared
    else:
        if not math.isfinite(sigma_squared):
            raise ValueError(f"Expected a finite sigma_squared, got {sigma_squared}.")
        value = Fraction(sigma_squared)  # exact: a float is a dyadic rational
    if value <= 0:
        raise ValueError(f"Expected sigma_squared={sigma_squared} > 0.")
    return value


def discrete_gaussian(sigma_squared: float | Fraction, rng: IntegerSource) -> int:
    """One draw of N_Z(0, sigma^2), exactly (Canonne, Kamath & Steinke 2020,
    Algorithm 1; see the module docstring).

    Args:
        sigma_squared: the distribution's parameter sigma^2 (> 0), as a float (taken
            exactly) or a Fraction. It is the variance of the continuous Gaussian of
            the same curve; the discrete one's variance is slightly below it.
        rng: uniform integers: ``secret_integers(None)`` for a DP release,
            ``random.Random`` for reproducibility runs and tests only.

    Raises:
        ValueError: sigma_squared not finite and positive.
    """
    variance = _exact_variance(sigma_squared)
    n, d = variance.numerator, variance.denominator
    t = math.isqrt(n // d) + 1  # floor(sigma) + 1: floor(sqrt(x)) = isqrt(floor(x))
    while True:
        y = discrete_laplace(t, rng)
        # gamma = (|y| - sigma^2/t)^2 / (2 sigma^2) = (|y| d t - n)^2 / (2 n d t^2)
        if bernoulli_exp((abs(y) * d * t - n) ** 2, 2 * n * d * t * t, rng):
            return y


def discrete_gaussian_samples(
    sigma_squared: float | Fraction, rng: IntegerSource, size: int
) -> list[int]:
    """``size`` independent draws of :func:`discrete_gaussian`."""
    if size < 0:
        raise ValueError(f"Expected size={size} >= 0.")
    variance = _exact_variance(sigma_squared)
    return [discrete_gaussian(variance, rng) for _ in range(size)]
