"""Sizing what a run asks of Ray: CPUs and GPUs per worker, torch threads, the
collective backend."""

from __future__ import annotations

import os
from typing import Any

from raydp_synth.errors import ConfigError

__all__ = [
    "check_gpus",
    "largest_node_cpus",
    "scaling_config",
    "threads_for",
    "torch_backend",
    "worker_cpu_share",
]


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


def torch_backend(use_gpu: bool) -> str:
    """The collective backend of a trial's workers: NCCL between GPUs, gloo on CPUs."""
    return "nccl" if use_gpu else "gloo"


def scaling_config(*, workers: int, use_gpu: bool, cpus_per_worker: float) -> Any:
    """Ray Train's ``ScalingConfig`` of one run: ``workers`` workers, each with
    ``cpus_per_worker`` CPUs and, with ``use_gpu``, one whole GPU of its own (so a
    worker's CUDA device is never shared with another worker's DP step)."""
    from ray.train import ScalingConfig

    return ScalingConfig(
        num_workers=workers,
        use_gpu=use_gpu,
        resources_per_worker={"CPU": cpus_per_worker, **({"GPU": 1} if use_gpu else {})},
    )


def check_gpus(*, use_gpu: bool, gpus_per_trial: int, cluster_gpus: float) -> None:
    """Refuse ``--use-gpu`` on a local Ray without enough GPUs (it would wait forever);
    a cluster (``RAY_ADDRESS``) may still scale up, so it is trusted."""
    if use_gpu and cluster_gpus < gpus_per_trial and not os.environ.get("RAY_ADDRESS"):
        raise ConfigError(
            f"the run asks for {gpus_per_trial} GPU(s) but this machine's Ray has "
            f"{cluster_gpus:g}; train on CPUs, use fewer workers, or submit to a GPU cluster"
        )
