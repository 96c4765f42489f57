"""Pricing an adaptive random-stopping search (DP-HyPO) with a bounded density ratio.

Wang, Gao, Zhang, Su and Shen, 2023, "DP-HyPO: An Adaptive Private Hyperparameter
Optimization Framework" (NeurIPS 2023) extend random stopping (Papernot & Steinke,
2022, "Hyperparameter Tuning with Renyi Differential Privacy", Theorem 2) to a search
whose j-th configuration is drawn from a distribution pi_j chosen from the earlier
trials' outputs, provided every pi_j stays within fixed multiples of one
data-independent prior pi_0: ``c_low <= pi_j(x) / pi_0(x) <= c_high`` everywhere.

The statement priced here is the paper's Theorem 1 (orders lambda > 1 and
lambda-hat >= 1 of the grid; the stopping time K ~ TNB(eta, gamma) with mean E[K];
every configuration's mechanism is (lambda, eps(lambda))-RDP at every grid order,
which E_ref guarantees by dominance; ``c_low <= 1 <= c_high``)::

    eps'(lambda) = eps(lambda) + ln E[K] / (lambda - 1)
                   + (1 + eta) * min_lambda-hat [ (1 - 1/lambda-hat) eps(lambda-hat)
                                                  + ln(1/gamma) / lambda-hat ]
                   + (lambda / (lambda - 1) + 1 + eta) * ln(c_high / c_low)

The first three terms are Papernot & Steinke's Theorem 2, which dp-accounting's
``RepeatAndSelectDpEvent`` computes (minimised over the grid, then the lower-order
envelope); the last is DP-HyPO's price for adapting. It enters twice: the adaptive
search's output density is within ``c_high/c_low`` of a non-adaptive one's, which
costs ``lambda/(lambda - 1) ln(c_high/c_low)`` at order lambda (the paper's Lemma
A.4), and the same lemma at order lambda-hat inside the Hoelder step costs
``(1 + eta) ln(c_high/c_low)``, not divided by lambda-hat. Adding the last term to
dp-accounting's envelope is valid: the envelope takes Theorem 2's value at some order
lambda* >= lambda, where the bound holds with ``lambda*/(lambda* - 1) <= lambda/(lambda
- 1)``.

With ``c_high = c`` and ``c_low = 1/c`` (the sampler's box,
:mod:`raydp_synth.tune.search_space.dp_hypo`), ``ln(c_high/c_low) = 2 ln c``. At
c = 1 the extra term vanishes and this is Papernot & Steinke's Theorem 2:
:func:`adaptive_random_stopping_epsilon` then returns exactly
:func:`~raydp_synth.privacy.accounting.random_stopping_epsilon`. The paper states
the theorem for a uniform prior pi_0 over the configurations (Lambda finite, as
here: pi_0 is uniform over the sampler's candidates) and for the truncated negative
binomial family only.

Provenance: the formula was checked against the theorem's text (Theorem 1 and the
last line of its proof in Appendix A, which agree) as transcribed from the paper's
arXiv version; the paper gives no worked epsilon values, so the golden test computes
the theorem by hand on a Gaussian base (``tests/privacy/test_adaptive_tuning.py``).
An earlier reconstruction, written before the text could be read, divided the
Hoelder-step term by lambda-hat and under-priced c > 1; it was never allowed to
price a study (c > 1 was refused until this check).

Only the last term is typed here; the base RDP curve, the gamma of the stopping
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
    "adaptive_random_stopping_epsilon",
    "adaptive_random_stopping_floor",
    "adaptive_random_stopping_rdp",
    "validate_density_ratio",
]

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
    log_ratio = 2.0 * math.log(c)  # ln(c_high / c_low) with the box [1/c, c]
    with np.errstate(invalid="ignore", divide="ignore"):
        adapting = np.where(grid > 1, (grid / (grid - 1) + 1 + eta) * log_ratio, np.inf)
    raw = base + adapting
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


def adaptive_random_stopping_floor(*, mean: float, shape: float, delta: float,
                                   density_ratio: float) -> float:
    """The epsilon of the search before any trial trains: the price of
    :func:`adaptive_random_stopping_epsilon` for trials that release nothing (a
    no-op reference, zero RDP). What is left is the terms that do not depend on the
    trials: the random count K's and, for c > 1, the adaptivity's. A budget at or
    below it buys no trial at any noise.
    """
    return adaptive_random_stopping_epsilon(dpa.NoOpDpEvent(), mean=mean, shape=shape,
                                            delta=delta, density_ratio=density_ratio)
