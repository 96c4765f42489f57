"""``--compile-step`` reaches the worker: the CLI's flag, the requests of train and
tune, and the payload a worker builds its context from (``compile_backend``, read by
``run_worker_loop``); off unless asked."""

from __future__ import annotations

from pathlib import Path

from raydp_synth.cli import release_overrides
from raydp_synth.data import DataInfo, parse_dataset_spec
from raydp_synth.methods import get_method
from raydp_synth.privacy.plan import Mechanism, PrivacyPlan
from raydp_synth.train import __main__ as train_cli
from raydp_synth.train.driver import TrainRequest
from raydp_synth.train.pipeline import SingleRun
from raydp_synth.tune import __main__ as tune_cli


def _payload_with(compile_step: bool) -> dict:
    plan = PrivacyPlan(mechanisms=(Mechanism(name="critic", noise_multiplier=1.0, sample_rate=0.1,
                                             num_steps=1, sensitivity=1.0),),
                       delta=1e-5, target_epsilon=1.0)
    data = DataInfo(num_records=10, image_size=16, channels=1, num_classes=2)
    config = get_method("dpwgan").make_config({}, data)
    return SingleRun(method="dpwgan", config=config, data=data, plan=plan, dataset=parse_dataset_spec("digits"),
                     data_seed=0, public=None, use_gpu=False, cpus_per_worker=1.0,
                     compile_step=compile_step).payload()


def test_the_flag_reaches_the_train_request_and_the_payload(tmp_path: Path) -> None:
    on = train_cli.build_parser().parse_args(["dpwgan", "--out", str(tmp_path), "--compile-step"])
    off = train_cli.build_parser().parse_args(["dpwgan", "--out", str(tmp_path)])
    assert release_overrides(on)["compile_step"] is True
    assert "compile_step" not in release_overrides(off)
    assert TrainRequest(method="dpwgan", epsilon=1.0, delta=1e-5, out=tmp_path,
                        **release_overrides(on)).compile_step
    assert _payload_with(True)["compile_backend"] == "inductor"
    assert _payload_with(False)["compile_backend"] is None


def test_the_flag_reaches_the_study_request() -> None:
    args = tune_cli.build_parser().parse_args(["dpwgan", "--compile-step"])
    assert tune_cli.study_request(args).compile_step
    assert not tune_cli.study_request(tune_cli.build_parser().parse_args(["dpwgan"])).compile_step
