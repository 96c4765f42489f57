"""Ray's noise off the console (issue 45, item 6): the lines Ray forwards from its
worker processes that are Ray talking to itself (its deprecation warnings, its C++
core-worker lines, the "Found multiple active Ray instances" tracebacks of Train's
helper actors on a shared host) are dropped at default and quiet verbosity; ours and
real errors are shown; ``--verbose`` shows everything."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections import Counter

from raydp_synth import log as console
from raydp_synth.log import (
    QUIET_WARNINGS,
    VERBOSITY_ENV,
    WARNINGS_ENV,
    RayNoiseRecordFilter,
    WorkerLogFilter,
    filter_ray_driver_noise,
    is_ray_noise,
    warnings_env,
)

DEPRECATION = [
    "/work/main/.venv/lib/python3.11/site-packages/ray/data/_internal/execution/interfaces/"
    "execution_options.py:436: RayDeprecationWarning: `ExecutionOptions.exclude_resources` "
    "is deprecated and will be removed in a future release.",
    "  self.exclude_resources = exclude_resources",
]
CORE_WORKER = (
    "[2026-11-28 10:11:24,493 E 17769 17802] core_worker.cc:2465: Actor with class name: "
    "'PreemptionWatcher' and ID: 'abc' has constructor arguments in the object store and "
    "max_restarts > 0. If the arguments are spilled to disk, they will not be recovered.")
GCS_LINE = ("[2026-11-28 10:11:25,001 W 17769 17790] gcs_rpc_client.h:151: "
            "Failed to connect to GCS")  # a header, not a .cc line: shown
GCS_CC = "[2026-11-28 10:11:25,001 I 17769 17790] gcs_client.cc:60: GcsClient connected"
MULTIPLE = [
    "Exception in thread Thread-2 (_monitor_loop):",
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3.11/threading.py", line 1045, in _bootstrap_inner',
    "    self.run()",
    '  File ".../ray/_private/services.py", line 760, in canonicalize_bootstrap_address',
    "    raise ConnectionError(",
    "ConnectionError: Found multiple active Ray instances: {'10.0.0.1:6379', "
    "'10.0.0.1:6380'}. Please specify the one to connect to by setting the `--address` "
    "flag or `RAY_ADDRESS` environment variable.",
]
STATE_ACTOR = [
    "2026-11-28 10:11:30,100\tERROR state_actor.py:215 -- Failed to poll the runs",
    "Traceback (most recent call last):",
    '  File ".../ray/util/state/api.py", line 160, in __init__',
    "    self._api_server_address = ray_address_to_api_server_url(address)",
    "                               ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    "ConnectionError: Could not reach the API server",
    "",
    "During handling of the above exception, another exception occurred:",
    "",
    "Traceback (most recent call last):",
    '  File ".../ray/_private/services.py", line 760, in canonicalize_bootstrap_address',
    "    raise ConnectionError(",
    "ConnectionError: Found multiple active Ray instances: {'a', 'b'}.",
]
#: A `train` run's controller on a busy 2-core machine (2026-11-29), prefix stripped.
COORDINATOR_TIMEOUT = [
    "Failed to send resource request for train-8532b755849d4da8b32cd1b0a050d532. If this only "
    "happens transiently during network partition or CPU being overloaded, it's safe to "
    "ignore this error. If this error persists, file a GitHub issue.",
    "Traceback (most recent call last):",
    '  File ".../ray/train/v2/_internal/execution/scaling_policy/'
    'autoscaling_coordinator_client.py", line 58, in send_resource_request',
    "    ray.get(",
    '  File ".../ray/_private/worker.py", line 1007, in get_objects',
    "    ] = self.core_worker.get_objects(",
    "        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    '  File "python/ray/_raylet.pyx", line 3471, in ray._raylet.CoreWorker.get_objects',
    '  File "python/ray/includes/common.pxi", line 107, in ray._raylet.check_status',
    "ray.exceptions.GetTimeoutError: Get timed out: some object(s) not ready.",
]
OURS = [
    "[raydp_synth] [dpaf] classifier epoch 1/1: loss 2.30",
    "[raydp_synth] warning: RayDeprecationWarning is not ours, but this line is",
]
OUR_ERROR = [
    "Traceback (most recent call last):",
    '  File "/work/main/raydp_synth/train/worker.py", line 130, in train_loop',
    "    raise ValueError('the data has 3 channels, the model 1')",
    "ValueError: the data has 3 channels, the model 1",
]


def batch(lines: list[str], *, pid: int = 17769, is_err: bool = True) -> dict:
    return {"ip": "127.0.0.1", "pid": pid, "is_err": is_err, "job": "01000000",
            "actor_name": "TrainController", "lines": list(lines)}


def shown(noise_filter: WorkerLogFilter, *batches: dict) -> list[str]:
    return [line for b in batches for out in noise_filter(b) for line in out["lines"]]


def test_ray_noise_lines_are_dropped_and_ours_and_real_errors_pass() -> None:
    lines = [*DEPRECATION, CORE_WORKER, GCS_CC, *OURS, *MULTIPLE, *OUR_ERROR, *STATE_ACTOR,
             GCS_LINE, "plain print of a user function"]
    assert shown(WorkerLogFilter(), batch(lines)) == [
        *OURS, *OUR_ERROR, GCS_LINE, "plain print of a user function"]


def test_single_line_patterns() -> None:
    assert is_ray_noise(DEPRECATION[0]) and is_ray_noise(CORE_WORKER) and is_ray_noise(GCS_CC)
    assert is_ray_noise("2026-11-28 10:11:24,000\tWARNING services.py:443 -- Found multiple "
                        "active Ray instances: {'a', 'b'}. Connecting to latest cluster")
    assert is_ray_noise("Failed to query Ray Train Controller actor state. State API may be "
                        "temporarily unavailable. Continuing to monitor.")
    fatal = CORE_WORKER.replace(" E 17769", " F 17769")
    assert not is_ray_noise(fatal)  # Ray's fatal C++ lines still show
    assert not is_ray_noise(DEPRECATION[1])  # alone, a source line is not noise
    assert not any(is_ray_noise(line) for line in [*OURS, *OUR_ERROR, GCS_LINE])
    # Someone else's deprecation warning (ours, a library's) is not Ray's noise.
    assert not is_ray_noise("/work/main/raydp_synth/x.py:3: DeprecationWarning: old")
    assert is_ray_noise(".../site-packages/ray/tune/x.py:3: DeprecationWarning: old")
    # Each pattern says why it is there.
    assert all(reason for _, reason in console.RAY_NOISE_LINES + console.RAY_NOISE_TRACEBACKS)


def test_only_the_indented_line_after_a_warning_goes_with_it() -> None:
    assert shown(WorkerLogFilter(), batch([DEPRECATION[0], "next line", "  indented"])) == [
        "next line", "  indented"]
    # The source line in the process's next batch (same stream) goes too.
    noise_filter = WorkerLogFilter()
    assert shown(noise_filter, batch(DEPRECATION[:1]), batch(DEPRECATION[1:] + OURS)) == OURS


def test_a_traceback_split_across_batches_is_decided_when_it_ends() -> None:
    clock = [0.0]
    noise_filter = WorkerLogFilter(clock=lambda: clock[0])
    assert shown(noise_filter, batch(MULTIPLE[:3])) == []  # held back
    assert shown(noise_filter, batch(MULTIPLE[3:] + OURS)) == OURS
    assert shown(noise_filter, batch(OUR_ERROR[:2])) == []
    assert shown(noise_filter, batch(OUR_ERROR[2:])) == OUR_ERROR


def test_a_held_traceback_of_a_quiet_process_is_shown_in_time() -> None:
    clock = [0.0]
    noise_filter = WorkerLogFilter(clock=lambda: clock[0])
    assert shown(noise_filter, batch(OUR_ERROR[:2], pid=1)) == []
    clock[0] = 5.0  # the process said nothing more; another process speaks
    assert shown(noise_filter, batch(OURS, pid=2)) == [*OUR_ERROR[:2], *OURS]


def test_streams_and_processes_are_kept_apart() -> None:
    noise_filter = WorkerLogFilter()
    out = noise_filter(batch(MULTIPLE[:2], pid=1))
    assert out == []
    # Another process's batch is not part of process 1's traceback.
    out = noise_filter(batch(["  indented line of pid 2"], pid=2))
    assert [b["lines"] for b in out] == [["  indented line of pid 2"]]
    assert out[0]["pid"] == 2 and out[0]["actor_name"] == "TrainController"
    assert shown(noise_filter, batch(MULTIPLE[2:], pid=1)) == []


def test_the_autoscalers_events_are_not_filtered() -> None:
    events = {"ip": "x", "pid": "autoscaler", "is_err": False, "lines": [CORE_WORKER]}
    assert WorkerLogFilter()(events) == [events]


def test_workers_ignore_deprecation_warnings_unless_verbose(monkeypatch) -> None:
    monkeypatch.delenv(WARNINGS_ENV, raising=False)
    for verbosity, expected in (("default", {WARNINGS_ENV: QUIET_WARNINGS}),
                                ("quiet", {WARNINGS_ENV: QUIET_WARNINGS}), ("verbose", {})):
        monkeypatch.setenv(VERBOSITY_ENV, verbosity)
        assert warnings_env() == expected
    monkeypatch.setenv(WARNINGS_ENV, "error")  # the user's choice is passed on as it is
    assert warnings_env() == {WARNINGS_ENV: "error"}


def test_pythonwarnings_turns_off_rays_deprecation_filter() -> None:
    """Ray shows its deprecation warnings through a filter it adds only where no -W
    option is set; with ours a Ray deprecation in Ray's code is silent."""
    code = ("import warnings, ray.util.annotations as a\n"
            "import ray.data._internal.execution.interfaces.execution_options as m\n"
            "m.ExecutionOptions(exclude_resources=m.ExecutionResources.zero())\n"
            "print('done')\n")
    env = {k: v for k, v in os.environ.items() if k != WARNINGS_ENV}
    plain = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=120)
    quiet = subprocess.run([sys.executable, "-c", code],
                           env={**env, WARNINGS_ENV: QUIET_WARNINGS}, capture_output=True,
                           text=True, timeout=120)
    assert plain.returncode == 0 and quiet.returncode == 0, plain.stderr + quiet.stderr
    assert "RayDeprecationWarning" in plain.stderr  # what a worker printed before
    assert "RayDeprecationWarning" not in quiet.stderr


NOISE = ("RayDeprecationWarning", "core_worker.cc", "Found multiple active Ray instances",
         "self.exclude_resources = exclude_resources", "gcs_client.cc")


def assert_a_clean_training_console(output: str, stdout: str) -> None:
    """The console of a real tiny ``python -m raydp_synth.train dpaf`` at default
    verbosity (its run is test_local_cluster.py's ``--keep-cluster`` run: one run serves
    the console checks here and in tests/runtime/test_console.py, CI's time is the
    suite's). None of Ray's noise reaches its stdout/stderr; our lines do; each of the
    worker's progress lines is shown once (not from its stdout and again from its
    stderr); Ray Train's ``Reporting training result`` lines are not shown; the
    driver's plan and result lines are."""
    assert "[raydp_synth] trained in" in output, output[-4000:]
    assert "(RayTrainWorker pid=" in output  # the workers' own lines still come through
    assert not [line for line in output.splitlines() if any(n in line for n in NOISE)], (
        output[-4000:])
    assert "Reporting training result" not in output
    # "(RayTrainWorker pid=..) [raydp_synth] [dpaf] classifier epoch 1/1: ..."
    progress_lines = [line.split(") ", 1)[-1] for line in output.splitlines()
                      if "[dpaf]" in line and " epoch " in line]
    assert progress_lines, output[-4000:]
    assert Counter(progress_lines).most_common(1)[0][1] == 1, output[-4000:]
    assert "[raydp_synth]   plan epsilon=" in stdout
    assert "release written to" in stdout


def test_the_autoscaling_coordinators_timeout_is_dropped_with_the_line_that_introduces_it(
        ) -> None:
    """Its log line and traceback go; a line of ours before it and an error of ours
    after it stay."""
    lines = [OURS[0], *COORDINATOR_TIMEOUT, *OUR_ERROR]
    assert shown(WorkerLogFilter(), batch(lines)) == [OURS[0], *OUR_ERROR]
    # Split across two batches of the controller's stream, as Ray may forward it.
    noise_filter = WorkerLogFilter()
    assert shown(noise_filter, batch(COORDINATOR_TIMEOUT[:5]),
                 batch(COORDINATOR_TIMEOUT[5:] + [OURS[1]])) == [OURS[1]]


def test_a_line_before_a_noisy_traceback_is_kept_unless_it_introduces_it() -> None:
    # Our exception line right before Ray's traceback, a plain line, then a dropped line.
    lines = [*OUR_ERROR, *MULTIPLE[1:], "plain", DEPRECATION[0], *MULTIPLE[1:]]
    assert shown(WorkerLogFilter(), batch(lines)) == [*OUR_ERROR, "plain"]


def test_rays_own_driver_warning_of_other_clusters_is_dropped_unless_verbose(
        monkeypatch) -> None:
    """ray.init's warning when it joins a `ray start` cluster on a host where other Ray
    clusters run (the --keep-cluster run's attach): dropped by the filter that
    ensure_ray installs on Ray's services logger, shown with --verbose."""
    filter_ray_driver_noise()
    filter_ray_driver_noise()  # once
    services = logging.getLogger("ray._private.services")
    assert sum(isinstance(f, RayNoiseRecordFilter) for f in services.filters) == 1
    record = services.makeRecord(
        services.name, logging.WARNING, __file__, 442,
        "Found multiple active Ray instances: %s. Connecting to latest cluster at %s.",
        ({"127.0.0.1:6379", "10.0.0.1:6380"}, "127.0.0.1:6379"), None)
    other = services.makeRecord(services.name, logging.WARNING, __file__, 1,
                                "Failed to connect to the GCS", (), None)
    for verbosity, shown_noise in (("default", False), ("quiet", False), ("verbose", True)):
        monkeypatch.setenv(VERBOSITY_ENV, verbosity)
        assert bool(services.filter(record)) is shown_noise
        assert services.filter(other)
