"""A 1-worker loop run in the caller's process (a Tune trial's): the same worker body,
checkpoint files and allow-listed reports as on Ray Train, without Ray."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

from raydp_synth.data import data_info, load_training_data, parse_dataset_spec
from raydp_synth.evaluation.report import run_checkpoints
from raydp_synth.methods import get_method
from raydp_synth.train.pipeline import SingleRun, fit_in_process

TINY = {"epochs": 1, "classifier_epochs": 0.2, "batch_size": 512, "base_width": 4,
        "g_base_width": 4, "g_steps": 1, "classifier_batch_size": 256}


def test_a_one_worker_loop_in_process_writes_ray_trains_checkpoints_and_allowed_reports(
        tmp_path: Path) -> None:
    method = get_method("dpaf")
    splits, public = load_training_data(parse_dataset_spec("digits"), public=None, seed=0)
    data = data_info(splits.train, public)
    config = method.make_config({**TINY, "seed": 0}, data)
    plan = method.non_private_plan(config, delta=1e-5, data=data, score=False)  # no calibration
    forwarded: list[dict[str, float]] = []
    stamps: dict[str, float] = {}
    run = SingleRun(method="dpaf", config=config, data=data, plan=plan,
                    dataset=parse_dataset_spec("digits"), data_seed=0, use_gpu=False, cpus_per_worker=1.0)
    state, metrics = fit_in_process(
        run, dp_seed=secrets.randbits(63), storage=tmp_path, name="train",
        forward=forwarded.append, stamps=stamps,
    )
    assert forwarded == metrics and metrics  # every checked report reached the sink
    assert {key for m in metrics for key in m} <= method.metric_allowlist
    checkpoints = sorted((tmp_path / "train").glob("checkpoint_*"))
    assert checkpoints and all({p.name for p in c.iterdir()} == {"state.pt", "metrics.json"}
                               for c in checkpoints)
    assert json.loads((checkpoints[-1] / "metrics.json").read_text()) == metrics
    assert len(run_checkpoints(tmp_path)) == len(checkpoints)  # what the evaluation reads
    assert "generator" in state and set(stamps) == {"loop_start", "loop_end"}
