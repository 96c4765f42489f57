"""Sizing what a run asks of Ray: CPUs and GPUs per worker, torch threads, the
collective backend."""

from __future__ import annotations

import math
import os
from typing import Any

from threadpoolctl import threadpool_limits

from raydp_synth.errors import ConfigError

__all__ = [
    "MIN_GPU_SHARE",
    "check_gpus",
    "one_blas_thread",
    "gpus_ray_can_place",
    "largest_node_cpus",
    "scaling_config",
    "threads_for",
    "torch_backend",
    "worker_cpu_share",
    "worker_gpu_share",
]

#: The smallest GPU fraction a worker may ask for (Ray counts resources in 1/10000
#: units; below 1/100 a GPU would hold more trials than its memory does).
MIN_GPU_SHARE = 0.01


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


def one_blas_thread() -> threadpool_limits:
    """A context in which NumPy's and scikit-learn's BLAS (OpenBLAS) runs on one thread.

    scikit-learn's small fits (the evaluation's logistic regression and MLP, PrivImage's
    semantic query) are memory-bound matrix-vector work. On the 2-core CPU machine a
    logistic regression on 2,000 digits-sized images took 3.1 s with OpenBLAS's
    default of a thread per core and 1.0 s on one; on 10,000, 3.8 s and 1.3 s; with
    another process busy on the machine (a trial beside it, a Ray actor), 13.7 s and
    1.1 s: OpenBLAS's threads spin waiting for a core. torch's own threads are set
    apart (``torch.set_num_threads``; :func:`threads_for`)."""
    return threadpool_limits(limits=1, user_api="blas")


def threads_for(cpu_share: float) -> int:
    """torch threads of a worker with ``cpu_share`` CPUs: its whole CPUs, at least one."""
    return max(1, int(cpu_share))


def torch_backend(use_gpu: bool) -> str:
    """The collective backend of a trial's workers: NCCL between GPUs, gloo on CPUs."""
    return "nccl" if use_gpu else "gloo"


def worker_gpu_share(*, gpus_per_trial: float | None, use_gpu: bool, workers: int) -> float:
    """The GPUs each of a trial's ``workers`` Ray Train workers asks for (0: CPUs only).

    ``--use-gpu`` is one whole GPU per worker. ``--gpus-per-trial F``: the trial's
    workers share F GPUs, ``F / workers`` each. A fraction packs trials onto one GPU:
    0.25 with one worker runs four 1-worker trials on a GPU at once (Ray places them;
    ``--max-concurrent`` bounds how many run). Refused, one line each:

    * F not finite or below :data:`MIN_GPU_SHARE`;
    * ``--use-gpu`` with an F other than one GPU per worker (they contradict);
    * below one GPU per worker with several workers: Ray would place two ranks of
      the trial on one GPU, and NCCL, the GPU workers' collective backend, refuses
      two ranks on one CUDA device ("Duplicate GPU detected"). A multi-worker trial
      takes one whole GPU per worker; packing is for 1-worker trials;
    * above one GPU per worker: a worker trains on one CUDA device, so the rest
      would sit idle; more GPUs per trial come from more workers.
    """
    if gpus_per_trial is None:
        return 1.0 if use_gpu else 0.0
    option = f"--gpus-per-trial {gpus_per_trial:g}"
    if not math.isfinite(gpus_per_trial) or gpus_per_trial < MIN_GPU_SHARE:
        raise ConfigError(f"{option} must be a finite number >= {MIN_GPU_SHARE:g} (leave it "
                          "out to train on CPUs)")
    if use_gpu and gpus_per_trial != workers:
        raise ConfigError(f"--use-gpu asks for one whole GPU per worker ({workers} per trial) "
                          f"but {option}; drop --use-gpu")
    share = gpus_per_trial / workers
    if share < 1 and workers > 1:
        raise ConfigError(f"{option} with {workers} workers per trial puts {share:g} GPU under "
                          "each worker, but NCCL cannot run two ranks of a trial on one GPU; "
                          f"use --gpus-per-trial {workers} or --workers-per-trial 1")
    if share > 1:
        raise ConfigError(f"{option} gives each of the trial's {workers} worker(s) {share:g} "
                          "GPUs, but a worker trains on one GPU; use "
                          f"--workers-per-trial {math.ceil(gpus_per_trial)} (one GPU each) or "
                          f"--gpus-per-trial {workers}")
    return share


def scaling_config(*, workers: int, use_gpu: bool, cpus_per_worker: float,
                   gpus_per_worker: float = 1.0) -> Any:
    """Ray Train's ``ScalingConfig`` of one run: ``workers`` workers, each with
    ``cpus_per_worker`` CPUs and, with ``use_gpu``, ``gpus_per_worker`` GPUs: one
    whole GPU by default, so a worker's CUDA device is never shared with another
    worker's DP step; a fraction (1-worker trials, :func:`worker_gpu_share`) lets
    Ray pack several trials onto one GPU."""
    from ray.train import ScalingConfig

    gpus = {"GPU": gpus_per_worker} if use_gpu else {}
    return ScalingConfig(
        num_workers=workers,
        use_gpu=use_gpu,
        resources_per_worker={"CPU": cpus_per_worker, **gpus},
    )


def check_gpus(*, use_gpu: bool, gpus_per_trial: float, cluster_gpus: float) -> None:
    """Refuse ``--use-gpu`` on a local Ray without enough GPUs (it would wait forever);
    a cluster (``RAY_ADDRESS``) may still scale up, so it is trusted."""
    if use_gpu and cluster_gpus < gpus_per_trial and not os.environ.get("RAY_ADDRESS"):
        raise ConfigError(
            f"the run asks for {gpus_per_trial:g} GPU(s) but this machine's Ray has "
            f"{cluster_gpus:g}; train on CPUs, use fewer workers, or submit to a GPU cluster"
        )


def gpus_ray_can_place(*, gpus_per_worker: float, workers: int, optional: bool,
                       cluster_gpus: float) -> tuple[float, str | None]:
    """The GPUs per worker a run asks this Ray for, and a note when it asks for none.

    ``optional`` (``--gpus-per-trial``): on a local Ray without any GPU the request is
    dropped and the run trains on CPUs, with a note saying so. A required request
    (``--use-gpu``), or a local Ray with some but too few GPUs, is refused by
    :func:`check_gpus`. A cluster (``RAY_ADDRESS``) is trusted: it may scale up.
    """
    if optional and gpus_per_worker > 0 and not cluster_gpus \
            and not os.environ.get("RAY_ADDRESS"):
        return 0.0, ("this machine's Ray has no GPU: --gpus-per-trial is ignored and the "
                     "trials train on CPUs")
    check_gpus(use_gpu=gpus_per_worker > 0, gpus_per_trial=gpus_per_worker * workers,
               cluster_gpus=cluster_gpus)
    return gpus_per_worker, None
