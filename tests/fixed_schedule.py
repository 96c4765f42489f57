"""A method whose schedule is given, so that tests price plans through the planners a
``--strategy subsampled`` study runs (:mod:`raydp_synth.tune.planning`, called by
``raydp_synth.tune.strategies.subsampled.subsampled_plans``) on exactly the mechanisms they name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from raydp_synth.data import DataInfo
from raydp_synth.methods.base import Method
from raydp_synth.privacy.calibration import MechanismSpec
from raydp_synth.privacy.plan import PrivacyPlan
from raydp_synth.privacy.subsampled_tuning import amplified_tuning_rdp, epsilon_from_rdp
from raydp_synth.tune.planning import plan_for_subsampled_final, subsampled_reference_plan

#: The public facts the planners receive; a fixed schedule does not read them.
DATA = DataInfo(num_records=1442, image_size=16, channels=1, num_classes=10)


def gaussian_spec(name: str, *, sample_rate: float, num_steps: int,
                  share: float = 1.0) -> MechanismSpec:
    """A Poisson-subsampled Gaussian of ``num_steps`` releases, noise to calibrate."""
    return MechanismSpec(name=name, sample_rate=sample_rate, num_steps=num_steps,
                         sensitivity=1.0, share=share)


class FixedSchedule(Method):
    """Plans (:meth:`Method.plan`, the calibration every method runs) of the given
    mechanisms, whatever the config and data; it never trains."""

    name: ClassVar[str] = "fixed-schedule"
    metric_allowlist: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, *specs: MechanismSpec) -> None:
        self.specs = specs

    def schedule(self, config: Any, data: DataInfo) -> list[MechanismSpec]:
        return list(self.specs)

    def train(self, ctx: Any) -> None:
        raise NotImplementedError("a pricing stub does not train")

    def build_generator(self, config: Any, data: DataInfo) -> torch.nn.Module:
        raise NotImplementedError("a pricing stub has no generator")


@dataclass(frozen=True)
class SubsampledPlans:
    """What ``subsampled_plans`` computes before Ray starts: E_ref, its amplified
    tuning curve, the final run's plan, and their epsilons (RDP on ORDERS)."""

    reference: PrivacyPlan
    final: PrivacyPlan
    tuning_rdp: tuple[float, ...]
    tuning_epsilon: float
    final_epsilon: float
    total_epsilon: float


def subsampled_plans(*, epsilon: float, delta: float, tune_fraction: float, mean: float,
                     shape: float, tuning_share: float, trial: Method,
                     final: Method) -> SubsampledPlans:
    """E_ref of ``trial``'s schedule calibrated so that the amplified tuning phase costs
    ``tuning_share * epsilon``, then ``final``'s plan calibrated so that the tuning
    curve composed with it (variant 1) meets ``epsilon``: the study's two calls, in
    its order, with its arguments (no selection score)."""
    from raydp_synth.privacy.accounting import rdp_curve
    from raydp_synth.privacy.subsampled_tuning import variant1_rdp

    reference = subsampled_reference_plan(
        trial, None, DATA, target_epsilon=tuning_share * epsilon, delta=delta,
        mean_trials=mean, shape=shape, tune_fraction=tune_fraction, score_share=0.0)
    curve = amplified_tuning_rdp(reference.event(), mean=mean, shape=shape,
                                 tune_fraction=tune_fraction)
    final_plan = plan_for_subsampled_final(final, None, DATA, tuning_rdp=tuple(curve),
                                           target_epsilon=epsilon, delta=delta, score_share=0.0)
    return SubsampledPlans(
        reference=reference, final=final_plan, tuning_rdp=tuple(float(v) for v in curve),
        tuning_epsilon=epsilon_from_rdp(curve, delta),
        final_epsilon=epsilon_from_rdp(rdp_curve(final_plan.event()), delta),
        total_epsilon=epsilon_from_rdp(variant1_rdp(curve, final_plan.event()), delta))
