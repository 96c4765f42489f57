"""Trial packing on one GPU: trials per hour of a 16-trial DPAF study with
``--gpus-per-trial 0.25 --max-concurrent 4`` (four 1-worker trials share the GPU)
against ``--gpus-per-trial 1 --max-concurrent 1`` (one trial at a time).

* Each arm is a whole study (``raydp_synth.tune.study.run_study``, compose, no
  evaluation) of the same fixed DPAF config (a search space of one point), so the
  arms differ only in how many trials hold the GPU at once.
* trials/hour: trials over the Tune phase, from the first trial's start to the last
  trial's end (Tune's ``result.json``: ``timestamp - time_total_s``). Ray starts once,
  before the first arm, so no arm pays for it; ``wall_s`` is the whole study call.
* GPU utilisation: ``nvidia-smi`` sampled every 0.5 s in a thread; the mean and peak
  over the Tune phase, and the peak memory used.
* score: the trials' private selection scores (equal configs, so about equal).

Needs a GPU (it says so and exits 2 without one).

Usage: python bench/gpu_trial_packing.py [--trials 16] [--epochs 30] [--dataset digits]
       [--arms 0.25x4,1x1] [--out bench/results/gpu_trial_packing.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

EPSILON = 10.0
DELTA = 1e-5


def parse_arms(text: str) -> list[tuple[float, int]]:
    """``"0.25x4,1x1"``: (GPUs per trial, max concurrent trials) per arm."""
    arms = []
    for part in text.split(","):
        gpus, _, concurrent = part.strip().partition("x")
        try:
            arms.append((float(gpus), int(concurrent)))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"arm {part!r} is not GPUSxCONCURRENT, e.g. 0.25x4") from None
    return arms


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python bench/gpu_trial_packing.py",
        description="Trials/hour and GPU utilisation of a DPAF study packed onto one GPU "
        "(--gpus-per-trial F --max-concurrent C per arm). Needs a GPU.")
    parser.add_argument("--trials", type=int, default=16, help="trials per study (default 16)")
    parser.add_argument("--epochs", type=float, default=30.0,
                        help="DPAF's GAN epochs of every trial (default 30)")
    parser.add_argument("--dataset", default="digits", help="dataset spec (default digits)")
    parser.add_argument("--arms", type=parse_arms, default=parse_arms("0.25x4,1x1"),
                        help="GPUSxCONCURRENT per arm, comma-separated (default 0.25x4,1x1)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/gpu_trial_packing.json"))
    return parser


def gpu_missing() -> str | None:
    """Why this machine cannot run the benchmark, or None."""
    import torch

    if shutil.which("nvidia-smi") is None:
        return "nvidia-smi is not on PATH"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None


class GpuSampler:
    """``nvidia-smi`` utilisation (%) and memory used (MiB) of GPU 0, every ``period`` s."""

    def __init__(self, period: float = 0.5) -> None:
        self.samples: list[tuple[float, float, float]] = []  # (unix time, util %, MiB)
        self._period = period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> GpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        while not self._stop.wait(self._period):
            out = subprocess.run(
                ["nvidia-smi", "--id=0", "--query-gpu=utilization.gpu,memory.used",
                 "--format=csv,noheader,nounits"],
                capture_output=True, text=True, check=False).stdout.strip()
            try:
                util, mem = (float(v) for v in out.splitlines()[0].split(","))
            except (ValueError, IndexError):
                continue
            self.samples.append((time.time(), util, mem))

    def summary(self, start: float, end: float) -> dict:
        inside = [s for s in self.samples if start <= s[0] <= end] or self.samples
        return {
            "samples": len(inside),
            "mean_util_pct": round(statistics.fmean(s[1] for s in inside), 1) if inside else None,
            "peak_util_pct": max((s[1] for s in inside), default=None),
            "peak_memory_mib": max((s[2] for s in inside), default=None),
        }


def _trial_results(tune_dir: Path) -> list[dict]:
    rows = []
    for path in tune_dir.glob("*/result.json"):
        lines = [json.loads(line) for line in path.read_text().splitlines() if line]
        if lines:
            rows.append(lines[-1])
    return rows


def run_arm(*, gpus: float, concurrent: int, trials: int, epochs: float, dataset: str) -> dict:
    from raydp_synth.tune.study import StudyRequest, run_study

    with tempfile.TemporaryDirectory() as tmp:
        space = Path(tmp) / "fixed.yaml"
        space.write_text(yaml.safe_dump({
            "method": "dpaf", "params": {"mu": {"type": "categorical", "choices": [1]}},
            "fixed": {"epochs": epochs},
        }))
        start = time.perf_counter()
        with GpuSampler() as sampler:
            run_study(StudyRequest(method="dpaf", epsilon=EPSILON, delta=DELTA, trials=trials,
                                   search_space=space, storage=Path(tmp), name="pack",
                                   dataset=dataset, gpus_per_trial=gpus,
                                   max_concurrent=concurrent, evaluate=False))
        wall = time.perf_counter() - start
        results = _trial_results(Path(tmp, "pack", "tune"))
    starts = [r["timestamp"] - r["time_total_s"] for r in results]
    ends = [r["timestamp"] for r in results]
    span = max(ends) - min(starts)
    scores = [r["score"] for r in results
              if isinstance(r.get("score"), float) and math.isfinite(r["score"])]
    return {
        "gpus_per_trial": gpus, "max_concurrent": concurrent, "trials": len(results),
        "wall_s": round(wall, 1), "tune_span_s": round(span, 1),
        "trials_per_hour": round(len(results) / span * 3600, 1),
        "mean_trial_s": round(statistics.fmean(r["time_total_s"] for r in results), 1),
        "mean_score": round(statistics.fmean(scores), 4) if scores else None,
        "gpu": sampler.summary(min(starts), max(ends)),
    }


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    missing = gpu_missing()
    if missing is not None:
        print(f"error: bench/gpu_trial_packing.py needs a GPU ({missing}); run it on a GPU "
              "machine", file=sys.stderr)
        return 2
    import torch

    from raydp_synth.runtime.ray_session import ensure_ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ensure_ray()  # once, before the arms: no arm pays for Ray's start
    arms = [run_arm(gpus=gpus, concurrent=concurrent, trials=args.trials, epochs=args.epochs,
                    dataset=args.dataset) for gpus, concurrent in args.arms]
    base = arms[-1]["trials_per_hour"]
    for arm in arms:
        arm["speedup_vs_last_arm"] = round(arm["trials_per_hour"] / base, 2)
    result = {
        "benchmark": "gpu_trial_packing", "method": "dpaf", "dataset": args.dataset,
        "epochs": args.epochs, "epsilon": EPSILON, "delta": DELTA, "trials": args.trials,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                   f"{torch.cuda.get_device_name(0)}",
        "arms": arms,
    }
    print(f"{'F x C':<10}{'trials/h':>10}{'span s':>9}{'trial s':>9}{'GPU %':>7}"
          f"{'peak MiB':>10}{'score':>8}{'speedup':>9}")
    for arm in arms:
        gpu = arm["gpu"]
        print(f"{arm['gpus_per_trial']:g}x{arm['max_concurrent']:<7}{arm['trials_per_hour']:>10.0f}"
              f"{arm['tune_span_s']:>9.0f}{arm['mean_trial_s']:>9.1f}"
              f"{gpu['mean_util_pct'] or 0:>7.1f}{gpu['peak_memory_mib'] or 0:>10.0f}"
              f"{arm['mean_score'] or float('nan'):>8.3f}{arm['speedup_vs_last_arm']:>9.2f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
