"""1 and 2 Ray Train workers release the same noise scale through the step every loop
runs, ``dp_sgd_step`` (docs/architecture.md, section 4)."""

from __future__ import annotations

import math

import pytest

from tests.stats import std_interval

pytestmark = pytest.mark.ray


@pytest.mark.parametrize("workers", [1, 2])
def test_noise_is_added_once_whatever_the_number_of_workers(ray_local, tmp_path, workers: int) -> None:
    import ray.cloudpickle
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    from tests.train import noise_probe

    # The probe is test code: the workers get it by value, not by a module path
    # that only the test's process has.
    ray.cloudpickle.register_pickle_by_value(noise_probe)

    config = {"dim": 5000, "repeats": 4, "max_grad_norm": 0.8, "noise_multiplier": 1.7,
              "expected_batch_size": 24.0, "seed": 3}
    result = TorchTrainer(
        noise_probe.noise_release_probe,
        train_loop_config=config,
        scaling_config=ScalingConfig(num_workers=workers, resources_per_worker={"CPU": 0.5}),
        run_config=RunConfig(name=f"probe{workers}", storage_path=str(tmp_path)),
    ).fit()
    metrics = result.metrics
    expected = config["noise_multiplier"] * config["max_grad_norm"] / config["expected_batch_size"]
    ratio = math.sqrt(metrics["second_moment"]) / expected
    lo, hi = std_interval(int(metrics["count"]))
    # With W workers each adding noise, the ratio would be sqrt(W); with a stray
    # per-worker 1/W scaling, 1/sqrt(W): both far outside [lo, hi] for 20,000 draws.
    assert lo <= ratio <= hi, (workers, ratio, lo, hi)
    assert metrics["digest_spread"] == 0.0  # every rank holds the same release
