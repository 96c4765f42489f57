"""Pricing an adaptive random-stopping search (DP-HyPO) with a bounded density ratio.

Wang, Gao, Zhang, Su and Shen, 2023, "DP-HyPO: An Adaptive Private Hyperparameter
Optimization Framework" (NeurIPS 2023) extend random stopping (Papernot & Steinke,
2022, "Hyperparameter Tuning with Renyi Differential Privacy", Theorem 2) to a search
whose j-th configuration is drawn from a distribution pi_j chosen from the earlier
trials' outputs, provided every pi_j stays within fixed multiples of one
data-independent prior pi_0: ``c_low <= pi_j(x) / pi_0(x) <= c_high`` everywhere.

The statement priced here (order lambda > 1; lambda-hat ranges over the grid; the
stopping time K ~ TNB(eta, gamma) with mean E[K]; every configuration's mechanism is
(lambda, eps(lambda))-RDP at every grid order, which E_ref guarantees by dominance)::

    eps'(lambda) = eps(lambda) + ln E[K] / (lambda - 1)
                   + (1 + eta) * min_lambda-hat [ (1 - 1/lambda-hat) eps(lambda-hat)
                                                  + (ln(1/gamma) + ln(c_high/c_low)) / lambda-hat ]
                   + lambda / (lambda - 1) * ln(c_high/c_low)

With ``c_high = c`` and ``c_low = 1/c`` (the sampler's box, :mod:`raydp_synth.tune.
search_space.dp_hypo`), ``ln(c_high/c_low) = 2 ln c``. At c = 1 the two extra terms
vanish and this is Papernot & Steinke's Theorem 2, which dp-accounting's
``RepeatAndSelectDpEvent`` computes; :func:`adaptive_random_stopping_epsilon` then
returns exactly :func:`~raydp_synth.privacy.accounting.random_stopping_epsilon`.

Provenance, stated plainly: the DP-HyPO paper's theorem text could not be read when
this module was written (only summaries of the paper were reachable). The two terms
in ``ln(c_high/c_low)`` are a reconstruction that is conservative against the
argument's two places where the density ratio enters: (i) the output density of the
adaptive search at any outcome is at most ``c_high`` times, and at least ``c_low``
times, the non-adaptive one's factors, which costs at most
``(lambda ln c_high - (lambda - 1) ln c_low) / (lambda - 1) <= lambda/(lambda-1) *
ln(c_high/c_low)`` at order lambda; (ii) the probability that an adaptive trial scores
below a threshold is scaled by at most ``c_high/c_low`` relative to the prior's, which
enters Theorem 2's Hoelder step as ``ln(1/gamma)`` does (gamma -> gamma c_low/c_high).
The constant must be checked against Theorem 1 of the paper before a study priced
with c > 1 is released (docs/budget-pricing.md, section 6.2b).

Only these extra terms are typed here; the base RDP curve, the gamma of the stopping
law, Papernot & Steinke's curve and the conversion to (epsilon, delta) are
dp-accounting's. The Poisson stopping law is refused: DP-HyPO's bound is stated for
the truncated negative binomial family (geometric, logarithmic, tnb:ETA).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import dp_accounting as dpa
import numpy as np
from dp_accounting.rdp import rdp_privacy_accountant as rdp_module

from raydp_synth.errors import ConfigError
from raydp_synth.privacy.accounting import (
    ORDERS,
    random_stopping_epsilon,
    random_stopping_event,
    rdp_curve,
)

__all__ = [
    "BOUND_CHECKED",
    "adaptive_random_stopping_epsilon",
    "adaptive_random_stopping_rdp",
    "require_checked_bound",
    "validate_density_ratio",
]

#: Whether the c > 1 terms above have been checked against Wang et al. (2023),
#: "DP-HyPO", Theorem 1. Until they are, nothing is priced (and so nothing released)
#: with c > 1: :func:`require_checked_bound` refuses it at the CLI's edge and in the
#: accountant. The formula stays here, tested for its own properties, for that check.
BOUND_CHECKED = False


def require_checked_bound(c: float) -> None:
    """Refuse a density-ratio bound c > 1 while its pricing is unchecked (:data:`BOUND_CHECKED`).

    Raises:
        ConfigError: one line, naming the ways out.
    """
    if c > 1 and not BOUND_CHECKED:
        raise ConfigError(
            f"--hypo-c {c:g} cannot be priced yet: the DP-HyPO bound for c > 1 (Wang et al. "
            "2023, Theorem 1) is not yet checked against the paper; use --hypo-c 1 (random "
            "stopping over the sampler's prior), or --selection compose (prices any sampler)"
        )


def validate_density_ratio(c: float) -> float:
    """``c`` as a float, or ConfigError unless it is a finite number >= 1."""
    if isinstance(c, bool) or not isinstance(c, (int, float)) or not (math.isfinite(c) and c >= 1):
        raise ConfigError(f"the density-ratio bound c={c!r} (--hypo-c) must be a finite number >= 1")
    return float(c)


def _check_shape_for_hypo(shape: float) -> float:
    shape = float(shape)
    if math.isinf(shape):
        raise ConfigError(
            "DP-HyPO's bound is stated for a truncated negative binomial number of trials; "
            "use --distribution geometric, logarithmic or tnb:ETA with --sampler dp-hypo"
        )
    return shape


def adaptive_random_stopping_rdp(
    reference_event: dpa.DpEvent,
    *,
    mean: float,
    shape: float,
    density_ratio: float,
    orders: Sequence[float] | None = None,
) -> np.ndarray:
    """RDP curve (on ``orders``; None: :data:`ORDERS`) of the adaptive search above.

    Args:
        reference_event: E_ref, dominating every trial's plan at every order.
        mean: E[K].
        shape: eta of the TNB law (inf, Poisson, is refused when c > 1).
        density_ratio: c >= 1; every proposal lies in [prior / c, c * prior].
    """
    c = validate_density_ratio(density_ratio)
    grid = np.asarray(ORDERS if orders is None else orders, dtype=np.float64)
    base = rdp_curve(random_stopping_event(reference_event, mean, shape), list(grid))
    if c == 1:
        return base
    eta = _check_shape_for_hypo(shape)
    eps_hat = rdp_curve(reference_event, list(grid))
    gamma = rdp_module._gamma_truncated_negative_binomial(eta, float(mean))
    log_ratio = 2.0 * math.log(c)  # ln(c_high / c_low) with the box [1/c, c]
    with np.errstate(invalid="ignore", divide="ignore"):
        holder = (1 - 1 / grid) * eps_hat - math.log(gamma) / grid  # Papernot-Steinke's
        extra_holder = (1 + eta) * (
            np.min(holder + log_ratio / grid) - np.min(holder)
        )
        extra_density = np.where(grid > 1, grid / (grid - 1) * log_ratio, np.inf)
    raw = base + extra_holder + extra_density
    # RDP is nondecreasing in the order: a bound at a higher order holds at a lower one.
    order_index = np.argsort(grid)
    sorted_raw = raw[order_index]
    sorted_bound = np.minimum.accumulate(sorted_raw[::-1])[::-1]
    bound = np.empty_like(raw)
    bound[order_index] = sorted_bound
    return bound


def adaptive_random_stopping_epsilon(
    reference_event: dpa.DpEvent,
    *,
    mean: float,
    shape: float,
    delta: float,
    density_ratio: float,
    orders: Sequence[float] | None = None,
) -> float:
    """Epsilon at ``delta`` of :func:`adaptive_random_stopping_rdp`.

    c = 1 is Papernot & Steinke's random stopping, priced by
    :func:`~raydp_synth.privacy.accounting.random_stopping_epsilon` (bit for bit).
    The conversion from RDP is dp-accounting's ``compute_epsilon``; a NaN anywhere
    is no guarantee (inf).
    """
    c = validate_density_ratio(density_ratio)
    if c == 1 and orders is None:
        return random_stopping_epsilon(reference_event, mean=mean, shape=shape, delta=delta)
    grid = list(ORDERS if orders is None else orders)
    curve = adaptive_random_stopping_rdp(
        reference_event, mean=mean, shape=shape, density_ratio=c, orders=grid
    )
    if np.isnan(curve).any():
        return math.inf
    epsilon, _ = rdp_module.compute_epsilon(grid, curve, delta)
    return float(epsilon)
