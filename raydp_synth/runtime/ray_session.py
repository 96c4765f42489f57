"""Connecting to Ray: the cluster of ``ray job submit``, a running ``ray start``, or a
local one."""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import raydp_synth
from raydp_synth.log import (
    Verbosity,
    WorkerLogFilter,
    current_verbosity,
    filter_ray_driver_noise,
    quiet_ray_loggers,
    ray_log_level,
    warnings_env,
    worker_env,
)
from raydp_synth.paths import JOB_CONFIG_ENV
from raydp_synth.runtime.local_cluster import (
    keep_requested,
    loopback_node,
    private_token,
    running_local_cluster,
    start_detached_cluster,
)

__all__ = ["ensure_ray", "filter_worker_logs"]

_LOG = logging.getLogger(__name__)

#: Ray settings every process of a run or study gets (a local cluster inherits them
#: from the driver; a cluster in ``RAY_ADDRESS`` receives them in the job's runtime
#: environment). State tracking lists each Ray Train run in Ray's state API (the
#: dashboard's ``/api/train/v2/runs/v1``; Ray 2.60's open-source dashboard has no
#: Train page): Ray Train records a run and its workers only where the process
#: building the trainer (a Tune trial, or the driver of ``train``) has it set.
RAY_SETTINGS: dict[str, str] = {
    "RAY_USAGE_STATS_ENABLED": "0",
    # Train's controller polls workers at this interval; each ray.train.report
    # blocks until the next poll (2 s by default; docs/ray-cluster.md, section 3).
    "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.2",
    "RAY_TRAIN_ENABLE_STATE_TRACKING": "1",
    # Ray Train's own metrics are one series per training run (tag ray_train_run_id)
    # on the unauthenticated metrics export: under random stopping they would count
    # the trials, i.e. tell K (docs/privacy.md, "The trust boundary"). Our gauges say
    # what the operator needs where the strategy allows it.
    "RAY_TRAIN_METRICS_ENABLED": "0",
    # Ctrl-C is a KeyboardInterrupt, not Tune's graceful stop: Tune's handler ends the
    # run and returns its results, after which a study would release the best trial
    # finished so far. The study turns the interrupt into "nothing released; resume
    # with ..." (exit 130); trials stop with the driver, their grants stay charged.
    "TUNE_DISABLE_SIGINT_HANDLER": "1",
    # A trial whose actor died on a node drained for preemption counts as a failure
    # (Tune's default does not count it, so max_failures=0 would still rerun the
    # trial; the accountant would refuse its second grant, so nothing is spent, but
    # the trial is never rerun at all). Ray Train's own preemption retries are off
    # in its FailureConfig (raydp_synth/train/pipeline.py: no_retries).
    "RAY_TRAIN_COUNT_PREEMPTION_AS_FAILURE": "1",
    # Ray Train's per-run preemption watcher (one actor process per run) serves its
    # preemption retries, which no_retries turns off.
    "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0",
}


def ensure_ray(*, num_cpus: int | None = None) -> float:
    """Connect to Ray: the cluster in ``RAY_ADDRESS``; else the running ``ray start``
    cluster of this machine (attached to as it is: its own resources, its dashboard,
    one line saying so); else a local one, started with ``num_cpus`` CPUs (default:
    all), which ends with this process unless the command runs inside
    :func:`~raydp_synth.runtime.local_cluster.keep_cluster` (then it is a detached
    ``ray start --head``, attached to). A local cluster started here runs on 127.0.0.1
    (:func:`~raydp_synth.runtime.local_cluster.loopback_node`): none of its ports,
    the unauthenticated metrics export included, is reachable from another machine.

    Returns:
        The cluster's CPU count.
    """
    for name, value in {**RAY_SETTINGS, **warnings_env()}.items():
        os.environ.setdefault(name, value)  # a local cluster's processes inherit them
    import ray

    if not ray.is_initialized():
        filter_ray_driver_noise()
        with workers_import_this_package():
            _init_ray(num_cpus)
    quiet_ray_loggers()
    filter_worker_logs()
    return float(ray.cluster_resources().get("CPU", 1.0))


def _init_ray(num_cpus: int | None) -> None:
    """:func:`ensure_ray`'s ``ray.init``: the cluster in ``RAY_ADDRESS``, a running
    ``ray start`` one, or a new local one."""
    import ray

    options: dict[str, Any] = {"log_to_driver": True, "logging_level": ray_log_level()}
    if os.environ.get("RAY_ADDRESS"):
        ray.init(runtime_env=_job_runtime_env(), **options)
    else:
        # Before any local ray.init: a cluster it starts runs on 127.0.0.1, and one
        # kept by --keep-cluster (on 127.0.0.1) is joined at 127.0.0.1 (Ray would
        # otherwise rewrite the address to the machine's IP, where nothing listens).
        loopback_node()
        private_token()  # before Ray writes one with the umask's mode
        local = running_local_cluster()
        if local is None and keep_requested():
            local = start_detached_cluster(num_cpus=num_cpus)
        if local is not None:
            # Ray joins it on its own (and then refuses num_cpus): its resources
            # are its own. A user's `ray start` did not inherit our settings: the
            # job carries them.
            context = ray.init(runtime_env=_job_runtime_env(), **options)
            url = context.dashboard_url
            _LOG.info(f"attached to the local Ray cluster at {local} (ray start); "
                      + (f"dashboard: http://{url}" if url else "it has no dashboard"))
        else:
            # "local": a stale address file of a stopped `ray start` is no cluster.
            ray.init(address="local", num_cpus=num_cpus or os.cpu_count(), **options)


@contextlib.contextmanager
def workers_import_this_package() -> Iterator[Path | None]:
    """Stand, for the duration of ``ray.init``, in a folder whose ``raydp_synth`` is this
    package: Ray puts the driver's working folder on every worker's import path
    (``ray._private.worker.connect``: ``py_driver_sys_path``), so a working folder that
    holds another ``raydp_synth`` (the folder above a clone named ``raydp_synth``, where
    ``ray start`` ran for a ``ray job submit``) would shadow an editable install in every
    trial (``module 'raydp_synth' has no attribute ...``). Yields the folder stood in,
    None where the working folder is harmless (nothing is changed)."""
    here = Path.cwd()
    package = Path(raydp_synth.__file__).resolve().parent
    other = here / package.name
    if not other.exists() or other.resolve() == package:
        yield None
        return
    os.chdir(package.parent)
    try:
        yield package.parent
    finally:
        os.chdir(here)


#: The name under which Ray 2.60's driver registers its printer of the worker lines
#: (``ray._private.worker.connect``: ``global_worker_stdstream_dispatcher``'s handler,
#: ``print_to_stdstream``, removed by that name at ``ray.shutdown``).
_RAY_PRINT_HANDLER = "ray_print_logs"


def filter_worker_logs() -> bool:
    """Keep Ray's noise (:data:`raydp_synth.log.RAY_NOISE_LINES`, ``..._TRACEBACKS``)
    off this driver's console at default and quiet verbosity, and Ray's deprecation
    warnings of the driver itself: Ray's printer of its workers' lines is wrapped with
    a :class:`~raydp_synth.log.WorkerLogFilter` (Ray's log files keep every line).
    Nothing with ``--verbose``, nothing twice. Returns whether a filter is in place
    (not with another Ray that has no such printer, e.g. a Ray Client connection)."""
    if current_verbosity() is Verbosity.VERBOSE:
        return False
    import warnings

    from ray.util.annotations import RayDeprecationWarning

    warnings.filterwarnings("ignore", category=RayDeprecationWarning)
    try:
        from ray._private.ray_logging import global_worker_stdstream_dispatcher as dispatcher
    except ImportError:  # Ray moved it: the console is unfiltered, and nothing breaks
        _LOG.debug("Ray's worker log dispatcher is not there: its lines are not filtered")
        return False
    handlers = getattr(dispatcher, "handlers", None)
    lock = getattr(dispatcher, "_lock", None)
    if not isinstance(handlers, list) or lock is None:
        return False
    with lock:
        for i, pair in enumerate(dispatcher.handlers):
            name, handler = pair
            if name != _RAY_PRINT_HANDLER:
                continue
            if getattr(handler, "raydp_synth_filter", False):
                return True
            dispatcher.handlers[i] = (name, _filtered(handler))
            return True
    return False


def _filtered(handler: Any) -> Any:
    noise_filter = WorkerLogFilter()

    def print_filtered(data: dict[str, Any]) -> None:
        try:
            batches = noise_filter(data)
        except Exception:  # noqa: BLE001 - a bug here must not hide a worker's line
            batches = [data]
        for batch in batches:
            handler(batch)

    print_filtered.raydp_synth_filter = True  # type: ignore[attr-defined]
    return print_filtered


def _job_runtime_env() -> dict[str, Any] | None:
    """The runtime environment of a job on a cluster this process did not start: the
    console's and :data:`RAY_SETTINGS`' variables reach every process of the job (the
    Tune trials too), less what a submitted job already set (Ray refuses to merge a
    key set twice). A cluster started here inherits them instead."""
    job = json.loads(os.environ.get(JOB_CONFIG_ENV) or "{}")
    taken = set((job.get("runtime_env") or {}).get("env_vars") or {})
    settings = {k: os.environ[k] for k in RAY_SETTINGS}
    env_vars = {k: v for k, v in {**settings, **warnings_env(), **worker_env()}.items()
                if k not in taken}
    return {"env_vars": env_vars} if env_vars else None
