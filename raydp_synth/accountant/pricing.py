"""Pricing a whole study with dp-accounting: pure functions, no Ray.

Two ways to price a hyperparameter search (docs/budget-pricing.md, section 6); every
number comes from ``dp_accounting.rdp.RdpAccountant`` on its default order grid
(:data:`ORDERS`), under the add-or-remove-one relation:

* ``compose``: the study is the adaptive composition of every granted plan
  (:func:`compose_epsilon`). Adaptivity is free under RDP composition: a later
  trial's configuration is post-processing of earlier DP outputs.
* ``random-stopping`` (Papernot & Steinke, ICLR 2022): K i.i.d. runs of one
  mechanism Q, K drawn from a distribution with mean ``trials``, only the best run
  released, costs ``RepeatAndSelectDpEvent(E_ref, mean, shape)``
  (:func:`random_stopping_event`), where E_ref bounds Q's RDP curve at every order.
  A trial whose plan is :func:`dominates`-checked against E_ref on the grid is
  covered: the theorem only evaluates Q's RDP at grid orders, and when configs are
  drawn independently of the data Q is a data-independent mixture of the trials'
  plans, whose Renyi divergence is at most the largest of theirs (joint
  quasi-convexity), hence at most E_ref's at every order.

:func:`draw_trial_count` draws K from the same distribution that dp-accounting
prices: for the truncated negative binomial family it uses a gamma whose mean does
not exceed ``mean`` and which is not below the gamma dp-accounting prices with, so
both terms of Theorem 2 that depend on the distribution (ln(1/gamma) and ln E[K])
are bounded by the priced ones.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Iterable, Sequence

import dp_accounting as dpa
import numpy as np
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant as rdp_module

from raydp_synth.errors import ConfigError

__all__ = [
    "ORDERS",
    "DOMINANCE_RTOL",
    "compose_epsilon",
    "dominates",
    "draw_trial_count",
    "parse_distribution",
    "random_stopping_epsilon",
    "random_stopping_event",
    "rdp_curve",
    "sampling_gamma",
]

# dp-accounting logs a warning each time it drops a fractional order whose series
# does not converge; dropping an order only makes the bound more conservative.
logging.getLogger("absl").setLevel(logging.ERROR)

#: The RDP order grid of every stated epsilon and of the dominance check:
#: dp-accounting's default grid.
ORDERS: tuple[float, ...] = tuple(float(o) for o in rdp_module.DEFAULT_RDP_ORDERS)

#: Relative slack of :func:`dominates`, for float noise between equivalent events
#: built differently (e.g. the same mechanisms composed in another order). It moves
#: the stated epsilon by at most about this relative amount, far below the four
#: significant digits that are ever stated.
DOMINANCE_RTOL = 1e-9

_DISTRIBUTIONS: dict[str, float] = {"poisson": math.inf, "geometric": 1.0, "logarithmic": 0.0}


def parse_distribution(spec: str) -> float:
    """The ``RepeatAndSelectDpEvent`` shape of a trial-count distribution.

    Args:
        spec: ``"poisson"`` (shape inf), ``"geometric"`` (1), ``"logarithmic"`` (0)
            or ``"tnb:ETA"``, the truncated negative binomial with shape 0 < ETA < inf.

    Raises:
        ConfigError: naming the bad value and the accepted forms.
    """
    accepted = "poisson, geometric, logarithmic or tnb:ETA with 0 < ETA < inf (e.g. tnb:0.5)"
    if not isinstance(spec, str):
        raise ConfigError(f"the trial-count distribution {spec!r} must be a string: {accepted}")
    text = spec.strip().lower()
    if text in _DISTRIBUTIONS:
        return _DISTRIBUTIONS[text]
    if text.startswith("tnb:"):
        try:
            eta = float(text[4:])
        except ValueError:
            eta = math.nan
        if math.isfinite(eta) and eta > 0:
            return eta
    raise ConfigError(f"the trial-count distribution {spec!r} is not one of: {accepted}")


def _check_shape(shape: float) -> float:
    shape = float(shape)
    if math.isnan(shape) or shape < 0:
        raise ConfigError(f"Expected distribution shape={shape} >= 0 (inf for Poisson).")
    return shape


def _check_mean(mean: float) -> float:
    mean = float(mean)
    if not (math.isfinite(mean) and mean >= 1):
        raise ConfigError(f"Expected mean number of trials={mean} >= 1 (and finite).")
    return mean


@functools.lru_cache(maxsize=64)
def sampling_gamma(shape: float, mean: float) -> float:
    """The gamma of TNB(shape, gamma) with which trial counts are drawn.

    Geometric: exactly 1/mean. Otherwise the upper end of a bisection on
    dp-accounting's own mean function, so E[K] <= ``mean`` and gamma is at least the
    (conservative, lower-end) gamma that dp-accounting prices the study with.
    """
    shape, mean = _check_shape(shape), _check_mean(mean)
    if math.isinf(shape):
        raise ConfigError("the Poisson distribution has no gamma parameter")
    if shape == 1:
        return 1.0 / mean
    lo, hi = 0.0, min(1.0, 2 * (shape + 1) / mean)  # mean(hi) <= mean (dp-accounting)
    for _ in range(200):
        if hi <= lo * (1 + 1e-13):
            break
        mid = (lo + hi) / 2
        if rdp_module._truncated_negative_binomial_mean(mid, shape) <= mean:
            hi = mid
        else:
            lo = mid
    return hi


def draw_trial_count(distribution: str | float, mean: float, rng: np.random.Generator) -> int:
    """Draw the number of trials K of a random-stopping study.

    Poisson(mean) (K may be 0); otherwise TNB(eta, gamma) on {1, 2, ...}
    (Papernot & Steinke 2022, Definition 1): P(K = k) proportional to
    ``binom(k + eta - 1, k) (1 - gamma)^k``; eta = 1 is the geometric distribution
    (mean 1/gamma) and eta -> 0 the logarithmic one. gamma is solved from ``mean``
    numerically (:func:`sampling_gamma`).

    The accountant calls this once per study, before any data is touched, with an
    RNG seeded from OS entropy (never a user seed: a K that someone can predict or
    reproduce voids the guarantee).

    Args:
        distribution: a :func:`parse_distribution` string, or its shape.
        mean: E[K], the study's ``--trials`` (>= 1).
        rng: the source of randomness.
    """
    shape = (
        parse_distribution(distribution)
        if isinstance(distribution, str)
        else _check_shape(distribution)
    )
    mean = _check_mean(mean)
    if math.isinf(shape):
        return int(rng.poisson(mean))
    if mean == 1:
        return 1
    gamma = sampling_gamma(shape, mean)
    if shape == 1:
        return int(rng.geometric(gamma))
    if shape == 0:
        return int(rng.logseries(1.0 - gamma))
    # Negative binomial NB(eta, gamma) on {0, 1, ...} conditioned on K >= 1, by
    # rejection; batches sized so that one batch usually holds a positive draw.
    p_zero = math.exp(shape * math.log(gamma))
    batch = int(min(1_000_000, max(64, 4 / max(1e-12, 1 - p_zero))))
    while True:
        draws = rng.negative_binomial(shape, gamma, size=batch)
        positive = draws[draws > 0]
        if positive.size:
            return int(positive[0])


def _accountant(orders: Sequence[float] | None) -> rdp_module.RdpAccountant:
    return rdp_module.RdpAccountant(list(orders) if orders is not None else list(ORDERS))


def compose_epsilon(events: Iterable[dpa.DpEvent], delta: float) -> float:
    """Epsilon at ``delta`` of the RDP composition of ``events`` (0 for none)."""
    accountant = _accountant(None)
    for event in events:
        accountant.compose(event)
    return float(accountant.get_epsilon(delta))


def random_stopping_event(
    reference_event: dpa.DpEvent, mean: float, shape: float
) -> dp_event.RepeatAndSelectDpEvent:
    """The event of a random-stopping search: K runs of ``reference_event``, best kept.

    Args:
        reference_event: E_ref, an upper bound (at every order) of every trial's plan.
        mean: E[K], the study's ``--trials``.
        shape: from :func:`parse_distribution`.
    """
    return dp_event.RepeatAndSelectDpEvent(reference_event, _check_mean(mean), _check_shape(shape))


def random_stopping_epsilon(
    reference_event: dpa.DpEvent, *, mean: float, shape: float, delta: float
) -> float:
    """Epsilon at ``delta`` of :func:`random_stopping_event`."""
    return compose_epsilon([random_stopping_event(reference_event, mean, shape)], delta)


def rdp_curve(event: dpa.DpEvent, orders: Sequence[float] | None = None) -> np.ndarray:
    """The event's RDP epsilon at each order (``RdpAccountant.rdp``; default grid)."""
    accountant = _accountant(orders)
    accountant.compose(event)
    return np.asarray(accountant.rdp, dtype=np.float64)


def dominates(
    reference_event: dpa.DpEvent,
    event: dpa.DpEvent,
    orders: Sequence[float] | None = None,
) -> bool:
    """True iff ``event``'s RDP is <= the reference's at every order of the grid.

    Up to a relative :data:`DOMINANCE_RTOL` for float noise. NaN never dominates.

    Raises:
        dp_accounting.UnsupportedEventError: an event the RDP accountant cannot price.
    """
    reference = rdp_curve(reference_event, orders)
    candidate = rdp_curve(event, orders)
    with np.errstate(invalid="ignore"):
        bound = reference + DOMINANCE_RTOL * np.abs(reference)
        return bool(np.all(candidate <= bound))
