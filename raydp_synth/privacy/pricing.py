"""The one place that decides how an epsilon is stated: the tighter of RDP and PLD.

A single run's plan, a ``compose`` study's ledger and every calibration target are
priced by two of dp-accounting's accountants under the add-or-remove-one
neighbouring relation, and the smaller epsilon is stated (:func:`price`):

* RDP: ``dp_accounting.rdp.RdpAccountant`` on :data:`~raydp_synth.privacy.accounting.ORDERS`
  (:func:`~raydp_synth.privacy.accounting.epsilon_of`);
* PLD: ``dp_accounting.pld.PLDAccountant``'s privacy loss distributions with
  pessimistic estimates at value discretization interval :data:`PLD_INTERVAL`
  (Koskela, Jälkö & Honkela, 2020, "Computing tight differential privacy guarantees
  using FFT"; Doroshenko, Ghazi, Kamath, Kumar & Manurangsi, 2022, "Connect the
  dots: tighter discrete approximations of privacy loss distributions").

Privacy argument. Each accountant gives an upper bound on the smallest epsilon for
which the event is (epsilon, delta)-DP: RDP by Mironov's conversion, PLD because a
*pessimistic* discretization rounds every privacy loss up to the grid and moves the
mass cut off in the tails to infinity, so the discretized PLD dominates the true one
at any interval (and composition by convolution preserves the domination); the
interval changes only how tight the bound is, never its validity. An event that is
(eps_1, delta)-DP and (eps_2, delta)-DP is (min(eps_1, eps_2), delta)-DP, so the
minimum of two valid upper bounds is a valid upper bound. Both accountants compose
adaptively (a later plan may be chosen from earlier outputs).

Where a theorem needs RDP, RDP alone prices: PLD cannot price
``RepeatAndSelectDpEvent`` (random stopping, Papernot & Steinke 2022), so such an
event falls back to RDP, and the dominance check of random stopping stays on RDP
curves (:mod:`raydp_synth.privacy.accounting`).

The selection score's discrete Gaussian (``DiscreteGaussianDpEvent``) has the
Gaussian's RDP curve but its own PLD, built from dp-accounting's discrete-Gaussian
privacy loss: its (epsilon, delta) profile is above the continuous Gaussian's at
some epsilons (docs/budget-pricing.md, section 5). An event with one that the leaf
path cannot price is priced by RDP alone, never by ``PLDAccountant``.

Speed: PLDs of the plain Gaussian mechanisms that make up every plan (leaves
``(sigma, q, count)``) are built exactly as ``PLDAccountant`` builds them and cached,
one step per ``(sigma, q)`` and self-composed per count; compositions are left folds
cached by prefix, so a study's granted plans are folded once and a trial's candidate
plans only add their own leaves. The result is ``PLDAccountant``'s epsilon, bit for
bit (tests/privacy/test_pld_pricing.py). Calibration searches on :data:`SEARCH`
(fewer RDP orders, a coarser PLD) and checks its result on :data:`STATED`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import dp_accounting as dpa
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.pld import privacy_loss_distribution as pld_module

from raydp_synth.privacy import accounting
from raydp_synth.privacy.accounting import CALIBRATION_ORDERS, Leaf, gaussian_leaves
from raydp_synth.privacy.events import contains_discrete_gaussian

__all__ = [
    "PLD_INTERVAL",
    "REPORT",
    "SEARCH",
    "SEARCH_PLD",
    "SEARCH_RDP",
    "STATED",
    "Composition",
    "Price",
    "Pricing",
    "RDP_ACCOUNTANT",
    "epsilon",
    "price",
    "rdp_only_price",
]

#: The value discretization interval of every stated PLD epsilon (dp-accounting's default).
PLD_INTERVAL = 1e-4
#: The coarser interval of calibration searches and per-epoch reports (about 10x cheaper;
#: within 0.1% of :data:`PLD_INTERVAL` on the default plans, and still an upper bound).
SEARCH_PLD_INTERVAL = 1e-3

_RELATION = dpa.NeighboringRelation.ADD_OR_REMOVE_ONE
RDP_ACCOUNTANT = "dp_accounting.rdp.RdpAccountant (add-or-remove-one, default orders)"


@dataclass(frozen=True)
class Pricing:
    """How an epsilon is computed.

    Attributes:
        orders: RDP orders; None for :data:`~raydp_synth.privacy.accounting.ORDERS`.
            A subset gives a larger (still valid) epsilon.
        pld_interval: PLD value discretization interval; None for RDP only.
        rdp: False for PLD only (a search that knows RDP's bound is above the target).
    """

    orders: tuple[float, ...] | None
    pld_interval: float | None
    rdp: bool = True

    @property
    def pld_accountant(self) -> str:
        return ("dp_accounting.pld.PLDAccountant (add-or-remove-one, pessimistic estimates, "
                f"value_discretization_interval={self.pld_interval:g})")

    @property
    def rdp_accountant(self) -> str:
        if self.orders is None:
            return RDP_ACCOUNTANT
        return f"dp_accounting.rdp.RdpAccountant (add-or-remove-one, {len(self.orders)} orders)"


#: Every stated epsilon: the statement, the ledger, the accountant's decisions.
STATED = Pricing(orders=None, pld_interval=PLD_INTERVAL)
#: Both accountants, coarse: a cheap upper bound (its uses are checked on :data:`STATED`).
SEARCH = Pricing(orders=CALIBRATION_ORDERS, pld_interval=SEARCH_PLD_INTERVAL)
#: Calibration's first, RDP-only search.
SEARCH_RDP = Pricing(orders=CALIBRATION_ORDERS, pld_interval=None)
#: Calibration's second, PLD-only search (below RDP's calibrated noise, RDP misses the target).
SEARCH_PLD = Pricing(orders=None, pld_interval=SEARCH_PLD_INTERVAL, rdp=False)
#: A run's ``epsilon_spent`` before its loop's last release (an upper bound of STATED's).
REPORT = SEARCH


@dataclass(frozen=True)
class Price:
    """An event's epsilon by each accountant; :attr:`epsilon` is the stated one.

    Attributes:
        rdp: RDP's epsilon.
        pld: PLD's epsilon; None where PLD cannot price the event.
        pricing: how both were computed.
    """

    rdp: float
    pld: float | None
    pricing: Pricing

    @property
    def epsilon(self) -> float:
        """min(RDP, PLD): both are valid upper bounds, so their minimum is one."""
        return self.rdp if self.pld is None else min(self.rdp, self.pld)

    @property
    def accountant(self) -> str:
        """The accountant whose epsilon is stated."""
        if self.pld is not None and self.pld < self.rdp:
            return self.pricing.pld_accountant
        return self.pricing.rdp_accountant

    def to_dict(self) -> dict[str, Any]:
        """What a statement says of the pricing."""
        return {
            "epsilon": self.epsilon,
            "accountant": self.accountant,
            "rule": "the smaller of RDP's and PLD's epsilon (both upper bounds); RDP alone "
                    "where PLD cannot price the event",
            "epsilon_rdp": self.rdp,
            "epsilon_pld": self.pld,
        }


def rdp_only_price(epsilon_rdp: float) -> Price:
    """A price that RDP alone gave (random stopping: a theorem needs RDP)."""
    return Price(rdp=epsilon_rdp, pld=None, pricing=STATED)


# -- PLD -----------------------------------------------------------------------

@functools.lru_cache(maxsize=32)
def _step_pld(sigma: float, q: float, interval: float) -> Any:
    """One release of a Poisson-subsampled Gaussian, as ``PLDAccountant`` builds it."""
    return pld_module.from_gaussian_mechanism(
        standard_deviation=sigma, value_discretization_interval=interval, sampling_prob=q,
        neighboring_relation=_RELATION, pessimistic_estimate=True)


@functools.lru_cache(maxsize=32)
def _discrete_step_pld(sigma: float, interval: float) -> Any:
    """One release of an integer query of sensitivity 1 plus N_Z(0, sigma^2):
    dp-accounting's discrete-Gaussian privacy loss (Canonne, Kamath & Steinke 2020),
    pessimistic, with connect-the-dots as for the continuous Gaussian (Doroshenko et
    al. 2022: an upper bound for any pair of distributions). Its noise is truncated at
    ceil(11.6 sigma), which drops at most 1e-30 of mass (docs/budget-pricing.md,
    section 5)."""
    return pld_module.from_discrete_gaussian_mechanism(
        sigma, sensitivity=1, value_discretization_interval=interval,
        pessimistic_estimate=True, use_connect_dots=True)


@functools.lru_cache(maxsize=32)
def _leaf_pld(leaf: Leaf, interval: float) -> Any:
    sigma, q, count, discrete = leaf
    if discrete:  # a sum of discrete Gaussians is no discrete Gaussian: compose
        step = _discrete_step_pld(sigma, interval)
        return step if count == 1 else step.self_compose(count)
    if q is None:  # PLDAccountant: count Gaussians are one Gaussian of sigma/sqrt(count)
        return pld_module.from_gaussian_mechanism(
            standard_deviation=sigma / math.sqrt(count), value_discretization_interval=interval,
            neighboring_relation=_RELATION, pessimistic_estimate=True)
    return _step_pld(sigma, q, interval).self_compose(count)


@functools.lru_cache(maxsize=32)
def _fold(leaves: tuple[Leaf, ...], interval: float) -> Any:
    """The composition of ``leaves``, left to right from the identity (as ``PLDAccountant``)."""
    if not leaves:
        return pld_module.identity(value_discretization_interval=interval)
    return _fold(leaves[:-1], interval).compose(_leaf_pld(leaves[-1], interval))


def _pld_of_leaves(leaves: tuple[Leaf, ...], delta: float, interval: float) -> float:
    return float(_fold(leaves, interval).get_epsilon_for_delta(delta))


def _pld_epsilon(
    event: dpa.DpEvent, delta: float, interval: float, leaves: Sequence[Leaf] | None = None
) -> float | None:
    """PLD's epsilon of ``event`` (whose :func:`~raydp_synth.privacy.accounting.gaussian_leaves` may be given); None where
    ``PLDAccountant`` cannot price it or fails on it (RDP's bound stands alone)."""
    leaves = gaussian_leaves(event) if leaves is None else leaves
    try:
        if leaves is not None:
            value = _pld_of_leaves(tuple(leaves), delta, interval)
        elif contains_discrete_gaussian(event):
            return None  # PLDAccountant would price it as a continuous Gaussian: RDP's stands
        else:
            pld = pld_privacy_accountant.PLDAccountant(_RELATION, interval)
            if not pld.supports(event):
                return None
            pld.compose(event)
            value = float(pld.get_epsilon(delta))
    except (ValueError, ArithmeticError):
        return None  # dp-accounting's numerics gave no bound: RDP's stands
    return None if math.isnan(value) else value


def price(event: dpa.DpEvent, *, delta: float, pricing: Pricing | None = None) -> Price:
    """The event's :class:`Price` at ``delta`` (``pricing`` None: :data:`STATED`).

    Raises:
        dp_accounting.UnsupportedEventError: an event RDP cannot price.
    """
    pricing = STATED if pricing is None else pricing
    rdp = accounting.epsilon_of(event, delta=delta, orders=pricing.orders) if pricing.rdp else math.inf
    pld = None if pricing.pld_interval is None else _pld_epsilon(event, delta, pricing.pld_interval)
    return Price(rdp=rdp, pld=pld, pricing=pricing)


def epsilon(event: dpa.DpEvent, *, delta: float, pricing: Pricing | None = None) -> float:
    """The stated epsilon of ``event`` at ``delta``: ``price(...).epsilon``."""
    return price(event, delta=delta, pricing=pricing).epsilon


class Composition:
    """The adaptive composition of events, grown one at a time, priced as :func:`price`
    prices the ``ComposedDpEvent`` of the same events (on :data:`STATED`).

    Immutable: :meth:`plus` returns a new composition. Deterministic: the PLD is the
    left fold of the events' leaves in order, the fold that pricing
    ``ComposedDpEvent([*granted, candidate])`` performs, so a trial that calibrated
    against the granted prefix and the accountant compute the same number.
    """

    __slots__ = ("_events", "_leaves", "_prices", "_rdp")

    def __init__(self) -> None:
        self._prices: dict[tuple[float, Pricing], Price] = {}
        self._rdp = accounting.Composition()
        self._events: tuple[dpa.DpEvent, ...] = ()
        self._leaves: tuple[Leaf, ...] | None = ()

    def plus(self, event: dpa.DpEvent) -> Composition:
        """This composition followed by ``event``.

        Raises:
            dp_accounting.UnsupportedEventError: an event RDP cannot price.
            ValueError, TypeError: a malformed event (dp-accounting's checks).
        """
        composed = Composition.__new__(Composition)
        composed._prices = {}
        composed._rdp = self._rdp.plus(event)
        composed._events = (*self._events, event)
        leaves = gaussian_leaves(event) if self._leaves is not None else None
        composed._leaves = None if leaves is None or self._leaves is None else (
            self._leaves + tuple(leaves))
        return composed

    def price(self, delta: float) -> Price:
        """What :func:`price` gives for ``ComposedDpEvent`` of the events, on :data:`STATED`."""
        stated = STATED
        known = self._prices.get((delta, stated))
        if known is not None:  # immutable: priced once per delta
            return known
        rdp = self._rdp.epsilon(delta)
        pld = None
        if stated.pld_interval is not None:
            pld = _pld_epsilon(dp_event.ComposedDpEvent(list(self._events)), delta,
                               stated.pld_interval, self._leaves)
        self._prices[(delta, stated)] = Price(rdp=rdp, pld=pld, pricing=stated)
        return self._prices[(delta, stated)]

    def epsilon(self, delta: float) -> float:
        """Stated epsilon at ``delta`` of everything composed (0 for nothing)."""
        return self.price(delta).epsilon


def compose(events: Iterable[dpa.DpEvent]) -> Composition:
    """A :class:`Composition` of ``events`` in order."""
    out = Composition()
    for e in events:
        out = out.plus(e)
    return out
