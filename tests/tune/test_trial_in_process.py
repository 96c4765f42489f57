"""A 1-worker trial runs its loop in its own process (no second Ray Train worker
group), asks Ray for the worker's resources, and still writes the same files and
reports only allowed keys; a multi-worker trial stays on Ray Train."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from raydp_synth.tune.trial import in_process, trial_resources


def _settings(workers: int, use_gpu: bool = False, gpus_per_worker: float = 1.0,
              trial_loop: str = "auto"):
    return SimpleNamespace(workers=workers, cpus_per_worker=0.6633, use_gpu=use_gpu,
                           gpus_per_worker=gpus_per_worker, trial_loop=trial_loop)


def test_a_one_worker_trial_holds_its_loops_resources_and_a_multi_worker_one_does_not() -> None:
    one, two = _settings(1), _settings(2)
    assert in_process(one) and not in_process(two)
    assert trial_resources(one, loop_in_process=True, driver_cpus=0.01) == {"CPU": 0.6733}
    assert trial_resources(_settings(1, use_gpu=True), loop_in_process=True,
                           driver_cpus=0.01) == {"CPU": 0.6733, "GPU": 1.0}
    # --gpus-per-trial 0.25: the trial's own process holds the quarter GPU.
    assert trial_resources(_settings(1, use_gpu=True, gpus_per_worker=0.25),
                           loop_in_process=True, driver_cpus=0.01) == {"CPU": 0.6733, "GPU": 0.25}
    assert trial_resources(two, loop_in_process=False, driver_cpus=0.01) == {"CPU": 0.01}
    # Three concurrent trials' shares of 2 CPUs never add up to more than 2.
    third = SimpleNamespace(workers=1, cpus_per_worker=(2 - 3 * 0.01) / 3, use_gpu=False)
    assert 3 * trial_resources(third, loop_in_process=True, driver_cpus=0.01)["CPU"] <= 2
    assert not in_process(_settings(1, trial_loop="ray-train"))  # --trial-loop ray-train


def train_workers() -> set[str]:
    """The Ray Train worker actors of the connected cluster, by actor id."""
    from ray._private import state

    return {aid for aid, info in state.actors().items()
            if info["ActorClassName"] == "RayTrainWorker"}


def check_a_one_worker_trial_trained_in_process(study: Path, result: Any,
                                                workers_before: set[str]) -> None:
    """A study of one 1-worker trial (TINY's 2 epochs) trained in process, with the same
    files and allowed reports: no Ray Train worker group was started (``workers_before``:
    :func:`train_workers` before the study).

    Checked on the study of tests/tune/test_toy_strategy.py (compose-priced, one
    1-worker trial of TINY): one study serves both, CI's time is the suite's."""
    from ray.tune.result import AUTO_RESULT_KEYS

    from raydp_synth.methods import get_method
    from raydp_synth.tune.trial import TRIAL_CHECKPOINT, TRIAL_METRICS, TRIAL_TIMING

    assert train_workers() == workers_before  # no Ray Train worker group
    (trial,) = (study / "trials").iterdir()
    assert result.best_trial == trial.name
    timing = json.loads((trial / TRIAL_TIMING).read_text())
    assert timing["loop"] == "in_process" and "workers_start" not in timing["overhead_s"]
    checkpoints = sorted(trial.glob("train/checkpoint_*"))
    assert checkpoints and all({p.name for p in c.iterdir()} == {"state.pt", "metrics.json"}
                               for c in checkpoints)
    (final,) = study.glob(f"tune/*/checkpoint_*/{TRIAL_CHECKPOINT}")
    assert (final.parent / "generator.pt").is_file()
    assert (study / "release" / "generator.safetensors").is_file()
    tune_keys = set(AUTO_RESULT_KEYS) | {"trial_id", "done", "checkpoint_path", "should_checkpoint"}
    allowed = tune_keys | TRIAL_METRICS | get_method("dpaf").metric_allowlist
    (path,) = study.glob("tune/*/result.json")
    results = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert len(results) >= 3  # the per-epoch reports reached Tune, then the score
    assert {key for r in results for key in r} <= allowed
    assert "score" in results[-1] and "g_loss" in results[-2]


def test_the_trial_loop_is_a_validated_study_setting() -> None:
    from raydp_synth.errors import ConfigError
    from raydp_synth.tune.study import StudyRequest

    assert StudyRequest(method="dpaf", epsilon=1.0, delta=1e-5).trial_loop == "auto"
    with pytest.raises(ConfigError, match="--trial-loop 'ray_train' must be one of auto, ray-train"):
        StudyRequest(method="dpaf", epsilon=1.0, delta=1e-5, trial_loop="ray_train")
