"""Connecting to Ray: the cluster of ``ray job submit``, or a local one."""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["ensure_ray"]

#: Where a ``ray job submit`` driver finds its job's config (and runtime environment).
JOB_CONFIG_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"

#: Ray settings every process of a run or study gets (a local cluster inherits them
#: from the driver; a cluster in ``RAY_ADDRESS`` receives them in the job's runtime
#: environment). State tracking fills the dashboard's Train page: Ray Train records
#: each run and its workers only where the process building the trainer (a Tune
#: trial, or the driver of ``train``) has it set.
RAY_SETTINGS: dict[str, str] = {
    "RAY_USAGE_STATS_ENABLED": "0",
    # Train's controller polls workers at this interval; each ray.train.report
    # blocks until the next poll (2 s by default; docs/ray-cluster.md, section 3).
    "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.2",
    "RAY_TRAIN_ENABLE_STATE_TRACKING": "1",
}


def ensure_ray(*, num_cpus: int | None = None) -> float:
    """Connect to the cluster in ``RAY_ADDRESS`` or start a local one.

    Returns:
        The cluster's CPU count.
    """
    for name, value in RAY_SETTINGS.items():
        os.environ.setdefault(name, value)
    import ray

    from raydp_synth.log import quiet_ray_loggers, ray_log_level, worker_env

    if not ray.is_initialized():
        options: dict[str, Any] = {"log_to_driver": True, "logging_level": ray_log_level()}
        if os.environ.get("RAY_ADDRESS"):
            # The console's settings reach every process of the job (the Tune trials
            # too) in its runtime environment, less what a submitted job already set
            # (Ray refuses to merge a key set twice). A local cluster inherits them.
            job = json.loads(os.environ.get(JOB_CONFIG_ENV) or "{}")
            taken = set((job.get("runtime_env") or {}).get("env_vars") or {})
            settings = {k: os.environ[k] for k in RAY_SETTINGS}
            env_vars = {k: v for k, v in {**settings, **worker_env()}.items() if k not in taken}
            ray.init(runtime_env={"env_vars": env_vars} if env_vars else None, **options)
        else:
            ray.init(num_cpus=num_cpus or os.cpu_count(), **options)
    quiet_ray_loggers()
    return float(ray.cluster_resources().get("CPU", 1.0))
