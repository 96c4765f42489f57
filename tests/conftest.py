"""Shared fixtures and the two test tiers.

* ``ray``: the test starts (or shares) a local Ray cluster. Every test that asks
  for the ``ray_local`` fixture must carry it; a test without it that starts Ray
  fails (:func:`_no_ray_outside_ray_tests`), so ``-m "not ray"`` provably needs
  no Ray cluster.
* ``slow``: the test takes more than a couple of seconds. Every ``ray`` and
  ``fault`` test is ``slow`` too, so the quick tier ``pytest -m "not slow"``
  needs no Ray cluster and runs in about a minute; CI runs everything.

The suite runs on two pytest-xdist workers (``-n 2`` in pyproject.toml; ``-n 0`` runs
it in one process). Every ``ray`` and ``fault`` test goes to one worker, which runs
them in collection order on one session cluster, as a single process would
(:class:`RayTestsOnOneWorker`); the other worker runs the tests that start no Ray
meanwhile. The Ray tests mostly wait (a cluster's start, polling, a killed process's
detection), so the two halves share two cores at little cost. xdist's own
``--dist loadgroup`` cannot do this: with pytest 9.2 it silently ignores its groups
(pytest-xdist issue 1386). A Ray test on a second worker fails loudly
(:func:`_one_worker_runs_ray`).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from raydp_synth.runtime.ray_session import RAY_SETTINGS

#: The unit of work (on pytest-xdist) of every test that starts Ray or kills a part of
#: it: one worker runs them all, so no two Ray clusters of the suite run at once.
RAY_GROUP = "ray"

# The settings of every run and study (state tracking for the dashboard's Train page
# included) hold for the test session's cluster too.
for _name, _value in RAY_SETTINGS.items():
    os.environ.setdefault(_name, _value)


#: The controller's folder for what its workers tell it (``workerinput`` key).
_SHARED_DIR = "raydp_synth_shared_dir"


def _starts_ray(item: pytest.Item) -> bool:
    return bool(item.get_closest_marker("ray") or item.get_closest_marker("fault"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse a ``ray_local`` test without the ``ray`` marker; make ``ray``/``fault`` tests
    slow; on an xdist worker, write their node ids for the controller's scheduler."""
    unmarked = [item.nodeid for item in items
                if "ray_local" in getattr(item, "fixturenames", ())
                and item.get_closest_marker("ray") is None]
    if unmarked:
        raise pytest.UsageError("tests using the ray_local fixture must be marked "
                                f"@pytest.mark.ray: {', '.join(unmarked)}")
    for item in items:
        if _starts_ray(item):
            item.add_marker(pytest.mark.slow)
    shared = getattr(config, "workerinput", {}).get(_SHARED_DIR)
    if shared is not None:
        worker = config.workerinput["workerid"]
        ray_ids = [item.nodeid for item in items if _starts_ray(item)]
        written = Path(shared) / f"ray-tests.{worker}.json.tmp"
        written.write_text(json.dumps(ray_ids))
        written.replace(written.with_suffix(""))  # before the worker reports its collection


def pytest_configure(config: pytest.Config) -> None:
    """On the xdist controller, schedule the Ray tests onto one worker; on a worker,
    compute on one torch thread (:func:`_one_torch_thread_per_worker`)."""
    if (not hasattr(config, "workerinput") and config.pluginmanager.hasplugin("xdist")
            and config.getoption("dist", "no") != "no"):
        config.pluginmanager.register(RayTestsOnOneWorker(), "raydp_synth_ray_tests")
    if hasattr(config, "workerinput"):
        _one_torch_thread_per_worker()


def _one_torch_thread_per_worker() -> None:
    """Two xdist workers share CI's two cores: each computes on one torch thread.

    The Ray tests' worker is the suite's critical path: its tests run one after
    another for the whole run (21 minutes), while the other worker's take about 8.
    With torch's default of a thread per core, that worker's two threads and the Ray
    side's processes (the driver's evaluation, the Ray actors, the accountant's
    pricing) asked for three or more cores of two, and Ray tests ran up to four times
    slower than alone. With this, and shorter fault studies, the suite took 21.4
    minutes instead of 25.5 (the Ray tests 1,263 s instead of 1,504, the other
    worker's 507 instead of 580). The Ray actors set their own threads
    (``threads_per_worker``); ``-n 0`` keeps torch's default.
    """
    import torch

    torch.set_num_threads(1)


class RayTestsOnOneWorker:
    """xdist controller plugin: the workers write the node ids of their Ray tests to a
    shared folder as they collect; the scheduler makes them one unit of work, which one
    worker runs in order, and spreads every other test singly over the workers."""

    def __init__(self) -> None:
        self.shared = Path(tempfile.mkdtemp(prefix="raydp-synth-xdist-"))

    def pytest_configure_node(self, node) -> None:
        node.workerinput[_SHARED_DIR] = str(self.shared)

    def pytest_xdist_make_scheduler(self, config: pytest.Config, log):
        from xdist.scheduler import LoadScopeScheduling

        shared = self.shared

        class RayGroupScheduling(LoadScopeScheduling):
            ray_ids: frozenset[str] | None = None

            def _split_scope(self, nodeid: str) -> str:
                if self.ray_ids is None:
                    written = sorted(shared.glob("ray-tests.*.json"))
                    if len(written) != len(self.nodes):
                        raise RuntimeError(f"{len(written)} of {len(self.nodes)} xdist workers "
                                           f"said which tests start Ray (in {shared})")
                    self.ray_ids = frozenset(json.loads(written[0].read_text()))
                # The largest unit, so xdist hands it out first (--loadscope-reorder).
                return RAY_GROUP if nodeid in self.ray_ids else nodeid

        return RayGroupScheduling(config, log)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        shutil.rmtree(self.shared, ignore_errors=True)


def _ray_is_initialized() -> bool:
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


@pytest.fixture(scope="session")
def _one_worker_runs_ray(request: pytest.FixtureRequest):
    """Held by the first Ray test of a worker until its session ends: a Ray test on a
    second xdist worker of the same run fails here, before it starts a cluster."""
    shared = getattr(request.config, "workerinput", {}).get(_SHARED_DIR)
    if shared is None:
        yield
        return
    with open(Path(shared) / "ray.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pytest.fail("Ray tests were scheduled on two xdist workers; they must share "
                        "one (tests/conftest.py, RayTestsOnOneWorker)")
        yield


@pytest.fixture(autouse=True)
def _no_ray_outside_ray_tests(request: pytest.FixtureRequest):
    """Fail a test not marked ``ray`` that calls ``ray.init`` or leaves Ray running.

    ``ray.init`` (which Ray's auto-init goes through too) raises inside such a test,
    and the test fails afterwards even if the code under test caught that error.
    """
    if _starts_ray(request.node):
        request.getfixturevalue("_one_worker_runs_ray")
    if request.node.get_closest_marker("ray") is not None:
        yield
        return
    message = f"{request.node.nodeid} starts Ray but is not marked @pytest.mark.ray"
    refused: list[str] = []
    was_initialized = _ray_is_initialized()
    ray = sys.modules.get("ray")
    if ray is None:
        yield
    else:
        def refuse(*args, **kwargs):
            refused.append(message)
            raise AssertionError(message)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(ray, "init", refuse)
            yield
    if not was_initialized and _ray_is_initialized():
        sys.modules["ray"].shutdown()
        refused.append(message)
    if refused:
        pytest.fail(message)


@pytest.fixture(scope="session", autouse=True)
def _empty_torch_hub(tmp_path_factory: pytest.TempPathFactory):
    """No test sees the user's torch hub cache: evaluations find no Inception weights
    unless a test names a file (tests/evaluation/inception_helpers.py)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TORCH_HOME", str(tmp_path_factory.mktemp("torch_home")))
        yield


@pytest.fixture(scope="session")
def ray_local():
    """One real local Ray cluster (2 CPUs) shared by the Ray tests of a session."""
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()
