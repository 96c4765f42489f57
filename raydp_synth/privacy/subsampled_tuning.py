"""Pricing hyperparameter tuning on a Poisson subset of the data (Koskela & Kulkarni).

Koskela & Kulkarni, 2023, "Practical Differentially Private Hyperparameter Tuning
with Subsampling" (NeurIPS): draw the tuning set X1 from the sensitive data X by
Poisson subsampling (each record independently with probability ``q``), run a
random-stopping search (Papernot & Steinke, 2022, "Hyperparameter Tuning with Renyi
Differential Privacy") on X1 only, then train one final model with the extrapolated
best configuration, on X (their variant 1) or on X minus X1 (their variant 2).

The RDP curves here are upper bounds on :data:`~raydp_synth.privacy.accounting.ORDERS`
(add-or-remove-one neighbours), converted to (epsilon, delta) by dp-accounting's own
``compute_epsilon`` (the same conversion every other stated epsilon uses).

Statements implemented (alpha the Renyi order):

1. Tuning on X1, unamplified: ``eps_T(alpha)``, the RDP of
   ``RepeatAndSelectDpEvent(E_ref, E[K], shape)`` computed by dp-accounting, where
   E_ref bounds every trial's plan *with respect to neighbours of X1* (a trial's
   Poisson rates are fixed numbers such as ``B / (q n)``, never ``B / |X1|``: the size
   of X1 is data-dependent).
2. Amplification by the Poisson draw of X1 (Zhu & Wang, 2019, "Poisson Subsampled
   Renyi Differential Privacy", ICML, the general upper bound for any mechanism): for
   an integer alpha >= 2, M o Poisson(q) is (alpha, eps'(alpha))-RDP with::

       eps'(alpha) <= 1/(alpha-1) * log( (1-q)^(alpha-1) (alpha q - q + 1)
                      + C(alpha,2) q^2 (1-q)^(alpha-2) e^{eps(2)}
                      + 3 sum_{l=3..alpha} C(alpha,l) q^l (1-q)^(alpha-l) e^{(l-1) eps(l)} )

   (:func:`poisson_subsampled_rdp_bound`, the only theorem typed here; items 3 and 5
   are one-line convexity bounds, proved below).
   Non-integer orders take the bound of the next integer order up: Renyi divergence
   is non-decreasing in its order (van Erven & Harremoes, 2014, "Renyi Divergence and
   Kullback-Leibler Divergence", Theorem 3), so that stays valid. Orders above
   :data:`MAX_INTEGER_ORDER` (256, 512, 1024) keep the weaker bounds of item 3.
3. Two bounds that hold at every real order and are taken as a minimum with item 2:
   the unamplified ``eps_T(alpha)`` itself, and
   ``1/(alpha-1) * log(1 - q + q e^{(alpha-1) eps_T(alpha)})``. Both follow from the
   convexity of ``t -> t^alpha`` and ``t -> t^(1-alpha)``: conditioned on which other
   records were drawn, the output on X + {x} is the mixture ``q P1 + (1-q) P0`` of the
   outputs with and without x in X1, so ``E_{P0}[(mixture/P0)^alpha] <= q e^{(alpha-1)
   eps} + 1 - q`` and likewise in the other direction; averaging over the other
   records keeps the bound (joint convexity of ``integral p^alpha r^(1-alpha)``).
4. Variant 1 (final run on all of X): adaptive RDP composition (Mironov, 2017,
   "Renyi Differential Privacy", Proposition 1): tuning curve + final run's curve.
5. Variant 2 (final run on X minus X1), derived here as in item 3 (not checked against
   the paper's own statement of variant 2, its equation (3.2)): conditioned on the
   other records' split, adding x puts it in X1 with probability q (the pair differs
   only in the tuning input: at most ``eps_T``, the final run being post-processing
   of the tuning output on unchanged data) or in X minus X1 (only the final run sees
   it: at most ``eps_F``). Convexity as in item 3 gives, in both directions::

       eps(alpha) <= 1/(alpha-1) * log( q e^{(alpha-1) eps_T(alpha)}
                                        + (1-q) e^{(alpha-1) eps_F(alpha)} )

   with the *unamplified* tuning curve: the q is already in the mixture weights. The
   final run's rates must then be fixed numbers too (sized with ``(1-q) n``).
"""

from __future__ import annotations

import math

import dp_accounting as dpa
import numpy as np
from dp_accounting.rdp import rdp_privacy_accountant as rdp_module
from scipy.special import gammaln

from raydp_synth.errors import ConfigError
from raydp_synth.privacy.accounting import ORDERS, random_stopping_event, rdp_curve

__all__ = [
    "MAX_INTEGER_ORDER",
    "amplified_tuning_rdp",
    "epsilon_from_rdp",
    "poisson_subsampled_rdp_bound",
    "unamplified_tuning_rdp",
    "variant1_rdp",
    "variant2_rdp",
]

#: Largest integer order at which the amplification theorem is evaluated: it needs the
#: tuning curve at every integer 2..alpha, so the curve is computed on
#: ``ORDERS`` plus the integers 2..MAX_INTEGER_ORDER. Above it (ORDERS' 256, 512 and 1024,
#: never the optimal order of an epsilon stated here) only item 3's bound is used.
MAX_INTEGER_ORDER = 128

_ORDERS = np.asarray(ORDERS, dtype=np.float64)
_INTEGERS = np.arange(2, MAX_INTEGER_ORDER + 1, dtype=np.float64)
#: The grid the tuning phase's unamplified curve is computed on.
_TUNING_GRID: tuple[float, ...] = tuple(sorted(set(ORDERS) | {float(i) for i in _INTEGERS}))


def _check_fraction(q: float) -> float:
    q = float(q)
    if not (math.isfinite(q) and 0 < q <= 1):
        raise ConfigError(f"the tuning fraction {q} must be in (0, 1]")
    return q


def poisson_subsampled_rdp_bound(base_rdp_at_integers: np.ndarray, q: float) -> np.ndarray:
    """Zhu & Wang (2019)'s general upper bound on the RDP of ``M o Poisson(q)``.

    Args:
        base_rdp_at_integers: ``eps(l)`` for ``l = 2, 3, ..., A``: an RDP bound of the
            mechanism M at every integer order from 2 to A (+inf allowed).
        q: the Poisson inclusion probability, in (0, 1].

    Returns:
        The bound at the integer orders ``2..A`` (same length as the input). At
        ``q = 1`` the base curve is returned unchanged (no subsampling).
    """
    q = _check_fraction(q)
    eps = np.asarray(base_rdp_at_integers, dtype=np.float64)
    if q == 1.0:
        return eps.copy()
    top = len(eps) + 1
    log_q, log_1mq = math.log(q), math.log1p(-q)
    out = np.empty(len(eps), dtype=np.float64)
    # (l - 1) eps(l) for l = 2..top, indexed by l - 2; inf stays inf.
    cgf = np.where(np.isinf(eps), np.inf, (np.arange(2, top + 1) - 1) * eps)
    for alpha in range(2, top + 1):
        ls = np.arange(2, alpha + 1)
        log_binom = gammaln(alpha + 1) - gammaln(ls + 1) - gammaln(alpha - ls + 1)
        terms = log_binom + ls * log_q + (alpha - ls) * log_1mq + cgf[: alpha - 1]
        terms[1:] += math.log(3.0)  # l >= 3 carries the factor 3
        first = (alpha - 1) * log_1mq + math.log(alpha * q - q + 1)
        with np.errstate(invalid="ignore"):
            total = np.logaddexp.reduce(np.concatenate(([first], terms)))
        out[alpha - 2] = total / (alpha - 1)
    return out


def _convexity_bound(rdp: np.ndarray, orders: np.ndarray, q: float) -> np.ndarray:
    """Item 3 of the module docstring: ``log(1 - q + q e^{(a-1) eps}) / (a - 1)``."""
    if q == 1.0:
        return rdp.copy()
    with np.errstate(invalid="ignore"):
        return np.logaddexp(math.log1p(-q), math.log(q) + (orders - 1) * rdp) / (orders - 1)


def _tuning_curve_on_grid(reference_event: dpa.DpEvent, mean: float, shape: float) -> np.ndarray:
    return rdp_curve(random_stopping_event(reference_event, mean, shape), orders=_TUNING_GRID)


def unamplified_tuning_rdp(reference_event: dpa.DpEvent, *, mean: float, shape: float) -> np.ndarray:
    """RDP on ORDERS of random stopping on X1 (item 1): dp-accounting's
    ``RepeatAndSelectDpEvent`` curve, priced on a grid that contains ORDERS."""
    grid = _tuning_curve_on_grid(reference_event, float(mean), float(shape))
    index = {order: i for i, order in enumerate(_TUNING_GRID)}
    return np.array([grid[index[o]] for o in ORDERS], dtype=np.float64)


def amplified_tuning_rdp(
    reference_event: dpa.DpEvent, *, mean: float, shape: float, tune_fraction: float
) -> np.ndarray:
    """RDP on :data:`ORDERS` of the tuning phase: random stopping (E[K] = ``mean``,
    ``shape`` as in :func:`~raydp_synth.privacy.accounting.parse_distribution`) of
    trials dominated by ``reference_event``, run on a Poisson(``tune_fraction``) subset.

    The minimum, at each order, of items 1-3 of the module docstring.
    """
    q = _check_fraction(tune_fraction)
    grid = _tuning_curve_on_grid(reference_event, float(mean), float(shape))
    index = {order: i for i, order in enumerate(_TUNING_GRID)}
    at_integers = np.array([grid[index[float(a)]] for a in _INTEGERS])
    amplified = poisson_subsampled_rdp_bound(at_integers, q)
    base = np.array([grid[index[o]] for o in ORDERS], dtype=np.float64)
    out = np.minimum(base, _convexity_bound(base, _ORDERS, q))
    for i, order in enumerate(ORDERS):
        up = math.ceil(order)
        if up <= MAX_INTEGER_ORDER:
            out[i] = min(out[i], amplified[max(up, 2) - 2])
    return out


def variant1_rdp(tuning_rdp: np.ndarray, final_event: dpa.DpEvent) -> np.ndarray:
    """Item 4: the final run on all of X after the tuning phase (RDP composition)."""
    return np.asarray(tuning_rdp, dtype=np.float64) + rdp_curve(final_event)


def variant2_rdp(
    unamplified_tuning: np.ndarray, final_event: dpa.DpEvent, *, tune_fraction: float
) -> np.ndarray:
    """Item 5: the final run on X minus X1. ``unamplified_tuning`` is the curve of item
    1 (:func:`unamplified_tuning_rdp`), not the amplified one."""
    q = _check_fraction(tune_fraction)
    final = rdp_curve(final_event)
    tune = np.asarray(unamplified_tuning, dtype=np.float64)
    if q == 1.0:
        return tune.copy()
    with np.errstate(invalid="ignore"):
        mixed = np.logaddexp(math.log(q) + (_ORDERS - 1) * tune,
                             math.log1p(-q) + (_ORDERS - 1) * final) / (_ORDERS - 1)
    return mixed


def epsilon_from_rdp(rdp: np.ndarray, delta: float) -> float:
    """Epsilon at ``delta`` of an RDP curve on :data:`ORDERS`, by dp-accounting's
    ``compute_epsilon`` (inf if the curve has a NaN: it proves nothing)."""
    rdp = np.asarray(rdp, dtype=np.float64)
    if rdp.shape != _ORDERS.shape:
        raise ConfigError(f"an RDP curve on ORDERS has {len(ORDERS)} values, got {rdp.shape}")
    if np.isnan(rdp).any():
        return math.inf
    eps, _ = rdp_module.compute_epsilon(list(ORDERS), list(rdp), delta)
    return float(eps)

