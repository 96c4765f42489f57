"""Noise calibration by bisection against dp-accounting (never overshooting).

Two entry points:

* :func:`calibrate_noise_multiplier`: the smallest noise multiplier (up to a
  relative tolerance) whose mechanism meets a target epsilon. Bisection keeps a
  feasible upper end and returns it, so the result never exceeds the target.
* :func:`calibrate_plan`: a plan of several mechanisms with a budget split. Each
  mechanism j is calibrated to its share ``t * share_j * epsilon`` for a scale t,
  and t is the largest scale for which the *composed* plan still meets
  ``epsilon``. RDP composition is tighter than adding epsilons, so t >= 1: the
  split states relative weights, and the whole budget is used.

Calibration prices events on :data:`~raydp_synth.privacy.accounting.CALIBRATION_ORDERS`
(an upper bound of the default-grid epsilon); the returned plan is checked on the
default grid.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from raydp_synth.errors import ConfigError
from raydp_synth.privacy.accounting import (
    CALIBRATION_ORDERS,
    epsilon_of,
    subsampled_gaussian_epsilon,
)
from raydp_synth.privacy.plan import Mechanism, PrivacyPlan

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
    while hi / lo > 1 + rtol:  # invariant: epsilon(lo) > target >= epsilon(hi)
        mid = math.sqrt(lo * hi)
        if epsilon_at(mid) <= target_epsilon:
            hi = mid
        else:
            lo = mid
    return hi


@dataclass(frozen=True, kw_only=True)
class MechanismSpec:
    """A mechanism whose noise multiplier is still to be calibrated.

    Attributes:
        name, sample_rate, num_steps, sensitivity: as in :class:`Mechanism`.
        share: relative weight of this mechanism in the budget split (> 0).
    """

    name: str
    sample_rate: float | None
    num_steps: int
    sensitivity: float
    share: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.share) and self.share > 0):
            raise ConfigError(f"Expected budget share of {self.name}={self.share} > 0.")
        if self.num_steps < 1:
            raise ConfigError(
                f"{self.name} would run {self.num_steps} steps; give it at least one step "
                "(more epochs or a larger sample rate)"
            )


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
    )


def calibrate_plan(
    specs: Sequence[MechanismSpec],
    *,
    epsilon: float,
    delta: float,
    rtol: float = 2e-3,
) -> PrivacyPlan:
    """Calibrate every mechanism so that the composed plan is (epsilon, delta)-DP.

    Returns:
        A plan with ``plan.epsilon() <= epsilon`` on dp-accounting's default grid,
        using at least ``1 - rtol`` of the budget when the split allows it.

    Raises:
        ConfigError: invalid budget, or a mechanism that cannot meet its share.
    """
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ConfigError(f"--epsilon {epsilon} must be a finite number > 0")
    if not specs:
        raise ConfigError("a privacy plan needs at least one mechanism")
    total_share = sum(s.share for s in specs)
    guesses = [1.0] * len(specs)

    def plan_at(scale: float) -> tuple[PrivacyPlan, float]:
        mechanisms = tuple(
            _calibrate_one(s, scale * s.share / total_share * epsilon, delta, rtol / 4, g)
            for s, g in zip(specs, guesses, strict=True)
        )
        guesses[:] = [m.noise_multiplier for m in mechanisms]
        plan = PrivacyPlan(mechanisms=mechanisms, delta=delta, target_epsilon=epsilon)
        return plan, epsilon_of(plan.event(), delta=delta, orders=CALIBRATION_ORDERS)

    # Illinois (bracketed secant) on log(scale): f(lo) <= 0 < f(hi).
    lo, hi = 1.0, float(len(specs))
    best, eps_lo = plan_at(lo)
    if eps_lo > epsilon:  # composition never exceeds the sum of the shares
        raise ConfigError(f"cannot fit the plan into epsilon={epsilon:g}")
    if len(specs) > 1:
        plan_hi, eps_hi = plan_at(hi)
        f_lo, f_hi = eps_lo - epsilon, eps_hi - epsilon
        side = 0
        for _ in range(40):
            if f_hi <= 0:  # the whole upper end is feasible (only at the first bracket)
                best = plan_hi
                break
            if -f_lo <= rtol * epsilon or hi / lo <= 1 + rtol:
                break
            u_lo, u_hi = math.log(lo), math.log(hi)
            mid = math.exp(u_lo - f_lo * (u_hi - u_lo) / (f_hi - f_lo))
            mid = min(max(mid, lo * (1 + rtol / 4)), hi / (1 + rtol / 4))
            candidate, eps_mid = plan_at(mid)
            if eps_mid <= epsilon:
                lo, f_lo, best = mid, eps_mid - epsilon, candidate
                f_hi = f_hi / 2 if side == -1 else f_hi
                side = -1
            else:
                hi, f_hi = mid, eps_mid - epsilon
                f_lo = f_lo / 2 if side == 1 else f_lo
                side = 1
    if best.epsilon() > epsilon:  # the stated (default-grid) epsilon: never trust
        raise ConfigError(f"calibration overshot epsilon={epsilon:g}; this is a bug")
    return best
