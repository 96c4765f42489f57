"""What tuning on a Poisson subset costs (Koskela & Kulkarni, 2023), against random
stopping on the full data (Papernot & Steinke, 2022), for DPAF's default plan on digits.

Two tables, pure accounting (``raydp_synth.privacy.subsampled_tuning``), about a minute:

1. The same trial mechanism E_ref (DPAF's default plan with its selection score, its
   noise scaled so that random stopping on the full data at E[K] = 8 costs epsilon
   10; a trial on the subset keeps its sampling rates by the extrapolation rules, so
   its event w.r.t. X1 is the same): the tuning phase's epsilon for several q and
   E[K]. q = 1 is plain random stopping.
2. A total budget split (variant 1: tuning phase, then one final run on all the data
   with the extrapolated config) at q = 0.1, E[K] = 8, planned by the functions a
   ``--strategy subsampled`` study calls (``tune.planning.subsampled_reference_plan``,
   then ``plan_for_subsampled_final``): the final run's noise against a single default
   run's (``Method.plan``) and against every trial's under plain random stopping
   (``tune.planning.reference_plan``).

Usage: python bench/subsampled_tuning_pricing.py [--delta 1e-5]
       [--out bench/results/subsampled_tuning_pricing.json]
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path

import dp_accounting as dpa

from raydp_synth.data import data_info, load_dataset
from raydp_synth.methods import get_method
from raydp_synth.privacy.accounting import (
    epsilon_of,
    random_stopping_epsilon,
    rdp_curve,
)
from raydp_synth.privacy.calibration import calibrate_noise_multiplier
from raydp_synth.privacy.events import subsampled_gaussian_event
from raydp_synth.privacy.plan import PrivacyPlan
from raydp_synth.privacy.selection_score import DEFAULT_SCORE_SHARE
from raydp_synth.privacy.subsampled_tuning import (
    amplified_tuning_rdp,
    epsilon_from_rdp,
    variant1_rdp,
)
from raydp_synth.tune.extrapolation import subset_config, subset_data
from raydp_synth.tune.planning import (
    plan_for_subsampled_final,
    reference_plan,
    subsampled_reference_plan,
)

GEOMETRIC = 1.0
FRACTIONS = (0.05, 0.1, 0.2, 0.5, 1.0)
MEANS = (4.0, 8.0, 16.0)


def _family(plan: PrivacyPlan) -> Callable[[float], dpa.DpEvent]:
    """The plan's event with every noise multiplier scaled by s."""

    def event(s: float) -> dpa.DpEvent:
        return dpa.ComposedDpEvent([
            subsampled_gaussian_event(noise_multiplier=m.noise_multiplier * s,
                                      sample_rate=m.sample_rate, num_steps=m.num_steps)
            for m in plan.mechanisms
        ])

    return event


def _scale(plan: PrivacyPlan, unit: PrivacyPlan) -> float:
    """``plan``'s noise as a multiple of ``unit``'s (the same schedule calibrated at
    epsilon 1): the geometric mean over mechanisms of their noise multipliers' ratio
    (the calibration sets each mechanism's noise from its share of the budget, so the
    ratios differ a little between mechanisms)."""
    ratios = [m.noise_multiplier / u.noise_multiplier
              for m, u in zip(plan.mechanisms, unit.mechanisms, strict=True)]
    return math.prod(ratios) ** (1 / len(ratios))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--out", type=Path,
                        default=Path("bench/results/subsampled_tuning_pricing.json"))
    args = parser.parse_args()
    delta = args.delta
    data = data_info(load_dataset("digits").train, None)
    method = get_method("dpaf")
    config = method.make_config({}, data)
    q = 0.1
    # The default config scaled to the subset, on its public size m = round(q n), as
    # the study plans E_ref (tune/study.py, _subsampled_plans).
    sub_data = subset_data(data, q)
    sub_config = subset_config(method, {}, data, q)
    # Unit-scale plans: calibrated at epsilon 1 (families: their noise scaled by s).
    unit_trial_full = method.plan(config, target_epsilon=1.0, delta=delta, data=data,
                                  score_share=DEFAULT_SCORE_SHARE)
    unit_trial_sub = method.plan(sub_config, target_epsilon=1.0, delta=delta, data=sub_data,
                                 score_share=DEFAULT_SCORE_SHARE)
    unit_final = method.plan(config, target_epsilon=1.0, delta=delta, data=data)
    trial_full = _family(unit_trial_full)
    trial_sub = _family(unit_trial_sub)

    # 1. same E_ref
    s_ref = calibrate_noise_multiplier(
        lambda s: random_stopping_epsilon(trial_full(s), mean=8.0, shape=GEOMETRIC, delta=delta),
        target_epsilon=10.0)
    reference = trial_sub(s_ref)
    same_reference = {
        "trial_epsilon_full": epsilon_of(trial_full(s_ref), delta=delta),
        "trial_epsilon_subset": epsilon_of(reference, delta=delta),
        "rows": [],
    }
    print(f"1. tuning-phase epsilon, same trial mechanism (a trial alone: "
          f"{same_reference['trial_epsilon_subset']:.3f})")
    print(f"{'E[K]':>5}" + "".join(f"{'q=' + str(f):>10}" for f in FRACTIONS))
    for mean in MEANS:
        row = {"mean": mean, "epsilon": {
            str(f): epsilon_from_rdp(amplified_tuning_rdp(
                reference, mean=mean, shape=GEOMETRIC, tune_fraction=f), delta)
            for f in FRACTIONS}}
        same_reference["rows"].append(row)
        print(f"{mean:>5.0f}" + "".join(f"{row['epsilon'][str(f)]:>10.3f}" for f in FRACTIONS))

    # 2. a total budget split
    splits = []
    print("\n2. total budget split, q=0.1, E[K]=8 (sigma: DPAF's noise, scale of the "
          "epsilon-1 plan)")
    for total in (1.0, 10.0):
        single = _scale(method.plan(config, target_epsilon=total, delta=delta, data=data),
                        unit_final)
        plain = _scale(reference_plan(method, config, data, target_epsilon=total, delta=delta,
                                      mean_trials=8.0, shape=GEOMETRIC,
                                      score_share=DEFAULT_SCORE_SHARE), unit_trial_full)
        for share in (0.1, 0.2):
            e_ref = subsampled_reference_plan(
                method, sub_config, sub_data, target_epsilon=share * total, delta=delta,
                mean_trials=8.0, shape=GEOMETRIC, tune_fraction=q,
                score_share=DEFAULT_SCORE_SHARE)
            curve = amplified_tuning_rdp(e_ref.event(), mean=8.0, shape=GEOMETRIC,
                                         tune_fraction=q)
            final = plan_for_subsampled_final(method, config, data, tuning_rdp=tuple(curve),
                                              target_epsilon=total, delta=delta, score_share=0.0)
            split = {
                "trial_noise_multiplier": _scale(e_ref, unit_trial_sub),
                "final_noise_multiplier": _scale(final, unit_final),
                "tuning_epsilon": epsilon_from_rdp(curve, delta),
                "final_epsilon": epsilon_from_rdp(rdp_curve(final.event()), delta),
                "total_epsilon": epsilon_from_rdp(variant1_rdp(curve, final.event()), delta),
            }
            row = {"total_epsilon": total, "tuning_share": share,
                   "single_run_scale": single, "random_stopping_trial_scale": plain, **split}
            splits.append(row)
            print(f"eps {total:>4g} share {share:.1f}: tuning eps {split['tuning_epsilon']:.3f}, "
                  f"final run eps {split['final_epsilon']:.3f} "
                  f"(total {split['total_epsilon']:.3f}); "
                  f"noise scale: final {split['final_noise_multiplier']:.3f}, single run "
                  f"{single:.3f}, plain random-stopping trial {plain:.3f}, subset trial "
                  f"{split['trial_noise_multiplier']:.3f}")
    result = {"benchmark": "subsampled_tuning_pricing", "method": "dpaf", "dataset": "digits",
              "delta": delta, "tune_fraction": q, "distribution": "geometric",
              "same_reference": same_reference, "splits": splits}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
