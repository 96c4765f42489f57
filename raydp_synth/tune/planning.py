"""How a study sizes each trial's plan so that the whole search fits one budget.

Two pricing modes (docs/budget-pricing.md, section 6):

* ``compose``: the study's total is the composition of every granted plan, priced
  as every statement is (:mod:`raydp_synth.privacy.pricing`: the smaller of RDP's and
  PLD's epsilon; adaptive composition: a later config is post-processing of earlier
  DP outputs). The trial prices ``granted + copies x plan`` by the same left fold of
  the same PLDs as the accountant's ledger, so the two agree.
  A trial is calibrated so that the plans granted so far, composed with
  ``remaining`` copies of its own plan, meet the budget: the first trial gets
  about 1/N of it, and budget that earlier trials left unused flows to later ones.
  The accountant re-prices the actual composition and refuses what would overspend.
* ``random-stopping`` (Papernot & Steinke 2022): the study releases the best of K
  i.i.d. runs of one mechanism Q, K random with mean ``trials``. The reference plan
  E_ref (the default configuration's plan) is calibrated so that
  ``RepeatAndSelectDpEvent(E_ref, mean, shape)`` meets the budget; every trial's plan
  is calibrated to be dominated by E_ref at every RDP order of the accountant's grid,
  so every trial is "at most Q" and the theorem applies. RDP alone prices this mode:
  the theorem is an RDP theorem and PLD cannot price ``RepeatAndSelectDpEvent``.
* ``subsampled`` (Koskela & Kulkarni 2023, variant 1): as random stopping for the
  tuning trials, with E_ref (a plan sized for the tuning subset) calibrated so that
  the *amplified* tuning phase costs a share of the budget
  (:func:`subsampled_reference_plan`); the final run is calibrated so that the tuning
  curve composed with its own meets the budget (:func:`plan_for_subsampled_final`).
  RDP alone, on :data:`~raydp_synth.privacy.accounting.ORDERS` (the orders the
  accountant's check uses), whatever the calibration's pricing.

Everything here is computed from public quantities (configs, dataset size) and
from the ledger's plans: no sensitive data.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import dp_accounting as dpa
import numpy as np
from dp_accounting import dp_event

from raydp_synth.data import DataInfo
from raydp_synth.errors import PrivacyInvariantError
from raydp_synth.methods.base import Method
from raydp_synth.privacy import pricing as _pricing
from raydp_synth.privacy.accounting import dominance_ratio, rdp_curve
from raydp_synth.privacy.adaptive_tuning import adaptive_random_stopping_epsilon
from raydp_synth.privacy.plan import PrivacyPlan
from raydp_synth.privacy.pricing import Pricing
from raydp_synth.privacy.subsampled_tuning import (
    amplified_tuning_rdp,
    epsilon_from_rdp,
    variant1_rdp,
)

__all__ = ["plan_dominated_by", "plan_for_compose", "plan_for_subsampled_final",
           "reference_plan", "subsampled_reference_plan"]


def _plan_priced(
    method: Method,
    config: Any,
    data: DataInfo,
    *,
    target_epsilon: float,
    delta: float,
    score_share: float,
    event_of: Callable[[dpa.DpEvent], dpa.DpEvent],
) -> PrivacyPlan:
    """The plan whose ``event_of(plan.event())`` meets the budget, stated with its
    own epsilon as its target."""

    def price(plan: PrivacyPlan, pricing: Pricing) -> float:
        return _pricing.epsilon(event_of(plan.event()), delta=delta, pricing=pricing)

    return _plan_meeting(method, config, data, target_epsilon=target_epsilon, delta=delta,
                         score_share=score_share, price=price)


def _plan_meeting(
    method: Method,
    config: Any,
    data: DataInfo,
    *,
    target_epsilon: float,
    delta: float,
    score_share: float,
    price: Callable[[PrivacyPlan, Pricing], float],
) -> PrivacyPlan:
    """The method's plan of ``config`` calibrated so that ``price`` meets
    ``target_epsilon``, stated with its own epsilon as its target."""
    plan = method.plan(config, target_epsilon=target_epsilon, delta=delta, data=data,
                       score_share=score_share, price=price)
    return replace(plan, target_epsilon=plan.epsilon())


def plan_for_compose(
    method: Method,
    config: Any,
    data: DataInfo,
    *,
    target_epsilon: float,
    delta: float,
    granted: Sequence[dpa.DpEvent],
    remaining_trials: int,
    score_share: float,
) -> PrivacyPlan:
    """A trial's plan such that ``granted + remaining_trials x plan`` meets the budget."""
    copies = max(1, remaining_trials)
    prefix = list(granted)
    return _plan_priced(
        method, config, data, target_epsilon=target_epsilon, delta=delta,
        score_share=score_share,
        event_of=lambda e: dpa.ComposedDpEvent([*prefix, dpa.SelfComposedDpEvent(e, copies)]),
    )


def reference_plan(
    method: Method,
    config: Any,
    data: DataInfo,
    *,
    target_epsilon: float,
    delta: float,
    mean_trials: float,
    shape: float,
    score_share: float,
    density_ratio: float = 1.0,
) -> PrivacyPlan:
    """E_ref: the plan of ``config`` whose random-stopping total meets the budget;
    with a density-ratio bound c > 1 (dp-hypo), DP-HyPO's total
    (:func:`~raydp_synth.privacy.adaptive_tuning.adaptive_random_stopping_epsilon`)."""
    if density_ratio != 1:
        def price(plan: PrivacyPlan, pricing: Pricing) -> float:
            # RDP only (a theorem on RDP curves), on the pricing's orders.
            return adaptive_random_stopping_epsilon(
                plan.event(), mean=mean_trials, shape=shape, delta=delta,
                density_ratio=density_ratio, orders=pricing.orders)

        return _plan_meeting(method, config, data, target_epsilon=target_epsilon, delta=delta,
                             score_share=score_share, price=price)
    return _plan_priced(
        method, config, data, target_epsilon=target_epsilon, delta=delta,
        score_share=score_share,
        event_of=lambda e: dp_event.RepeatAndSelectDpEvent(e, mean_trials, shape),
    )


def plan_dominated_by(
    method: Method,
    config: Any,
    data: DataInfo,
    *,
    reference_event: dpa.DpEvent,
    delta: float,
    score_share: float,
) -> PrivacyPlan:
    """A trial's plan, as little noised as possible while dominated by E_ref at every
    order of the accountant's grid: calibrated to a :func:`dominance_ratio` of at most
    ``1 - 1e-6``, below the accountant's check (the same ratio, at most
    ``1 + DOMINANCE_RTOL``: :func:`~raydp_synth.privacy.accounting.dominates`)."""
    reference = rdp_curve(reference_event)
    margin = 1 - 1e-6  # headroom below the check; plans are calibrated to it

    def price(plan: PrivacyPlan, pricing: Pricing) -> float:  # RDP only, whatever pricing
        return dominance_ratio(plan.event(), reference) / margin

    plan = method.plan(config, target_epsilon=1.0, delta=delta, data=data, score_share=score_share,
                       price=price)
    eps = plan.epsilon()
    if not math.isfinite(eps):  # a trial must state a finite epsilon to be granted
        raise PrivacyInvariantError(f"the dominated plan has no finite epsilon ({eps})")
    return replace(plan, target_epsilon=eps)


def subsampled_reference_plan(
    method: Method,
    config: Any,
    data: DataInfo,
    *,
    target_epsilon: float,
    delta: float,
    mean_trials: float,
    shape: float,
    tune_fraction: float,
    score_share: float,
) -> PrivacyPlan:
    """E_ref of subsampled tuning: the plan of ``config`` on ``data`` (the subset's
    public facts) whose random stopping, amplified by the Poisson(``tune_fraction``)
    draw of the subset, costs ``target_epsilon`` (the tuning share of the budget)."""
    def price(plan: PrivacyPlan, pricing: Pricing) -> float:  # RDP on ORDERS, whatever pricing
        return epsilon_from_rdp(amplified_tuning_rdp(
            plan.event(), mean=mean_trials, shape=shape, tune_fraction=tune_fraction), delta)

    return _plan_meeting(method, config, data, target_epsilon=target_epsilon, delta=delta,
                         score_share=score_share, price=price)


def plan_for_subsampled_final(
    method: Method,
    config: Any,
    data: DataInfo,
    *,
    tuning_rdp: Sequence[float],
    target_epsilon: float,
    delta: float,
    score_share: float,
) -> PrivacyPlan:
    """The final run's plan: the tuning phase's curve composed with it (variant 1)
    meets ``target_epsilon``, the study's total (the accountant's own check)."""
    tuning = np.asarray(tuning_rdp, dtype=np.float64)

    def price(plan: PrivacyPlan, pricing: Pricing) -> float:  # RDP on ORDERS, whatever pricing
        return epsilon_from_rdp(variant1_rdp(tuning, plan.event()), delta)

    return _plan_meeting(method, config, data, target_epsilon=target_epsilon, delta=delta,
                         score_share=score_share, price=price)
