"""Pricing DP events with dp-accounting's RDP accountant: the one source of epsilons.

Every epsilon that raydp_synth states (a run's release, a study's statement, the
accountant's grant or refusal, noise calibration, the budget CLI) is computed here by
``dp_accounting.rdp.RdpAccountant`` under the add-or-remove-one neighbouring relation,
on one order grid, :data:`ORDERS`. No privacy formula is typed into our code.

* One event or a composition: :func:`epsilon_of`, :func:`compose_epsilon`, and
  :class:`Composition`, which grows one event at a time (a study's grants).
* Calibration prices on :data:`CALIBRATION_ORDERS`, a subset of :data:`ORDERS`
  (:func:`subsampled_gaussian_epsilon`); a subset never gives a smaller epsilon.
* Dominance of one event by another at every order of :data:`ORDERS`
  (:func:`dominance_ratio`, :func:`dominates`, one tolerance :data:`DOMINANCE_RTOL`).
* A hyperparameter search priced by random stopping (Papernot & Steinke, 2022,
  "Hyperparameter Tuning with Renyi Differential Privacy"): K i.i.d. runs of one
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

import copy
import functools
import logging
import math
from collections.abc import Iterable, Sequence

import dp_accounting as dpa
import numpy as np
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant as rdp_module

from raydp_synth.errors import ConfigError, PrivacyInvariantError
from raydp_synth.privacy.events import DiscreteGaussianDpEvent, subsampled_gaussian_event

__all__ = [
    "CALIBRATION_ORDERS",
    "DOMINANCE_RTOL",
    "ORDERS",
    "Composition",
    "compose_epsilon",
    "dominance_ratio",
    "dominates",
    "draw_trial_count",
    "epsilon_of",
    "gaussian_leaves",
    "parse_distribution",
    "random_stopping_epsilon",
    "random_stopping_event",
    "rdp_curve",
    "sampling_gamma",
    "subsampled_gaussian_epsilon",
    "validate_budget",
    "validate_delta",
]

# dp-accounting logs a warning each time it drops a fractional order whose series
# does not converge; dropping an order only makes the bound more conservative.
logging.getLogger("absl").setLevel(logging.ERROR)

#: The RDP order grid of every stated epsilon, of every grant and of the dominance
#: check: dp-accounting's default grid (as floats; dp-accounting converts its own
#: default to the same float array, so epsilons are bit for bit the default's).
ORDERS: tuple[float, ...] = tuple(float(o) for o in rdp_module.DEFAULT_RDP_ORDERS)

#: A sparse subset of :data:`ORDERS` for noise calibration: the small fractional
#: orders that are optimal for weak noise (sigma < 1), then a geometric-ish sweep.
#: Being a subset, it never gives an epsilon below the :data:`ORDERS` epsilon, so
#: noise calibrated on it never overshoots the target when priced on the full grid,
#: and it is 2-3x cheaper to evaluate (measured: within 0.5% of the full grid on
#: DPAF's plans).
CALIBRATION_ORDERS: tuple[float, ...] = (
    1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.8, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0,
    9.0, 10.0, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 63, 128, 256, 512, 1024,
)
# Only a subset of the pricing grid keeps "calibrated epsilon <= target" true.
if not set(CALIBRATION_ORDERS) <= set(ORDERS):
    raise PrivacyInvariantError("CALIBRATION_ORDERS must be a subset of the pricing grid ORDERS")

#: The one tolerance of the dominance check (:func:`dominates`): a plan is dominated
#: when its RDP is at most ``1 + DOMINANCE_RTOL`` times the reference's at every
#: order. The slack absorbs float noise between equivalent events built differently
#: (e.g. the same mechanisms composed in another order); it moves the stated epsilon
#: by at most about this relative amount, far below the four significant digits that
#: are ever stated. Planners calibrate well below it (``tune.planning`` targets a
#: ratio of ``1 - 1e-6``), so the check never decides a planned trial by its slack.
DOMINANCE_RTOL = 1e-9

_DISTRIBUTIONS: dict[str, float] = {"poisson": math.inf, "geometric": 1.0, "logarithmic": 0.0}


def _accountant(orders: Sequence[float] | None = None) -> rdp_module.RdpAccountant:
    """A fresh add-or-remove-one RDP accountant on ``orders`` (None: :data:`ORDERS`)."""
    return rdp_module.RdpAccountant(list(ORDERS if orders is None else orders))


def _epsilon(accountant: rdp_module.RdpAccountant, delta: float) -> float:
    """The accountant's epsilon at ``delta``; inf if its RDP is NaN at any order.

    dp-accounting turns a NaN RDP (say, a noise multiplier that is NaN) into epsilon
    0 (``max(0, nan)``); an RDP that is not a number proves nothing, so it is priced
    as no guarantee at all. Every other epsilon is dp-accounting's, unchanged.
    """
    if np.isnan(np.asarray(accountant.rdp, dtype=np.float64)).any():
        return math.inf
    return float(accountant.get_epsilon(delta))


# -- Gaussian leaves ---------------------------------------------------------------

#: One plain Gaussian mechanism: (noise multiplier, Poisson rate or None, releases,
#: discrete). ``discrete``: discrete Gaussian noise on an integer query
#: (:class:`~raydp_synth.privacy.events.DiscreteGaussianDpEvent`, never subsampled):
#: the Gaussian's RDP curve, its own PLD.
Leaf = tuple[float, "float | None", int, bool]


def gaussian_leaves(event: dpa.DpEvent, count: int = 1) -> list[Leaf] | None:
    """The event as a sequence of Gaussian leaves, in the order in which
    dp-accounting's accountants traverse it (a ``ComposedDpEvent`` left to right, a
    ``SelfComposedDpEvent`` multiplying its count); None for any other event (then
    the accountant itself prices it)."""
    if isinstance(event, dp_event.NoOpDpEvent):
        return []
    if isinstance(event, dp_event.SelfComposedDpEvent):
        return gaussian_leaves(event.event, count * event.count)
    if isinstance(event, dp_event.ComposedDpEvent):
        out: list[Leaf] = []
        for e in event.events:
            part = gaussian_leaves(e, count)
            if part is None:
                return None
            out.extend(part)
        return out
    if isinstance(event, dp_event.GaussianDpEvent):  # also DiscreteGaussianDpEvent, a subclass
        sigma = float(event.noise_multiplier)
        discrete = isinstance(event, DiscreteGaussianDpEvent)
        return [(sigma, None, count, discrete)] if sigma > 0 and math.isfinite(sigma) else None
    if isinstance(event, dp_event.PoissonSampledDpEvent) and isinstance(
        event.event, dp_event.GaussianDpEvent
    ):
        q, sigma = float(event.sampling_probability), float(event.event.noise_multiplier)
        if q == 0:
            return []
        if isinstance(event.event, DiscreteGaussianDpEvent):
            return None  # never planned (plan.Mechanism refuses it); no cached path for it
        return [(sigma, q, count, False)] if sigma > 0 and math.isfinite(sigma) and 0 < q <= 1 else None
    return None


@functools.lru_cache(maxsize=8192)
def _step_rdp(sigma: float, q: float | None, orders: tuple[float, ...] | None) -> np.ndarray:
    """One release of a (Poisson-subsampled) Gaussian mechanism, RDP at each order, as
    ``RdpAccountant`` computes it (read-only: cached and shared)."""
    step: dpa.DpEvent = dp_event.GaussianDpEvent(sigma)
    if q is not None:
        step = dp_event.PoissonSampledDpEvent(q, step)
    accountant = _accountant(orders)
    accountant.compose(step)
    curve = np.asarray(accountant.rdp, dtype=np.float64)
    curve.setflags(write=False)
    return curve


def _rdp_of(event: dpa.DpEvent, orders: Sequence[float] | None) -> np.ndarray:
    """The event's RDP at each order: ``RdpAccountant``'s own numbers.

    Speed without a formula of ours: an event made of Gaussian leaves is composed as
    ``RdpAccountant`` composes it (from zeros, ``rdp += count * step_rdp`` per leaf,
    in its traversal order: the same floating-point operations, so the same bits),
    with each leaf's one-step curve computed by ``RdpAccountant`` itself and cached
    per (sigma, q, orders). Calibration prices the same mechanisms many times (a
    study's granted plans, a candidate's copies, a noise search's plan at each
    scale), and the RDP of a subsampled Gaussian at fractional orders is a slow
    series. Any other event is composed by a fresh accountant.
    """
    key = None if orders is None else tuple(float(o) for o in orders)
    leaves = gaussian_leaves(event)
    if leaves is None:
        accountant = _accountant(orders)
        accountant.compose(event)
        return np.asarray(accountant.rdp, dtype=np.float64)
    return _leaves_rdp(tuple(leaves), key)


def epsilon_of(
    event: dpa.DpEvent, *, delta: float, orders: Sequence[float] | None = None
) -> float:
    """The smallest epsilon such that ``event`` is (epsilon, delta)-DP, by RDP.

    ``RdpAccountant``'s epsilon of the event, bit for bit (:func:`_rdp_of`; NaN
    priced as inf, :func:`_epsilon`).

    Args:
        event: what to price.
        delta: the delta of the statement.
        orders: RDP orders; None for :data:`ORDERS` (used for every stated epsilon).
            Fewer orders give a larger (still valid) epsilon.
    """
    if orders is not None:
        leaves = gaussian_leaves(event)
        if leaves is not None:
            return _search_epsilon(tuple(leaves), tuple(float(o) for o in orders), delta)
    rdp = _rdp_of(event, orders)
    if np.isnan(rdp).any():
        return math.inf
    return float(rdp_module.compute_epsilon(np.array(ORDERS if orders is None else orders),
                                            rdp, delta)[0])


@functools.lru_cache(maxsize=64)
def _split_orders(orders: tuple[float, ...]) -> tuple[tuple[float, ...],
                                                     tuple[tuple[float, float | None], ...]]:
    """The integer orders of ``orders`` and its fractional ones, each with the largest
    integer order of ``orders`` below it (None if there is none)."""
    integers = tuple(o for o in orders if float(o).is_integer())
    fractions = tuple((o, max((i for i in integers if i < o), default=None))
                      for o in orders if not float(o).is_integer())
    return integers, fractions


def _leaves_rdp(leaves: tuple[Leaf, ...], orders: tuple[float, ...] | None) -> np.ndarray:
    """The leaves' composed RDP on ``orders`` (None: :data:`ORDERS`), as
    ``RdpAccountant`` composes it (:func:`_rdp_of`)."""
    rdp = np.zeros(len(ORDERS if orders is None else orders), dtype=np.float64)
    for sigma, q, count, _discrete in leaves:  # a discrete leaf: the Gaussian's curve
        rdp += count * _step_rdp(sigma, q, orders)
    return rdp


@functools.lru_cache(maxsize=16)
def _kl_free_floor(delta: float) -> float:
    """The smallest RDP at which ``compute_epsilon`` uses its order-by-order
    conversion rather than its Kullback-Leibler shortcut (epsilon 0) at ``delta``."""
    r = -math.log1p(-delta**2) if delta > 0 else 0.0
    while delta**2 + math.expm1(-r) > 0:
        r = math.nextafter(r, math.inf)
    return r


def _fractions_to_evaluate(orders: tuple[float, ...], rdp_int: np.ndarray, best: float,
                           delta: float) -> tuple[float, ...]:
    """The fractional orders of ``orders`` whose epsilon could be below ``best``, the
    minimum over its integer orders (whose RDP is ``rdp_int``): those where
    dp-accounting's conversion of a lower bound of the order's RDP (the RDP at the
    integer order below it, at least the conversion's floor) is not above ``best``."""
    integers, fractions = _split_orders(orders)
    at = dict(zip(integers, rdp_int.tolist(), strict=True))
    floor = _kl_free_floor(delta)

    def bound(order: float, below: float | None) -> float:
        lower = floor if below is None else max(floor, at[below])
        return float(rdp_module.compute_epsilon([order], [lower], delta)[0])

    return tuple(order for order, below in fractions if not bound(order, below) > best)


def _search_epsilon(leaves: tuple[Leaf, ...], orders: tuple[float, ...], delta: float) -> float:
    """RDP's epsilon of Gaussian ``leaves`` on a search grid ``orders``: the minimum of
    ``RdpAccountant``'s per-order epsilons, evaluating the slow fractional orders only
    where they can give it.

    Why a skipped order cannot give the minimum. ``compute_epsilon`` converts each
    order a separately, by a conversion non-decreasing in that order's RDP (outside
    its Kullback-Leibler shortcut for an RDP below about delta^2), and states the
    minimum over orders, floored at 0. Renyi divergence is non-decreasing in its
    order (van Erven & Harremoes, 2014, "Renyi divergence and Kullback-Leibler
    divergence", Theorem 3), and so is a composition's (a sum of such curves); so at
    a fractional order a, the RDP is at least the one at the grid's largest integer
    order below a (closed form, cheap), and dp-accounting's conversion of that lower
    bound at order a bounds order a's epsilon from below. An order whose bound already
    exceeds the minimum found is not evaluated. Each evaluated order's RDP is
    dp-accounting's (the one-step curves of :func:`_step_rdp`, composed as
    :func:`_rdp_of` composes them: per order, the same operations), so the minimum is
    the full grid's number, bit for bit (tests/privacy/test_rdp_pricing.py sweeps it).

    Below order 2 the only lower bound is the Kullback-Leibler shortcut's threshold:
    if a mechanism's RDP at such an order is below about delta^2 (an almost perfectly
    private mechanism), dp-accounting states 0 there and this search may state a
    larger epsilon. Either is a valid upper bound: a minimum over a subset of orders
    is never below the full grid's (each order's epsilon is a valid bound), so a
    search never understates a price; :data:`~raydp_synth.privacy.pricing.STATED`
    prices on the full grid, every order evaluated.
    """
    integers, fractions = _split_orders(orders)
    if not integers:
        rdp = _leaves_rdp(leaves, orders)
        if np.isnan(rdp).any():
            return math.inf
        return float(rdp_module.compute_epsilon(np.array(orders), rdp, delta)[0])
    rdp_int = _leaves_rdp(leaves, integers)
    if np.isnan(rdp_int).any():
        return math.inf
    best = float(rdp_module.compute_epsilon(np.array(integers), rdp_int, delta)[0])
    needed = _fractions_to_evaluate(orders, rdp_int, best, delta)
    if not needed:
        return best
    rdp_frac = _leaves_rdp(leaves, needed)
    if np.isnan(rdp_frac).any():
        return math.inf
    return float(rdp_module.compute_epsilon(np.array(integers + needed),
                                            np.concatenate([rdp_int, rdp_frac]), delta)[0])


def compose_epsilon(events: Iterable[dpa.DpEvent], delta: float) -> float:
    """Epsilon at ``delta`` of the RDP composition of ``events`` (0 for none)."""
    accountant = _accountant()
    for event in events:
        accountant.compose(event)
    return _epsilon(accountant, delta)


class Composition:
    """The adaptive RDP composition of events on :data:`ORDERS`, grown one at a time.

    Immutable: :meth:`plus` returns a new composition and leaves this one as it was,
    so a caller can price a candidate and keep or drop it. RDP composes additively at
    every order, also when a later event is chosen from earlier DP outputs (Mironov,
    2017, "Renyi Differential Privacy", Proposition 1).
    """

    __slots__ = ("_accountant",)

    def __init__(self) -> None:
        self._accountant = _accountant()

    def plus(self, event: dpa.DpEvent) -> Composition:
        """This composition followed by ``event``.

        Raises:
            dp_accounting.UnsupportedEventError: an event RDP cannot price.
            ValueError, TypeError: a malformed event (dp-accounting's checks: a
                negative count or noise multiplier, a sampling rate outside [0, 1]).
        """
        composed = Composition.__new__(Composition)
        composed._accountant = copy.deepcopy(self._accountant)
        composed._accountant.compose(event)
        return composed

    def epsilon(self, delta: float) -> float:
        """Epsilon at ``delta`` of everything composed (0 for nothing)."""
        return _epsilon(self._accountant, delta)


@functools.lru_cache(maxsize=4096)
def subsampled_gaussian_epsilon(
    *, noise_multiplier: float, sample_rate: float | None, num_steps: int, delta: float
) -> float:
    """Cached epsilon of one mechanism on :data:`CALIBRATION_ORDERS` (an upper bound)."""
    event = subsampled_gaussian_event(
        noise_multiplier=noise_multiplier, sample_rate=sample_rate, num_steps=num_steps
    )
    return epsilon_of(event, delta=delta, orders=CALIBRATION_ORDERS)


# -- dominance -----------------------------------------------------------------


def rdp_curve(event: dpa.DpEvent, orders: Sequence[float] | None = None) -> np.ndarray:
    """The event's RDP epsilon at each order (``RdpAccountant.rdp``; :data:`ORDERS`)."""
    return _rdp_of(event, orders)


def dominance_ratio(event: dpa.DpEvent, reference: np.ndarray) -> float:
    """max over :data:`ORDERS` of RDP(event) / RDP(reference), the reference given as
    its :func:`rdp_curve`: at most 1 iff ``event`` is dominated at every order.

    An order where the reference's RDP is +inf constrains nothing (no bound that uses
    it is finite). A positive RDP where the reference's is 0 gives inf, and so does a
    NaN in either curve: NaN never dominates.

    Raises:
        dp_accounting.UnsupportedEventError: an event the RDP accountant cannot price.
    """
    curve = rdp_curve(event)
    reference = np.asarray(reference, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(reference > 0, curve / reference, np.where(curve > 0, np.inf, 0.0))
    ratio = np.where(np.isposinf(reference), 0.0, ratio)
    ratio = np.where(np.isnan(curve) | np.isnan(reference), np.inf, ratio)
    return float(np.max(ratio))


def dominates(reference_event: dpa.DpEvent, event: dpa.DpEvent) -> bool:
    """True iff ``event``'s RDP is at most the reference's at every order of
    :data:`ORDERS`, up to the relative :data:`DOMINANCE_RTOL` (:func:`dominance_ratio`).

    Raises:
        dp_accounting.UnsupportedEventError: an event the RDP accountant cannot price.
    """
    return dominance_ratio(event, rdp_curve(reference_event)) <= 1 + DOMINANCE_RTOL


# -- random stopping -----------------------------------------------------------


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


# -- budget validation ---------------------------------------------------------


def validate_budget(epsilon: float | None, delta: float) -> None:
    """Reject a budget that is not a finite epsilon > 0 (None: no epsilon, a
    non-private reference) and a delta in (0, 1) (the bound delta < 1/n needs n:
    :func:`validate_delta`).

    Raises:
        ConfigError: naming the setting and its value.
    """
    if epsilon is not None and not (math.isfinite(epsilon) and epsilon > 0):
        raise ConfigError(f"the privacy budget's epsilon {epsilon} must be a finite number > 0")
    if not (math.isfinite(delta) and 0 < delta < 1):
        raise ConfigError(f"the privacy budget's delta {delta} must be in (0, 1)")


def validate_delta(delta: float, *, dataset_size: int) -> None:
    """Reject a delta that does not protect individuals: delta < 1/|D|.

    Args:
        delta: the budget's delta.
        dataset_size: |D|, the records of the whole sensitive dataset the guarantee
            is for (every split drawn from the sensitive source:
            :func:`~raydp_synth.data.info.sensitive_records`), not the training
            split's n (publishing each record of D outright with probability delta
            is (0, delta)-DP and publishes |D| delta records on average).

    Raises:
        ConfigError: naming the value and the bound.
    """
    if not (math.isfinite(delta) and 0 < delta < 1.0 / dataset_size):
        raise ConfigError(
            f"the privacy budget's delta {delta:g} must satisfy 0 < delta < 1/|D| = "
            f"{1.0 / dataset_size:.3g} for the |D|={dataset_size} records of the sensitive "
            "dataset (all its splits, not only the training split); use e.g. "
            f"delta={10 ** math.floor(math.log10(0.1 / dataset_size)):g}"
        )
