"""Where the fixed seconds of one Tune trial go: a 1-trial DPAF study on digits with a
tiny fixed config, its loop on Ray Train (1 and 2 workers) and in the trial's own
process (1 worker), in one local Ray session (started before the first study, so
no study pays for it).

Phases, from each trial's ``trials/ID/timing.json`` (raydp_synth/tune/trial.py) and
stamps taken here around Tune:

* ``tune_start``: ``Tuner.fit`` called to the trial function's first line (Tune's
  controller, the searcher, the trial actor's start);
* ``setup``: config and plan (calibration: a direct run does it too);
* ``grant``: the accountant's grant;
* ``data``: the trial's data load (a direct run does it too);
* ``workers_start``: ``TorchTrainer.fit`` called to the worker function's first line
  (Train controller, placement group, worker processes, gloo process group);
* ``loop_setup``: the worker's data load and context, up to the DP loop;
* ``worker_end``: the DP loop's end to the worker function's return;
* ``teardown``: to ``fit`` returning (Train's shutdown of its workers);
* ``score``: the private selection score (a direct run does it too);
* ``checkpoint``: the trial checkpoint and the final report;
* ``tune_end``: the final report to ``Tuner.fit`` returning.

``fixed_s`` sums the phases a direct run does not have (all but setup, data and
score); the DP loop itself is not timed here (bench/ray_scaling.py has the direct
run). ``share_of_default_trial`` is ``fixed_s`` against a default DPAF trial on this
machine: bench/results/ray_scaling.json's direct 1-worker run (30 epochs) plus
``fixed_s``.

``--study-trials N`` also runs one N-trial study (in-process loops, the same fixed
config in every trial) and splits its ``Tuner.fit`` wall time per trial: each
trial's non-direct phases plus the gap from the previous trial's end (Tune's
controller, the searcher, the trial actor's start or reuse) to its first line.
With Tune's actor reuse only the first trial pays for a process start.

Usage: python bench/trial_overhead.py [--repeats 2] [--study-trials 8]
       [--out bench/results/trial_overhead.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

FIXED = {"epochs": 2, "classifier_epochs": 0.5, "batch_size": 512, "base_width": 4}
DIRECT_PHASES = ("setup", "data", "score")
LOOPS = (("ray_train", 1), ("in_process", 1), ("ray_train", 2))


def _one_study(loop: str, workers: int) -> dict[str, Any]:
    row = _study(loop, workers, trials=1)
    (trial,) = row["per_trial"]
    return {"phases_s": trial["phases_s"], "study_wall_s": row["study_wall_s"],
            "tune_time_total_s": row["tune_time_total_s"]}


def _study(loop: str, workers: int, *, trials: int) -> dict[str, Any]:
    """One ``trials``-trial study of the fixed config; per trial, its phases with
    ``tune_start`` the gap before it (from ``Tuner.fit`` or the previous trial's end)
    and the last trial's ``tune_end``."""
    from ray import tune

    from raydp_synth.tune.study import StudyRequest, run_study
    from raydp_synth.tune.trial import TRIAL_TIMING

    stamps: dict[str, float] = {}
    fit = tune.Tuner.fit

    def stamped_fit(self: Any) -> Any:
        stamps["tune_fit_start"] = time.time()
        try:
            return fit(self)
        finally:
            stamps["tune_fit_end"] = time.time()

    tune.Tuner.fit = stamped_fit  # type: ignore[method-assign]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            space = Path(tmp) / "fixed.yaml"
            space.write_text(yaml.safe_dump({
                "method": "dpaf", "params": {"mu": {"type": "categorical", "choices": [1]}},
                "fixed": FIXED,
            }))
            start = time.time()
            run_study(StudyRequest(method="dpaf", epsilon=10.0, delta=1e-5, trials=trials,
                                   search_space=space, storage=Path(tmp), name="bench",
                                   workers_per_trial=workers, evaluate=False,
                                   trial_loop="ray-train" if loop == "ray_train" else "auto"))
            wall = time.time() - start
            timings = sorted((json.loads(path.read_text()) for path in
                              Path(tmp, "bench", "trials").glob(f"*/{TRIAL_TIMING}")),
                             key=lambda t: t["started_at"])
            results = [json.loads(line) for path in Path(tmp, "bench", "tune").glob(
                "*/result.json") for line in path.read_text().splitlines() if line]
    finally:
        tune.Tuner.fit = fit  # type: ignore[method-assign]
    if len(timings) != trials or any(t["loop"] != loop for t in timings):
        raise RuntimeError(f"asked for {trials} {loop} trial(s), ran "
                           f"{[t['loop'] for t in timings]}")
    per_trial = []
    previous_end = stamps["tune_fit_start"]
    for timing in timings:
        phases = {"tune_start": round(timing["started_at"] - previous_end, 3),
                  **timing["overhead_s"]}
        per_trial.append({"phases_s": phases, "process": timing.get("process")})
        previous_end = timing["ended_at"]
    per_trial[-1]["phases_s"]["tune_end"] = round(stamps["tune_fit_end"] - previous_end, 3)
    return {"per_trial": per_trial, "study_wall_s": round(wall, 2),
            "fit_wall_s": round(stamps["tune_fit_end"] - stamps["tune_fit_start"], 2),
            "tune_time_total_s": round(max(r["time_total_s"] for r in results), 2)}


def _study_row(row: dict[str, Any], direct_default_s: float | None) -> dict[str, Any]:
    """An N-trial study's fixed seconds per trial (phases a direct run lacks)."""
    fixed = [sum(v for k, v in t["phases_s"].items() if k not in DIRECT_PHASES)
             for t in row["per_trial"]]
    out: dict[str, Any] = {
        "trials": len(fixed), "fixed_s_per_trial": [round(f, 2) for f in fixed],
        "mean_fixed_s": round(statistics.mean(fixed), 2),
        "trial_processes": len({t["process"] for t in row["per_trial"]}),
        "fit_wall_s": row["fit_wall_s"], "per_trial": row["per_trial"],
    }
    if direct_default_s:
        out["share_of_default_trial"] = round(
            out["mean_fixed_s"] / (direct_default_s + out["mean_fixed_s"]), 3)
    return out


def _median_row(runs: list[dict[str, Any]], direct_default_s: float | None) -> dict[str, Any]:
    names = list(dict.fromkeys(name for run in runs for name in run["phases_s"]))
    phases = {name: round(statistics.median(run["phases_s"].get(name, 0.0) for run in runs), 2)
              for name in names}
    fixed = round(sum(v for k, v in phases.items() if k not in DIRECT_PHASES), 2)
    row: dict[str, Any] = {
        "phases_s": phases, "fixed_s": fixed,
        "tune_time_total_s": round(statistics.median(r["tune_time_total_s"] for r in runs), 2),
        "study_wall_s": round(statistics.median(r["study_wall_s"] for r in runs), 2),
        "runs": len(runs),
    }
    if direct_default_s:
        row["share_of_default_trial"] = round(fixed / (direct_default_s + fixed), 3)
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--study-trials", type=int, default=0, metavar="N",
                        help="also run one N-trial in-process study (0: skip)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/trial_overhead.json"))
    args = parser.parse_args()
    from raydp_synth.runtime.ray_session import ensure_ray

    ensure_ray()
    scaling = Path("bench/results/ray_scaling.json")
    direct_default_s = (json.loads(scaling.read_text())["trial"]["1_worker"]["direct_s"]
                        if scaling.is_file() else None)
    runs: dict[str, list[dict[str, Any]]] = {}
    for repeat in range(args.repeats):
        for loop, workers in LOOPS:
            key = f"{workers}_worker_{loop}"
            runs.setdefault(key, []).append(_one_study(loop, workers))
            print(f"[{repeat + 1}/{args.repeats}] {key}: {runs[key][-1]}", flush=True)
    rows = {key: _median_row(value, direct_default_s) for key, value in runs.items()}
    result = {
        "benchmark": "trial_overhead", "fixed_config": FIXED, "repeats": args.repeats,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "direct_default_trial_s": direct_default_s, "trials": rows,
    }
    names = list(dict.fromkeys(n for row in rows.values() for n in row["phases_s"]))
    print(f"{'phase (median s)':<18}" + "".join(f"{key:>22}" for key in rows))
    for name in names:
        print(f"{name:<18}" + "".join(f"{row['phases_s'].get(name, 0.0):>22.2f}"
                                      for row in rows.values()))
    print(f"{'fixed (not direct)':<18}" + "".join(f"{row['fixed_s']:>22.2f}" for row in rows.values()))
    if direct_default_s:
        print(f"{'share of default':<18}" + "".join(
            f"{100 * row['share_of_default_trial']:>21.1f}%" for row in rows.values()))
    if args.study_trials:
        study = _study_row(_study("in_process", 1, trials=args.study_trials), direct_default_s)
        result["study"] = study
        print(f"{args.study_trials}-trial in-process study: fixed s per trial "
              f"{study['fixed_s_per_trial']}, mean {study['mean_fixed_s']} s"
              + (f" = {100 * study['share_of_default_trial']:.1f}% of a default trial"
                 if direct_default_s else "")
              + f", {study['trial_processes']} trial process(es)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
