"""The --use-gpu path without a GPU: the resource requests it builds, and the clear
refusal on a machine whose Ray has no GPU (a run there would wait forever)."""

from __future__ import annotations

import pytest

from raydp_synth.cli import run_cli
from raydp_synth.errors import ConfigError
from raydp_synth.runtime.resources import check_gpus, scaling_config, torch_backend


def test_each_gpu_worker_asks_for_one_whole_gpu_and_its_cpu_share() -> None:
    scaling = scaling_config(workers=2, use_gpu=True, cpus_per_worker=0.5)
    assert scaling.num_workers == 2 and scaling.use_gpu
    assert scaling._resources_per_worker_not_none == {"CPU": 0.5, "GPU": 1}
    assert scaling.total_resources == {"CPU": 1.0, "GPU": 2.0}
    assert torch_backend(use_gpu=True) == "nccl"


def test_cpu_workers_ask_for_no_gpu_and_use_gloo() -> None:
    scaling = scaling_config(workers=2, use_gpu=False, cpus_per_worker=1.0)
    assert not scaling.use_gpu
    assert scaling._resources_per_worker_not_none == {"CPU": 1.0}
    assert scaling.total_resources.get("GPU", 0) == 0
    assert torch_backend(use_gpu=False) == "gloo"


def test_too_few_gpus_are_refused_locally_but_trusted_on_a_cluster(monkeypatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    check_gpus(use_gpu=False, gpus_per_trial=4, cluster_gpus=0)
    check_gpus(use_gpu=True, gpus_per_trial=2, cluster_gpus=2)
    with pytest.raises(ConfigError, match="the run asks for 2 GPU"):
        check_gpus(use_gpu=True, gpus_per_trial=2, cluster_gpus=1)
    monkeypatch.setenv("RAY_ADDRESS", "ray://head:10001")  # an autoscaling cluster may grow
    check_gpus(use_gpu=True, gpus_per_trial=2, cluster_gpus=0)


@pytest.mark.ray
def test_a_gpu_study_on_a_cpu_only_ray_is_one_clear_line(ray_local, capsys, tmp_path,
                                                         monkeypatch) -> None:
    from raydp_synth.tune.__main__ import main

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    if ray_local.cluster_resources().get("GPU", 0):
        pytest.skip("this machine's Ray has a GPU")
    with pytest.raises(SystemExit) as exit_info:
        run_cli(main, ["dpaf", "--use-gpu", "--storage", str(tmp_path), "--name", "gpu"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: the run asks for 1 GPU") and "\n" not in err
    assert not any(tmp_path.iterdir()), "a refused study wrote files"


def test_worker_threads_follow_the_worker_cpu_share() -> None:
    """A worker gets its share of the cluster's CPUs, and as many torch threads as
    whole CPUs in it (a 1-worker run on a 16-core GPU machine used one thread)."""
    from raydp_synth.runtime.resources import threads_for, worker_cpu_share

    one = worker_cpu_share(total_cpus=16, largest_node=16, workers=1)
    assert one == 16 and threads_for(one) == 16
    two = worker_cpu_share(total_cpus=16, largest_node=16, workers=2)
    assert two == 8 and threads_for(two) == 8
    packed = worker_cpu_share(total_cpus=16, largest_node=16, workers=1, concurrent=4,
                              driver_cpus=0.01)
    assert packed == pytest.approx(3.99) and threads_for(packed) == 3
    # A worker lives on one node; tiny shares still start; a fraction is one thread.
    assert worker_cpu_share(total_cpus=4, largest_node=1, workers=1) == 1
    assert worker_cpu_share(total_cpus=1, largest_node=1, workers=4, concurrent=8) == 0.05
    assert threads_for(0.5) == 1
    assert threads_for(worker_cpu_share(total_cpus=2, largest_node=2, workers=1)) == 2
