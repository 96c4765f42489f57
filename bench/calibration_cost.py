"""What noise calibration costs: seconds to plan a single run and a compose trial.

Every trial plans before it trains (calibrates its noise against the study's grants),
so this is a fixed cost of every trial, paid on the trial's CPU.

    python bench/calibration_cost.py [--out bench/results/calibration_cost.json]

Times (one process, wall seconds, best of ``--repeats``; caches cleared before each
timing so every number is a cold plan):
- each method's default plan on a digits-sized split at epsilon 1 and 10;
- a compose study's first and third trial (N = 8, total epsilon 10) of DPAF's default
  config and of the tests' tiny DPAF config (tests/tune/tiny_dpaf.yaml's values).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

from raydp_synth.methods import get_method, method_names
from raydp_synth.methods.base import DataInfo
from raydp_synth.privacy import accounting, pricing
from raydp_synth.privacy.selection_score import DEFAULT_SCORE_SHARE
from raydp_synth.tune.strategies.roles import trial_plan

DIGITS = DataInfo(num_records=1442, image_size=16, channels=1, num_classes=10, public_records=355)
TINY = {"epochs": 2, "classifier_epochs": 0.5, "batch_size": 512, "base_width": 4, "mu": 1}


def _clear_caches() -> None:
    for cached in (accounting.subsampled_gaussian_epsilon, getattr(accounting, "_step_rdp", None),
                   pricing._step_pld, pricing._leaf_pld, pricing._fold):
        if cached is not None:
            cached.cache_clear()


def _best_of(repeats: int, work) -> float:
    best = float("inf")
    for _ in range(repeats):
        _clear_caches()
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return round(best, 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("bench/results/calibration_cost.json"))
    args = parser.parse_args()
    results: dict[str, float] = {}
    for name in method_names():
        method = get_method(name)
        config = method.make_config({}, DIGITS)
        for epsilon in (1.0, 10.0):
            results[f"{name} default plan, epsilon {epsilon:g}"] = _best_of(
                args.repeats, lambda m=method, c=config, e=epsilon: m.plan(
                    c, target_epsilon=e, delta=1e-5, data=DIGITS, score_share=DEFAULT_SCORE_SHARE))
            print(f"{name} eps {epsilon:g}: {results[f'{name} default plan, epsilon {epsilon:g}']} s",
                  flush=True)
    dpaf = get_method("dpaf")
    for label, values in (("default", {}), ("tiny", TINY)):
        config = dpaf.make_config(values, DIGITS)

        def plan(granted: list, config=config) -> object:
            return trial_plan(dpaf, config, DIGITS, role="compose", epsilon=10.0, delta=1e-5,
                              trials=8, score_share=DEFAULT_SCORE_SHARE, granted=granted)

        first = plan([])
        results[f"dpaf {label} config, compose N=8, first trial"] = _best_of(
            args.repeats, lambda: plan([]))
        results[f"dpaf {label} config, compose N=8, third trial"] = _best_of(
            args.repeats, lambda f=first: plan([f.event()] * 2))
        print(label, results, flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine": platform.processor() or platform.machine(),
                                    "seconds": results}, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
