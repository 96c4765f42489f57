"""Ray overhead of one study trial: a trial's wall time against the same training
run directly (the method's loop called in this process, no Ray).

Both sides run the same DPAF configuration with the same plan size (a 1-trial
compose study gives its whole budget to its trial):

* ``direct``: plan, load data, ``method.train`` on an in-process WorkerContext
  (1 worker, 1 thread), then the selection score; no Ray at all.
* ``trial``: ``python -m raydp_synth.tune`` machinery for a 1-trial study with the
  same fixed config (Tune trial, accountant grant, 1 Ray Train worker, score,
  checkpoint, release); measured as the Tune trial's ``time_total_s`` and as the
  whole study's wall time (which adds Ray start-up and the release).

Usage: python bench/tune_trial_overhead.py [--epochs 30] [--out bench/results/tune_trial_overhead.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import secrets
import tempfile
import time
from pathlib import Path

import torch
import yaml


def _direct(epochs: float, epsilon: float) -> float:
    from raydp_synth.data import load_dataset
    from raydp_synth.evaluation.selection import DEFAULT_SCORE_SHARE, score_generator
    from raydp_synth.methods import DataInfo, get_method
    from raydp_synth.methods.base import config_to_dict
    from raydp_synth.release import TrainedGenerator
    from raydp_synth.train.context import WorkerContext

    start = time.perf_counter()
    splits = load_dataset("digits")
    train = splits.train
    data = DataInfo(num_records=len(train), image_size=16, channels=1, num_classes=10)
    method = get_method("dpaf")
    config = method.make_config({"epochs": epochs}, data)
    plan = method.plan(config, epsilon=epsilon, delta=1e-5, data=data,
                       score_share=DEFAULT_SCORE_SHARE)
    states: list[dict] = []
    ctx = WorkerContext(
        config=config, plan=plan, data=data, train=train, rank=0, world_size=1,
        device=torch.device("cpu"), noise_generator=torch.Generator().manual_seed(1),
        report=lambda metrics, state: states.append(state) if state else None,
        log=lambda line: None, dp_seed=secrets.randbits(63),
    )
    method.train(ctx)
    generator = TrainedGenerator.build(method="dpaf", config=config_to_dict(config),
                                       data_info=data.__dict__, class_names=splits.class_names,
                                       state_dict=states[-1]["generator"])
    score_generator(generator, splits.val, plan=plan, noise_generator=torch.Generator())
    return time.perf_counter() - start


def _trial(epochs: float, epsilon: float) -> tuple[float, float]:
    from raydp_synth.tune.study import StudyRequest, run_study

    with tempfile.TemporaryDirectory() as tmp:
        space = Path(tmp) / "one.yaml"
        space.write_text(yaml.safe_dump({
            "method": "dpaf", "params": {"mu": {"type": "categorical", "choices": [1]}},
            "fixed": {"epochs": epochs},
        }))
        start = time.perf_counter()
        run_study(StudyRequest(method="dpaf", epsilon=epsilon, delta=1e-5, trials=1,
                               search_space=space, storage=Path(tmp), name="bench",
                               evaluate=False))
        wall = time.perf_counter() - start
        results = [json.loads(line) for line in
                   next(Path(tmp, "bench", "tune").glob("*/result.json")).read_text().splitlines()]
        return results[-1]["time_total_s"], wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=float, default=30.0)
    parser.add_argument("--epsilon", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=Path("bench/results/tune_trial_overhead.json"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    direct = _direct(args.epochs, args.epsilon)
    trial, study = _trial(args.epochs, args.epsilon)
    result = {
        "epochs": args.epochs,
        "direct_s": round(direct, 2),
        "tune_trial_s": round(trial, 2),
        "study_wall_s": round(study, 2),
        "ray_overhead_per_trial_s": round(trial - direct, 2),
        "trial_over_direct": round(trial / direct, 3),
        "machine": f"{platform.machine()}, {torch.get_num_threads()} torch thread(s), "
                   f"{__import__('os').cpu_count()} cores",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
