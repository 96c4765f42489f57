"""Connecting to Ray: the cluster of ``ray job submit``, or a local one."""

from __future__ import annotations

import os

__all__ = ["ensure_ray", "largest_node_cpus", "threads_for", "worker_cpu_share"]


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


def largest_node_cpus() -> float:
    """The CPU count of the cluster's largest live node (a worker cannot span nodes)."""
    import ray

    return max((float(n["Resources"].get("CPU", 0.0)) for n in ray.nodes() if n.get("Alive")),
               default=1.0)


def worker_cpu_share(*, total_cpus: float, largest_node: float, workers: int,
                     concurrent: int = 1, driver_cpus: float = 0.0) -> float:
    """The CPUs each Ray Train worker requests: the cluster's CPUs, less the trial
    drivers' shares, split over every worker of every concurrent trial, and never
    more than one node holds (or less than 0.05)."""
    share = (total_cpus - driver_cpus * concurrent) / (concurrent * workers)
    return max(0.05, min(largest_node, share))


def threads_for(cpu_share: float) -> int:
    """torch threads of a worker with ``cpu_share`` CPUs: its whole CPUs, at least one."""
    return max(1, int(cpu_share))
