"""Noise calibration against dp-accounting by a bracketed search (never overshooting).

Two entry points:

* :func:`calibrate_noise_multiplier`: the smallest noise multiplier (up to a
  relative tolerance) whose mechanism meets a target epsilon. The search (a
  bracketed secant, :func:`_shrink_bracket`) keeps a feasible upper end and returns
  it, so the result never exceeds the target.
* :func:`calibrate_plan`: a plan of several mechanisms with a budget split. Each
  mechanism j is calibrated to its share ``t * share_j * epsilon`` for a scale t,
  and t is the largest scale for which the *composed* plan still meets
  ``epsilon``. RDP composition is tighter than adding epsilons, so t >= 1: the
  split states relative weights, and the whole budget is used.

Each mechanism's noise is calibrated by RDP on
:data:`~raydp_synth.privacy.accounting.CALIBRATION_ORDERS`; the composed plan is
searched first by RDP, then (where it is tighter) by the stated pricing of
:mod:`raydp_synth.privacy.pricing`, the smaller of RDP's and PLD's epsilon, and the
returned plan is checked on that stated pricing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from raydp_synth.errors import ConfigError, PrivacyInvariantError
from raydp_synth.privacy import pricing as pricing_module
from raydp_synth.privacy.accounting import subsampled_gaussian_epsilon
from raydp_synth.privacy.plan import Mechanism, PrivacyPlan
from raydp_synth.privacy.pricing import SEARCH_PLD, SEARCH_RDP, STATED, Pricing
from raydp_synth.privacy.sampling import batch_sample_rate

__all__ = ["MechanismSpec", "calibrate_noise_multiplier", "calibrate_plan"]

_SIGMA_MIN = 1e-2
_SIGMA_MAX = 1e4


def calibrate_noise_multiplier(
    epsilon_at: Callable[[float], float],
    *,
    target_epsilon: float,
    rtol: float = 1e-3,
    initial_guess: float = 1.0,
) -> float:
    """Smallest sigma (within ``rtol``) with ``epsilon_at(sigma) <= target_epsilon``.

    ``epsilon_at`` must be non-increasing in sigma (true of every Gaussian event).

    Args:
        epsilon_at: the mechanism's epsilon as a function of its noise multiplier.
        target_epsilon: the budget the mechanism must meet.
        rtol: relative width of the final bracket [lo, hi]; hi is returned.
        initial_guess: centre of the first bracket (a previous solution, say).

    Raises:
        ConfigError: if the target is not positive, or even sigma = 1e4 misses it.
    """
    if not (math.isfinite(target_epsilon) and target_epsilon > 0):
        raise ConfigError(f"Expected target epsilon={target_epsilon} > 0.")
    lo, hi = initial_guess / 1.25, initial_guess * 1.25
    while epsilon_at(hi) > target_epsilon:
        lo, hi = hi, hi * 4
        if hi > _SIGMA_MAX:
            raise ConfigError(
                f"no noise multiplier <= {_SIGMA_MAX:g} reaches epsilon={target_epsilon:g}: "
                "give the mechanism more budget or fewer steps"
            )
    while epsilon_at(lo) <= target_epsilon:
        if lo <= _SIGMA_MIN:
            return lo
        lo, hi = lo / 4, lo
    return _shrink_bracket(epsilon_at, lo, hi, target_epsilon=target_epsilon, rtol=rtol)


def _shrink_bracket(epsilon_at: Callable[[float], float], lo: float, hi: float, *,
                    target_epsilon: float, rtol: float) -> float:
    """Shrink ``[lo, hi]`` with ``epsilon(lo) > target >= epsilon(hi)`` to a relative
    width of ``rtol``; returns the feasible ``hi``.

    Illinois steps (a bracketed secant) on log(epsilon) against log(sigma), nearly a
    straight line for Gaussian mechanisms, so a handful of epsilon evaluations do
    what bisection needs ten or more for (each a slow RDP series); bisection where a
    price is infinite. The invariant holds at every step, so the result never misses
    the target, whatever the steps.
    """
    def gap(sigma: float, epsilon: float) -> float:
        return math.log(epsilon / target_epsilon) if 0 < epsilon < math.inf else (
            math.inf if epsilon == math.inf else -math.inf)

    f_lo, f_hi = gap(lo, epsilon_at(lo)), gap(hi, epsilon_at(hi))
    side = 0
    while hi / lo > 1 + rtol:  # invariant: epsilon(lo) > target >= epsilon(hi)
        u_lo, u_hi = math.log(lo), math.log(hi)
        if math.isfinite(f_lo) and math.isfinite(f_hi) and f_lo != f_hi:
            mid = math.exp(u_lo - f_lo * (u_hi - u_lo) / (f_hi - f_lo))
        else:
            mid = math.sqrt(lo * hi)
        # Strictly inside, by at least a quarter of the tolerance: the bracket shrinks.
        mid = min(max(mid, lo * (1 + rtol / 4)), hi / (1 + rtol / 4))
        epsilon = epsilon_at(mid)
        if epsilon <= target_epsilon:
            hi, f_hi = mid, gap(mid, epsilon)
            f_lo = f_lo / 2 if side == -1 else f_lo
            side = -1
        else:
            lo, f_lo = mid, gap(mid, epsilon)
            f_hi = f_hi / 2 if side == 1 else f_hi
            side = 1
    return hi


@dataclass(frozen=True, kw_only=True)
class MechanismSpec:
    """A mechanism whose noise multiplier is still to be calibrated.

    Attributes:
        name, sample_rate, num_steps, sensitivity, every: as in :class:`Mechanism`.
        share: relative weight of this mechanism in the budget split (> 0).
    """

    name: str
    sample_rate: float | None
    num_steps: int
    sensitivity: float
    share: float
    every: int = 1

    def __post_init__(self) -> None:
        if not (math.isfinite(self.share) and self.share > 0):
            raise ConfigError(f"Expected budget share of {self.name}={self.share} > 0.")
        if self.num_steps < 1:
            raise ConfigError(
                f"{self.name} would run {self.num_steps} steps; give it at least one step "
                "(more epochs or a larger sample rate)"
            )

    @classmethod
    def for_epochs(cls, name: str, *, batch_size: int, epochs: float, num_records: int,
                   sensitivity: float, share: float) -> MechanismSpec:
        """A DP-SGD mechanism trained for ``epochs`` expected passes over
        ``num_records`` records: Poisson rate q = B / n, ``ceil(epochs / q)`` releases."""
        q = batch_sample_rate(batch_size, num_records)
        return cls(name=name, sample_rate=q, num_steps=math.ceil(epochs / q),
                   sensitivity=sensitivity, share=share)


def _calibrate_one(
    spec: MechanismSpec, epsilon: float, delta: float, rtol: float, guess: float
) -> Mechanism:
    sigma = calibrate_noise_multiplier(
        lambda s: subsampled_gaussian_epsilon(
            noise_multiplier=s,
            sample_rate=spec.sample_rate,
            num_steps=spec.num_steps,
            delta=delta,
        ),
        target_epsilon=epsilon,
        rtol=rtol,
        initial_guess=guess,
    )
    return Mechanism(
        name=spec.name,
        noise_multiplier=sigma,
        sample_rate=spec.sample_rate,
        num_steps=spec.num_steps,
        sensitivity=spec.sensitivity,
        every=spec.every,
    )


PlanPrice = Callable[[PrivacyPlan, Pricing], float]

#: The RDP search's precision when a PLD refinement follows (it sets the final one).
_RDP_RTOL_BEFORE_PLD = 0.03


def _finite(value: float) -> float:
    """NaN as inf: a price that is not a number is infeasible."""
    return math.inf if math.isnan(value) else value


def _largest_feasible_scale(
    plan_at: Callable[[float], tuple[PrivacyPlan, float]],
    *,
    lo: float,
    best: PrivacyPlan,
    eps_lo: float,
    hi: float,
    eps_hi: float,
    target_epsilon: float,
    rtol: float,
) -> tuple[PrivacyPlan, float, float]:
    """Illinois (bracketed secant) on log(scale) between a feasible ``lo`` and an
    infeasible ``hi``; returns the best feasible plan, its scale and its price."""
    f_lo, f_hi = eps_lo - target_epsilon, eps_hi - target_epsilon
    side = 0
    for _ in range(40):
        if f_hi <= 0 or -f_lo <= rtol * target_epsilon or hi / lo <= 1 + rtol:
            break
        u_lo, u_hi = math.log(lo), math.log(hi)
        if math.isfinite(f_hi):
            mid = math.exp(u_lo - f_lo * (u_hi - u_lo) / (f_hi - f_lo))
        else:  # an unbounded price at the upper end: bisect
            mid = math.sqrt(lo * hi)
        mid = min(max(mid, lo * (1 + rtol / 4)), hi / (1 + rtol / 4))
        candidate, eps_mid = plan_at(mid)
        if eps_mid <= target_epsilon:
            lo, f_lo, best = mid, eps_mid - target_epsilon, candidate
            f_hi = f_hi / 2 if side == -1 else f_hi
            side = -1
        else:
            hi, f_hi = mid, eps_mid - target_epsilon
            f_lo = f_lo / 2 if side == 1 else f_lo
            side = 1
    return best, lo, f_lo + target_epsilon


def calibrate_plan(
    specs: Sequence[MechanismSpec],
    *,
    target_epsilon: float,
    delta: float,
    rtol: float = 2e-3,
    price: PlanPrice | None = None,
) -> PrivacyPlan:
    """Calibrate every mechanism so that the composed plan is (target_epsilon, delta)-DP.

    Two searches over the budget scale, then one check:

    1. RDP only (:data:`~raydp_synth.privacy.pricing.SEARCH_RDP`): cheap, and its
       plan is feasible under every pricing (the stated epsilon is at most RDP's
       on the full grid, which is at most RDP's on the calibration orders).
    2. Where PLD is tighter (:data:`~raydp_synth.privacy.pricing.SEARCH_PLD`, a
       coarse PLD), a short search for one common factor that divides every noise
       multiplier of the RDP plan uses the slack (no per-mechanism recalibration);
       skipped when PLD cannot help (e.g. random stopping, a dominance ratio).
    3. The result is checked on :data:`~raydp_synth.privacy.pricing.STATED`, the
       pricing of every statement; a refined plan that misses it there falls
       back to the RDP plan. So the calibrated epsilon never exceeds the target.

    Args:
        specs: the mechanisms and their relative budget weights.
        target_epsilon, delta: the target.
        rtol: relative precision of the budget use.
        price: what must stay <= ``target_epsilon``, as a function of a candidate plan and
            of a :class:`~raydp_synth.privacy.pricing.Pricing`. Default: the plan's own
            epsilon. A tuner passes e.g. the epsilon of the study's granted plans
            composed with copies of this one. It must be non-decreasing in the
            budget scale (true of every epsilon).

    Returns:
        A plan with ``price(plan, STATED) <= target_epsilon``, using at least ``1 - rtol`` of
        the budget when the split allows it.

    Raises:
        ConfigError: invalid budget, or a mechanism that cannot meet its share.
    """
    if not (math.isfinite(target_epsilon) and target_epsilon > 0):
        raise ConfigError(f"the privacy budget's epsilon {target_epsilon} must be a finite number > 0")
    if not specs:
        raise ConfigError("a privacy plan needs at least one mechanism")
    if price is None:
        def price(plan: PrivacyPlan, pricing: Pricing) -> float:
            return pricing_module.epsilon(plan.event(), delta=delta, pricing=pricing)
    total_share = sum(s.share for s in specs)
    guesses = [1.0] * len(specs)

    def plan_at(scale: float, pricing: Pricing = SEARCH_RDP) -> tuple[PrivacyPlan, float]:
        mechanisms = tuple(
            _calibrate_one(s, scale * s.share / total_share * target_epsilon, delta, rtol / 4, g)
            for s, g in zip(specs, guesses, strict=True)
        )
        guesses[:] = [m.noise_multiplier for m in mechanisms]
        plan = PrivacyPlan(mechanisms=mechanisms, delta=delta, target_epsilon=target_epsilon)
        value = price(plan, pricing)
        return plan, value if not math.isnan(value) else math.inf  # NaN: infeasible

    # Bracket the largest feasible scale: f(lo) <= 0 < f(hi). With the default
    # price, scale 1 is feasible (composition never exceeds the sum of the shares)
    # and scale len(specs) is the first upper end tried.
    lo, (best, eps_lo) = 1.0, plan_at(1.0)
    # Where PLD is tighter, the RDP search only needs to land near the target: the
    # PLD refinement below sets the final precision (fewer RDP recalibrations).
    pld_helps = _finite(price(best, SEARCH_PLD)) < eps_lo * (1 - rtol)
    rtol_rdp = max(rtol, _RDP_RTOL_BEFORE_PLD) if pld_helps else rtol
    try:
        rdp_best = _scale_search(plan_at, SEARCH_RDP, lo=lo, best=best, eps_lo=eps_lo,
                                 target_epsilon=target_epsilon, rtol=rtol_rdp,
                                 first_hi=float(max(2, len(specs))))
    except ConfigError:
        if not pld_helps:
            raise
        # No plan fits under RDP: the price composes plans granted earlier whose noise
        # was refined under PLD (compose's last trials), and RDP prices them over the
        # budget already. Search under the coarse PLD itself; the STATED check below
        # still guards the result.
        searched = _scale_search(plan_at, SEARCH_PLD, lo=lo, best=best, eps_lo=eps_lo,
                                 target_epsilon=target_epsilon, rtol=rtol,
                                 first_hi=float(max(2, len(specs))),
                                 first=plan_at(lo, SEARCH_PLD)[1])
        stated = price(searched, STATED)
        if not stated <= target_epsilon:
            raise ConfigError(f"cannot fit the plan into epsilon={target_epsilon:g}") from None
        return searched
    best = rdp_best

    # PLD refinement, only where PLD leaves slack worth a search: one common factor
    # c >= 1 divides every noise multiplier of the RDP plan (the split's relative
    # noise stays), priced by PLD alone (RDP's bound is above the target there).
    eps_pld = _finite(price(rdp_best, SEARCH_PLD))
    if pld_helps and eps_pld < target_epsilon * (1 - rtol):
        def less_noise(c: float) -> tuple[PrivacyPlan, float]:
            plan = replace(rdp_best, mechanisms=tuple(
                replace(m, noise_multiplier=m.noise_multiplier / c) for m in rdp_best.mechanisms))
            return plan, _finite(price(plan, SEARCH_PLD))

        lo, eps_lo, hi = 1.0, eps_pld, target_epsilon / eps_pld * 1.02
        plan_hi, eps_hi = less_noise(hi)
        while eps_hi <= target_epsilon and hi < 1e6:
            lo, best, eps_lo = hi, plan_hi, eps_hi
            hi = hi * 1.25
            plan_hi, eps_hi = less_noise(hi)
        best, _, _ = _largest_feasible_scale(
            less_noise, lo=lo, best=best, eps_lo=eps_lo, hi=hi, eps_hi=eps_hi,
            target_epsilon=target_epsilon, rtol=rtol)
    stated = price(best, STATED)  # the stated value: never trust a search
    if best is not rdp_best and not stated <= target_epsilon:
        best = rdp_best  # the coarse search was optimistic here: keep the RDP plan
        stated = price(best, STATED)
    if not stated <= target_epsilon:
        raise PrivacyInvariantError(
            f"calibration overshot epsilon={target_epsilon:g}; this is a bug")
    return best


def _scale_search(plan_at: Callable[..., tuple[PrivacyPlan, float]], pricing: Pricing, *,
                  lo: float, best: PrivacyPlan, eps_lo: float, target_epsilon: float,
                  rtol: float, first_hi: float, first: float | None = None) -> PrivacyPlan:
    """The plan at the largest budget scale whose ``pricing`` meets the target:
    bracket it from ``lo`` (whose plan is ``best``, priced ``eps_lo``), then bisect.

    ``first_hi``: the first upper end tried when ``lo`` fits; ``first``: ``eps_lo``
    under ``pricing`` when ``eps_lo`` was priced otherwise.

    Raises:
        ConfigError: no scale down to 1e-6 (or no mechanism's noise) fits the target.
    """
    def at(scale: float) -> tuple[PrivacyPlan, float]:
        return plan_at(scale, pricing)

    if first is not None:
        eps_lo = first
    if eps_lo > target_epsilon:
        hi, eps_hi = lo, eps_lo
        while eps_lo > target_epsilon:
            if lo < 1e-6:
                raise ConfigError(f"cannot fit the plan into epsilon={target_epsilon:g}")
            hi, eps_hi = lo, eps_lo
            lo = lo / 4
            best, eps_lo = at(lo)
    else:
        hi = first_hi
        plan_hi, eps_hi = at(hi)
        while eps_hi <= target_epsilon and hi < 1e6:
            lo, best, eps_lo = hi, plan_hi, eps_hi
            hi = hi * 4
            plan_hi, eps_hi = at(hi)
    found, _, _ = _largest_feasible_scale(
        at, lo=lo, best=best, eps_lo=eps_lo, hi=hi, eps_hi=eps_hi,
        target_epsilon=target_epsilon, rtol=rtol)
    return found
