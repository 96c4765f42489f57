from __future__ import annotations

import os

import pytest

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.2")


@pytest.fixture(scope="session")
def ray_local():
    """One real local Ray cluster (2 CPUs) shared by the Ray tests of a session."""
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()
