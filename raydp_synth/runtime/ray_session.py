"""Connecting to Ray: the cluster of ``ray job submit``, or a local one."""

from __future__ import annotations

import os

__all__ = ["ensure_ray"]


def ensure_ray(*, num_cpus: int | None = None) -> float:
    """Connect to the cluster in ``RAY_ADDRESS`` or start a local one.

    Returns:
        The cluster's CPU count.
    """
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Train's controller polls workers at this interval; each ray.train.report
    # blocks until the next poll (2 s by default; docs/ray-cluster.md, section 3).
    os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.2")
    import ray

    if not ray.is_initialized():
        if os.environ.get("RAY_ADDRESS"):
            ray.init(log_to_driver=True)
        else:
            ray.init(num_cpus=num_cpus or os.cpu_count(), log_to_driver=True)
    return float(ray.cluster_resources().get("CPU", 1.0))
