"""--gpus-per-trial: the resource requests a study builds, the refusals, the note on a
machine whose Ray has no GPU, and the CLI wiring. No GPU and (but for the last
test) no Ray: the study's driver runs with Ray's calls replaced."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest

from raydp_synth.cli import run_cli
from raydp_synth.errors import ConfigError
from raydp_synth.runtime.resources import gpus_ray_can_place, scaling_config
from raydp_synth.tune.__main__ import main
from raydp_synth.tune.study import TRIAL_DRIVER_CPUS, StudyRequest
from raydp_synth.tune.trial import trial_resources


def _request(**changes: Any) -> StudyRequest:
    return StudyRequest(method="dpaf", epsilon=5.0, delta=1e-5, **changes)


@pytest.mark.parametrize(("gpus", "workers", "per_worker"), [
    (0.25, 1, 0.25), (0.5, 1, 0.5), (1, 1, 1.0), (2, 2, 1.0),
])
def test_each_worker_asks_for_its_share_of_the_trials_gpus(gpus, workers, per_worker) -> None:
    request = _request(gpus_per_trial=gpus, workers_per_trial=workers)
    assert request.gpus_per_worker() == per_worker
    scaling = scaling_config(workers=workers, use_gpu=True, cpus_per_worker=0.49,
                             gpus_per_worker=per_worker)
    assert scaling.use_gpu and scaling.num_workers == workers
    assert scaling._resources_per_worker_not_none == {"CPU": 0.49, "GPU": per_worker}
    assert scaling.total_resources["GPU"] == pytest.approx(gpus)


def test_use_gpu_alone_is_one_whole_gpu_per_worker_and_no_option_is_cpus() -> None:
    assert _request(use_gpu=True, workers_per_trial=2).gpus_per_worker() == 1.0
    assert _request(use_gpu=True, gpus_per_trial=2, workers_per_trial=2).gpus_per_worker() == 1.0
    assert _request().gpus_per_worker() == 0.0


@pytest.mark.parametrize(("changes", "needle"), [
    ({"gpus_per_trial": 0.0}, "must be a finite number >= 0.01"),
    ({"gpus_per_trial": -1.0}, "must be a finite number"),
    ({"gpus_per_trial": math.inf}, "must be a finite number"),
    ({"gpus_per_trial": math.nan}, "must be a finite number"),
    ({"gpus_per_trial": 0.25, "use_gpu": True}, "drop --use-gpu"),
    # Two ranks of one trial on one GPU: NCCL refuses them.
    ({"gpus_per_trial": 0.25, "workers_per_trial": 2}, "NCCL cannot run two ranks"),
    ({"gpus_per_trial": 0.5, "workers_per_trial": 2}, "--gpus-per-trial 2 or"),
    ({"gpus_per_trial": 1.0, "workers_per_trial": 2}, "NCCL"),
    # A worker trains on one GPU: a second would idle.
    ({"gpus_per_trial": 2.0}, "--workers-per-trial 2 (one GPU each)"),
    ({"gpus_per_trial": 1.5}, "a worker trains on one GPU"),
])
def test_gpu_requests_that_cannot_work_are_one_line(changes, needle) -> None:
    with pytest.raises(ConfigError) as err:
        _request(**changes)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_no_gpu_on_a_local_ray_drops_the_option_with_a_note(monkeypatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    gpus, note = gpus_ray_can_place(gpus_per_worker=0.25, workers=1, optional=True,
                                    cluster_gpus=0)
    assert gpus == 0.0 and note is not None and "trials train on CPUs" in note
    assert gpus_ray_can_place(gpus_per_worker=0.25, workers=1, optional=True,
                              cluster_gpus=1) == (0.25, None)
    # Some GPUs but too few, or --use-gpu, are refused as before.
    with pytest.raises(ConfigError, match="asks for 2 GPU"):
        gpus_ray_can_place(gpus_per_worker=1.0, workers=2, optional=True, cluster_gpus=1)
    with pytest.raises(ConfigError, match="asks for 1 GPU"):
        gpus_ray_can_place(gpus_per_worker=1.0, workers=1, optional=False, cluster_gpus=0)
    # A cluster may scale up: its request goes to Ray as asked.
    monkeypatch.setenv("RAY_ADDRESS", "ray://head:10001")
    assert gpus_ray_can_place(gpus_per_worker=0.25, workers=1, optional=True,
                              cluster_gpus=0) == (0.25, None)


class _Stop(Exception):
    pass


def _settings_of_study(monkeypatch, tmp_path: Path, argv: list[str], cluster_gpus: float) -> Any:
    """Run the tune CLI up to the tuner and return the settings every trial gets
    and the trial's tune.with_resources (Ray's calls replaced; nothing trains)."""
    import ray

    import raydp_synth.tune.study as study
    import raydp_synth.tune.tuner as tuner_module

    seen: dict[str, Any] = {}

    def tuner(strategy, request, prepared, settings, accountant):
        seen.update(settings=settings,
                    trial=trial_resources(settings, loop_in_process=True,
                                          driver_cpus=study.TRIAL_DRIVER_CPUS))
        raise _Stop

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(study, "ensure_ray", lambda **_: 2.0)
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2.0, "GPU": cluster_gpus})
    monkeypatch.setattr(ray, "nodes", lambda: [{"Alive": True}])  # one node: any --storage
    monkeypatch.setattr(study, "largest_node_cpus", lambda: 2.0)
    monkeypatch.setattr(study, "_start_accountant", lambda request, prepared: None)
    monkeypatch.setattr(tuner_module, "study_tuner", tuner)  # compose's one Tune experiment
    with pytest.raises(_Stop):
        main(["dpaf", *argv, "--storage", str(tmp_path), "--name", "packed"])
    return seen


def test_four_packed_trials_on_one_gpu_from_the_command_line(monkeypatch, tmp_path,
                                                             capsys) -> None:
    seen = _settings_of_study(monkeypatch, tmp_path,
                              ["--gpus-per-trial", "0.25", "--max-concurrent", "4"],
                              cluster_gpus=1)
    settings = seen["settings"]
    assert settings.use_gpu and settings.gpus_per_worker == 0.25 and settings.workers == 1
    # CPUs are shared over the 4 concurrent trials, less their drivers' shares.
    assert settings.cpus_per_worker == pytest.approx((2.0 - 4 * TRIAL_DRIVER_CPUS) / 4)
    # The 1-worker trial runs its loop in its own process: it asks for the GPU share.
    assert seen["trial"] == {"CPU": pytest.approx(0.5, abs=1e-4), "GPU": 0.25}
    assert "[raydp_synth] note:" not in capsys.readouterr().out


def test_a_cpu_only_ray_trains_the_trials_on_cpus_after_one_note(monkeypatch, tmp_path,
                                                                 capsys) -> None:
    seen = _settings_of_study(monkeypatch, tmp_path, ["--gpus-per-trial", "0.25"],
                              cluster_gpus=0)
    assert not seen["settings"].use_gpu
    notes = [line for line in capsys.readouterr().out.splitlines()
             if line.startswith("[raydp_synth] note:")]
    assert len(notes) == 1 and "--gpus-per-trial is ignored" in notes[0]


def test_a_contradictory_command_line_is_refused_before_ray(capsys, tmp_path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        run_cli(main, ["dpaf", "--gpus-per-trial", "0.5", "--workers-per-trial", "2",
                       "--storage", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "NCCL" in err and "\n" not in err
    assert not any(tmp_path.iterdir())


@pytest.mark.ray
def test_ray_places_four_quarter_gpu_trials_on_one_gpu_and_no_fifth() -> None:
    """Ray's placement is the source of truth: on a Ray that declares one GPU (no
    CUDA is used), the resources of a 1-worker trial (which runs its loop in its own
    process) and the placement group of a 2-worker trial's Ray Train workers (one
    whole GPU each) fit as many times as the GPU allows, and not once more."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    from raydp_synth.runtime.resources import worker_cpu_share
    from raydp_synth.tune.study_settings import StudySettings

    was_running = ray.is_initialized()
    ray.shutdown()  # the session's CPU-only Ray; restarted below as tests/conftest.py does
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False)
    try:
        # CPUs sized for more trials than fit, so only the GPUs limit them.
        cpus = worker_cpu_share(total_cpus=2, largest_node=2, workers=1, concurrent=16,
                                driver_cpus=TRIAL_DRIVER_CPUS)
        fields = {f.name for f in dataclasses.fields(StudySettings)}
        assert {"use_gpu", "gpus_per_worker", "cpus_per_worker"} <= fields
        for gpus, fit in ((0.25, 8), (1.0, 2)):
            settings = _SettingsLike(cpus_per_worker=cpus, gpus_per_worker=gpus)
            bundle = trial_resources(settings, loop_in_process=True,  # type: ignore[arg-type]
                                     driver_cpus=TRIAL_DRIVER_CPUS)
            assert bundle["GPU"] == gpus
            groups = [placement_group([bundle]) for _ in range(fit + 1)]
            ready = [ray.wait([g.ready()], timeout=5 if i < fit else 0.5)[0] != []
                     for i, g in enumerate(groups)]
            assert ready == [True] * fit + [False], gpus
            for group in groups:
                remove_placement_group(group)
        # A 2-worker trial of one whole GPU per worker fills the two GPUs; a second waits.
        bundles = scaling_config(workers=2, use_gpu=True, cpus_per_worker=cpus,
                                 gpus_per_worker=1.0).as_placement_group_factory().bundles
        assert [b["GPU"] for b in bundles] == [1.0, 1.0]
        assert ray.wait([placement_group(bundles).ready()], timeout=5)[0]
        assert not ray.wait([placement_group(bundles).ready()], timeout=0.5)[0]
    finally:
        ray.shutdown()
        if was_running:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)


@dataclasses.dataclass(frozen=True)
class _SettingsLike:
    """The fields of StudySettings that trial_resources reads."""

    cpus_per_worker: float
    gpus_per_worker: float
    use_gpu: bool = True
    workers: int = 1


def _packing_bench() -> Any:
    import importlib.util

    path = Path(__file__).parents[2] / "bench" / "gpu_trial_packing.py"
    spec = importlib.util.spec_from_file_location("gpu_trial_packing", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_packing_bench_parses_its_arms_and_needs_a_gpu(monkeypatch, capsys) -> None:
    bench = _packing_bench()
    args = bench.build_parser().parse_args(["--arms", "0.5x2,1x1", "--trials", "4"])
    assert args.arms == [(0.5, 2), (1.0, 1)] and args.trials == 4
    assert bench.build_parser().parse_args([]).arms == [(0.25, 4), (1.0, 1)]
    with pytest.raises(SystemExit):
        bench.build_parser().parse_args(["--arms", "quarter"])
    capsys.readouterr()
    monkeypatch.setattr(bench, "gpu_missing", lambda: "torch sees no CUDA device")
    assert bench.main([]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "needs a GPU" in err and "\n" not in err
