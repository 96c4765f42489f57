"""Shared fixtures and the two test tiers.

* ``ray``: the test starts (or shares) a local Ray cluster. Every test that asks
  for the ``ray_local`` fixture must carry it; a test without it that starts Ray
  fails (:func:`_no_ray_outside_ray_tests`), so ``-m "not ray"`` provably needs
  no Ray cluster.
* ``slow``: the test takes more than a couple of seconds. Every ``ray`` and
  ``fault`` test is ``slow`` too, so the quick tier ``pytest -m "not slow"``
  needs no Ray cluster and runs in about a minute; CI runs everything.

The suite runs on two pytest-xdist workers (``-n 2`` in pyproject.toml; ``-n 0`` runs
it in one process). The ``ray`` and ``fault`` tests are split, a whole module at a
time, into two groups of about equal measured time (:data:`RAY_MODULE_SECONDS`); each
group is one unit of work that one worker runs in collection order on its own session
cluster, as a single process would (:class:`RayGroupsOnTheirOwnWorkers`), and the
tests that start no Ray are spread over both workers. The Ray tests mostly wait (a
cluster's start, polling, a killed process's detection), so two groups at once slow
each other less than they gain: the suite took 21m15s against 25m23s with every Ray
test on one worker (the same hour, docs/ray-cluster.md section 6). Each worker's Ray
lives in a temp folder of its own (``RAY_TMPDIR``), so neither worker's commands find
the other's ``ray start`` cluster, and the controller writes Ray's token once, before
the workers start. xdist's own ``--dist loadgroup`` cannot do this: with pytest 9.2 it
silently ignores its groups (pytest-xdist issue 1386). A group's test on a second
worker fails loudly (:func:`_each_ray_group_on_one_worker`).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import IO

import pytest

from raydp_synth.runtime.local_cluster import private_token
from raydp_synth.runtime.ray_session import RAY_SETTINGS

#: How many groups the Ray tests are split into (at most one per xdist worker). Each
#: group's worker runs a session cluster of 2 CPUs; more than two such clusters at once
#: would crowd CI's two cores.
RAY_GROUPS = 2

#: Seconds that each module's ``ray``/``fault`` tests of the CI tier took in the suite
#: on CI's 2-core machine, split as here (two groups at once; the CI tier, 27m45s on
#: 2026-11-29, a day the machine ran 1.27x slower than its idle best), which the split
#: into :data:`RAY_GROUPS` balances; :data:`EXTENDED_RAY_MODULE_SECONDS` holds the
#: ``extended`` tests' seconds (2026-11-29, whole suite). A module not listed counts as
#: :data:`UNLISTED_RAY_MODULE_SECONDS`; add it once measured (``--durations=0``).
RAY_MODULE_SECONDS = {
    "tests/tune/test_interrupt.py": 188,
    "tests/tune/test_study.py": 179,
    "tests/tune/test_job_submit.py": 175,
    "tests/dashboard/test_dashboard_browser.py": 171,
    "tests/accountant/test_actor.py": 158,
    "tests/tune/test_subsampled_study.py": 148,
    "tests/runtime/test_local_cluster.py": 132,  # its --keep-cluster run is the console tests' run too
    "tests/train/test_distributed_noise.py": 114,
    "tests/tune/test_metrics_port.py": 93,
    "tests/faults/test_study_faults.py": 92,
    "tests/tune/test_tune_on_public.py": 92,
    "tests/train/test_public_data_run.py": 89,
    "tests/faults/test_accountant_faults.py": 82,
    "tests/train/test_end_to_end.py": 73,
    "tests/tune/test_resume_checks.py": 71,
    "tests/train/test_empty_class_run.py": 68,
    "tests/train/test_named_dataset_cli.py": 48,
    "tests/tune/test_dp_hypo_study.py": 43,
    "tests/tune/test_toy_strategy.py": 42,  # test_trial_in_process.py's study too
    "tests/train/test_interrupt_train.py": 38,
    "tests/tune/test_gpu_packing.py": 34,
    "tests/train/test_relative_paths.py": 31,
    "tests/train/test_cli_errors.py": 26,
    "tests/tune/test_searcher.py": 9,
    "tests/tune/test_reporter.py": 8,
    "tests/train/test_gpu_resources.py": 6,
}
EXTENDED_RAY_MODULE_SECONDS = {
    "tests/faults/test_study_faults.py": 254,
    "tests/faults/test_multinode.py": 231,
    "tests/train/test_interrupt_train.py": 125,
    "tests/train/test_public_data_run.py": 74,
    "tests/train/test_relative_paths.py": 72,
}
UNLISTED_RAY_MODULE_SECONDS = 40

# The settings of every run and study (state tracking for the dashboard's Train page
# included) hold for the test session's cluster too.
for _name, _value in RAY_SETTINGS.items():
    os.environ.setdefault(_name, _value)


#: The controller's folder for what its workers tell it (``workerinput`` key).
_SHARED_DIR = "raydp_synth_shared_dir"


def _starts_ray(item: pytest.Item) -> bool:
    return bool(item.get_closest_marker("ray") or item.get_closest_marker("fault"))


def _module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def ray_groups(nodeids: list[str], groups: int,
               extended: frozenset[str] = frozenset()) -> dict[str, str]:
    """The Ray group (``ray-0``, ``ray-1``, ...) of each Ray test: whole modules, the
    longest first, each to the group with the least time so far. A module's time is
    that of its tiers that run (:data:`RAY_MODULE_SECONDS` if any of its tests outside
    ``extended``, the ids in ``extended``, runs; :data:`EXTENDED_RAY_MODULE_SECONDS` if
    one of those does). A module stays together, so its module-scoped fixtures (the
    release bundle's study, for one) are built once."""
    tables = {False: RAY_MODULE_SECONDS, True: EXTENDED_RAY_MODULE_SECONDS}
    tiers: dict[str, set[bool]] = {}  # module -> is_extended of its selected tests
    for n in nodeids:
        tiers.setdefault(_module_of(n), set()).add(n in extended)
    seconds = {m: sum(tables[tier].get(m, UNLISTED_RAY_MODULE_SECONDS) for tier in t)
               for m, t in tiers.items()}
    load = [0.0] * max(1, min(groups, len(seconds)))
    group_of: dict[str, str] = {}
    for module in sorted(seconds, key=lambda m: (-seconds[m], m)):
        lightest = min(range(len(load)), key=lambda g: (load[g], g))
        load[lightest] += seconds[module]
        group_of[module] = f"ray-{lightest}"
    return {n: group_of[_module_of(n)] for n in nodeids}


_RAY_GROUP_KEY = pytest.StashKey[str]()


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config,
                                   items: list[pytest.Item]) -> Generator[None, None, None]:
    """Refuse a ``ray_local`` test without the ``ray`` marker; make ``ray``/``fault`` tests
    slow (before ``-m`` deselects: the quick tier leaves them out); then, once ``-m``
    and ``-k`` have deselected, give each selected Ray test its Ray group (the groups
    balance what runs: the CI tier, or ``-m extended``) and, on an xdist worker, write
    the groups for the controller's scheduler."""
    unmarked = [item.nodeid for item in items
                if "ray_local" in getattr(item, "fixturenames", ())
                and item.get_closest_marker("ray") is None]
    if unmarked:
        raise pytest.UsageError("tests using the ray_local fixture must be marked "
                                f"@pytest.mark.ray: {', '.join(unmarked)}")
    for item in items:
        if _starts_ray(item):
            item.add_marker(pytest.mark.slow)
    result = yield
    workerinput = getattr(config, "workerinput", {})
    ray_items = [item for item in items if _starts_ray(item)]
    groups = ray_groups([item.nodeid for item in ray_items],
                        min(RAY_GROUPS, int(workerinput.get("workercount", 1))),
                        frozenset(item.nodeid for item in ray_items
                                  if item.get_closest_marker("extended")))
    for item in ray_items:
        item.stash[_RAY_GROUP_KEY] = groups[item.nodeid]
    shared = workerinput.get(_SHARED_DIR)
    if shared is not None:
        written = Path(shared) / f"ray-groups.{workerinput['workerid']}.json.tmp"
        written.write_text(json.dumps(groups))
        written.replace(written.with_suffix(""))  # before the worker reports its collection
    return result


def pytest_configure(config: pytest.Config) -> None:
    """On the xdist controller, write Ray's token and schedule each Ray group onto one
    worker; on a worker, give Ray a temp folder of the worker's own and compute on one
    torch thread (:func:`_one_torch_thread_per_worker`)."""
    if (not hasattr(config, "workerinput") and config.pluginmanager.hasplugin("xdist")
            and config.getoption("dist", "no") != "no"):
        _one_ray_token_for_every_worker()
        config.pluginmanager.register(RayGroupsOnTheirOwnWorkers(), "raydp_synth_ray_tests")
    if hasattr(config, "workerinput"):
        _ray_temp_folder_of_this_worker(config)
        _one_torch_thread_per_worker()


def _one_ray_token_for_every_worker() -> None:
    """Write Ray's token (``~/.ray/auth_token``) before the workers start, if it is
    missing and token authentication would be on. Otherwise each worker's first
    ``ray.init`` would write a token of its own, and one worker's cluster would refuse
    the token that its commands (``ray job submit``, ``raydp-synth``) read later.

    The product's :func:`~raydp_synth.runtime.local_cluster.private_token` writes it
    (mode 0600 in a 0700 ``~/.ray``): Ray's own ``generate_and_save_token`` follows the
    umask, and a suite run on a fresh machine left a 0644 token that every later
    command warned about. Not the product's ``_token_auth_as_ray_init_would``: that
    also sets ``RAY_AUTH_MODE`` in this process, which every worker would inherit
    before any test runs."""
    private_token()


def _ray_temp_folder_of_this_worker(config: pytest.Config) -> None:
    """``RAY_TMPDIR``: a folder of the worker's own, inside the controller's shared
    folder (which the controller removes at the end). The address file of a ``ray
    start`` that one worker's test makes is then not found by the other worker's
    ``ray.init`` or commands, which would join that cluster instead of their own. The
    shared folder's name is short, so Ray's socket paths stay within the OS's limit."""
    shared = config.workerinput.get(_SHARED_DIR)
    if shared is None:
        return
    folder = Path(shared) / config.workerinput["workerid"]
    folder.mkdir()
    os.environ["RAY_TMPDIR"] = str(folder)


def _one_torch_thread_per_worker() -> None:
    """Two xdist workers share CI's two cores: each computes on one torch thread.

    With torch's default of a thread per core, one worker's two threads and the other's
    Ray processes (the driver's evaluation, the Ray actors, the accountant's pricing)
    asked for three or more cores of two, and Ray tests ran up to four times slower
    than alone. With this, and shorter fault studies, the suite took 21.4 minutes
    instead of 25.5 when one worker ran every Ray test (the Ray tests 1,263 s instead of
    1,504, the other worker's 507 instead of 580). The Ray actors set their own threads
    (``threads_per_worker``); ``-n 0`` keeps torch's default.
    """
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    # NumPy's BLAS too, here and in the Ray processes this worker's clusters start
    # (they inherit the environment): OpenBLAS's thread per core spins while the
    # other worker holds a core (runtime/resources.one_blas_thread has figures).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    threadpool_limits(limits=1, user_api="blas")


class RayGroupsOnTheirOwnWorkers:
    """xdist controller plugin: the workers write each Ray test's group to a shared
    folder as they collect; the scheduler makes each group one unit of work, which one
    worker runs in order, and spreads every other test singly over the workers."""

    def __init__(self) -> None:
        self.shared = Path(tempfile.mkdtemp(prefix="rds-"))

    def pytest_configure_node(self, node) -> None:
        node.workerinput[_SHARED_DIR] = str(self.shared)

    def pytest_xdist_make_scheduler(self, config: pytest.Config, log):
        from xdist.scheduler import LoadScopeScheduling

        shared = self.shared

        class RayGroupScheduling(LoadScopeScheduling):
            group_of: dict[str, str] | None = None

            def _split_scope(self, nodeid: str) -> str:
                if self.group_of is None:
                    written = sorted(shared.glob("ray-groups.*.json"))
                    if len(written) != len(self.nodes):
                        raise RuntimeError(f"{len(written)} of {len(self.nodes)} xdist workers "
                                           f"said which tests start Ray (in {shared})")
                    self.group_of = json.loads(written[0].read_text())
                # The largest units, so xdist hands them out first (--loadscope-reorder).
                return self.group_of.get(nodeid, nodeid)

        return RayGroupScheduling(config, log)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        shutil.rmtree(self.shared, ignore_errors=True)


def _ray_is_initialized() -> bool:
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


@pytest.fixture(scope="session")
def _ray_group_locks(request: pytest.FixtureRequest):
    """The Ray groups this worker runs, each held (a lock in the controller's shared
    folder) until the worker's session ends."""
    held: dict[str, IO[str]] = {}
    yield held
    for lock in held.values():
        lock.close()


def _each_ray_group_on_one_worker(request: pytest.FixtureRequest) -> None:
    """A Ray test whose group another xdist worker of the same run holds fails here,
    before it starts a cluster: two workers must not share a group's order."""
    shared = getattr(request.config, "workerinput", {}).get(_SHARED_DIR)
    if shared is None:
        return
    group = request.node.stash[_RAY_GROUP_KEY]
    held = request.getfixturevalue("_ray_group_locks")
    if group in held:
        return
    lock = open(Path(shared) / f"{group}.lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        pytest.fail(f"the Ray tests of group {group} were scheduled on two xdist workers; "
                    "a group runs on one (tests/conftest.py, RayGroupsOnTheirOwnWorkers)")
    held[group] = lock


@pytest.fixture(autouse=True)
def _no_ray_outside_ray_tests(request: pytest.FixtureRequest):
    """Fail a test not marked ``ray`` that calls ``ray.init`` or leaves Ray running.

    ``ray.init`` (which Ray's auto-init goes through too) raises inside such a test,
    and the test fails afterwards even if the code under test caught that error.
    """
    if _starts_ray(request.node):
        _each_ray_group_on_one_worker(request)
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
