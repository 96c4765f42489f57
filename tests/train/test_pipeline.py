"""The single-run pipeline that a training run and a study's trial share
(raydp_synth.train.pipeline), and the request core their requests extend
(raydp_synth.train.request)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from raydp_synth.data import (
    DataInfo,
    data_info,
    load_training_data,
    parse_dataset_spec,
    parse_public_spec,
)
from raydp_synth.errors import ConfigError
from raydp_synth.methods import get_method
from raydp_synth.privacy.plan import Mechanism, PrivacyPlan
from raydp_synth.train.driver import TrainRequest
from raydp_synth.train.pipeline import LoopPlacement, SingleRun, run_single
from raydp_synth.train.request import RequestCore
from raydp_synth.tune.study import StudyRequest

TINY = {"epochs": 1, "classifier_epochs": 0.2, "batch_size": 512, "base_width": 4,
        "g_base_width": 4, "g_steps": 1, "classifier_batch_size": 256}


def _run(**changes: object) -> SingleRun:
    plan = PrivacyPlan(mechanisms=(Mechanism(name="critic", noise_multiplier=1.0, sample_rate=0.1,
                                             num_steps=1, sensitivity=1.0),),
                       delta=1e-5, target_epsilon=1.0)
    data = DataInfo(num_records=10, image_size=16, channels=1, num_classes=2)
    config = get_method("dpwgan").make_config({}, data)
    return dataclasses.replace(SingleRun(method="dpwgan", config=config, data=data, plan=plan,
                                         dataset=parse_dataset_spec("digits"), data_seed=0),
                               **changes)


def test_a_worker_gets_public_quantities_only() -> None:
    payload = _run(public=parse_public_spec("mnist:fraction=0.1")).payload()
    assert set(payload) == {"method", "config", "data_info", "plan", "dataset", "data_seed",
                            "public", "use_gpu", "threads_per_worker", "compile_backend"}
    assert not any("seed" in key and key != "data_seed" for key in payload)


def test_an_in_process_loop_runs_one_worker(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="one worker"):
        LoopPlacement(storage=tmp_path, in_process=True, workers=2)


def test_one_run_fits_builds_and_scores_in_process(tmp_path: Path) -> None:
    """The sequence both callers run: the loop's checkpoints under storage/name, the
    generator of the training data's classes, the score (free on public data: a
    non-private plan has no score mechanism), and the trial's phase stamps."""
    method = get_method("dpaf")
    splits, public = load_training_data(parse_dataset_spec("digits"), public=None, seed=0)
    data = data_info(splits.train, public)
    config = method.make_config({**TINY, "seed": 0}, data)
    plan = method.non_private_plan(config, delta=1e-5, data=data, score=False)
    run = SingleRun(method="dpaf", config=config, data=data, plan=plan,
                    dataset=parse_dataset_spec("digits"), data_seed=0)
    forwarded: list[dict[str, float]] = []
    stamps: dict[str, float] = {}
    result = run_single(run, LoopPlacement(storage=tmp_path, in_process=True,
                                           forward=forwarded.append),
                        class_names=splits.class_names,
                        score_split=dataclasses.replace(splits.val, public=True),
                        score_classifier="logreg", reproducibility_seed=7, stamps=stamps)
    assert result.metrics and forwarded == result.metrics
    assert {key for m in result.metrics for key in m} <= method.metric_allowlist
    assert sorted((tmp_path / "train").glob("checkpoint_*"))
    assert tuple(result.generator.class_names) == tuple(splits.class_names)
    assert not result.score.private and result.score.num_records == len(splits.val)
    assert {"fit_start", "loop_start", "loop_end", "fit_end", "scored"} <= set(stamps)


def test_both_requests_share_one_validated_core(tmp_path: Path) -> None:
    assert issubclass(TrainRequest, RequestCore) and issubclass(StudyRequest, RequestCore)
    core = {f.name for f in dataclasses.fields(RequestCore)}
    assert core <= {f.name for f in dataclasses.fields(TrainRequest)}
    assert core <= {f.name for f in dataclasses.fields(StudyRequest)}
    for make in (lambda **kw: TrainRequest(out=tmp_path / "run", **kw),
                 lambda **kw: StudyRequest(storage=tmp_path, **kw)):
        with pytest.raises(ConfigError):
            make(method="dpaf", epsilon=1.0, delta=1e-5, score_share=1.5)


def test_absolute_paths_keep_the_request_type(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    train = TrainRequest(method="dpaf", epsilon=1.0, delta=1e-5, out=tmp_path / "run",
                         dataset="idx:data", public_validation="folder:faces")
    absolute = train.with_absolute_paths()
    assert type(absolute) is TrainRequest and absolute.out == train.out
    assert str(absolute.dataset) == f"idx:{tmp_path}/data"
    assert str(absolute.public_validation) == f"folder:{tmp_path}/faces"
    study = StudyRequest(method="dpaf", epsilon=1.0, delta=1e-5, storage=tmp_path,
                         dataset="idx:data", public="idx:more")
    moved = study.with_absolute_paths()
    assert type(moved) is StudyRequest and moved.strategy == study.strategy
    assert (str(moved.dataset), str(moved.public)) == (f"idx:{tmp_path}/data",
                                                       f"idx:{tmp_path}/more")
