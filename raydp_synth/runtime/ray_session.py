"""Connecting to Ray: the cluster of ``ray job submit``, or a local one."""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["ensure_ray"]

#: Where a ``ray job submit`` driver finds its job's config (and runtime environment).
JOB_CONFIG_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"


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

    from raydp_synth.log import quiet_ray_loggers, ray_log_level, worker_env

    if not ray.is_initialized():
        options: dict[str, Any] = {"log_to_driver": True, "logging_level": ray_log_level()}
        if os.environ.get("RAY_ADDRESS"):
            # The console's settings reach every process of the job (the Tune trials
            # too) in its runtime environment, less what a submitted job already set
            # (Ray refuses to merge a key set twice). A local cluster inherits them.
            job = json.loads(os.environ.get(JOB_CONFIG_ENV) or "{}")
            taken = set((job.get("runtime_env") or {}).get("env_vars") or {})
            env_vars = {k: v for k, v in worker_env().items() if k not in taken}
            ray.init(runtime_env={"env_vars": env_vars} if env_vars else None, **options)
        else:
            ray.init(num_cpus=num_cpus or os.cpu_count(), **options)
    quiet_ray_loggers()
    return float(ray.cluster_resources().get("CPU", 1.0))
