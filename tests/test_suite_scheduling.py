"""The suite's own scheduling (tests/conftest.py): on pytest-xdist, the Ray tests are
split by module into two groups, each run by one worker on its own Ray temp folder, and
the tests that start no Ray are spread over both workers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent

_RECORD = '''
import json, os, time
from pathlib import Path

def record(kind, name):
    out = Path(os.environ["WHERE_TESTS_RAN"])
    (out / f"{kind}-{name}").write_text(json.dumps(
        [os.environ["PYTEST_XDIST_WORKER"], os.environ.get("RAY_TMPDIR")]))
    time.sleep(0.3)
'''

_RAY_MODULE = '''
import pytest
from record import record

@pytest.mark.parametrize("i", range(4))
@pytest.mark.ray
def test_ray(i):
    record("{module}", i)

@pytest.mark.parametrize("i", range(2))
@pytest.mark.fault
def test_fault(i):
    record("{module}", f"fault{{i}}")
'''

_OTHER_MODULE = '''
import pytest
from record import record

@pytest.mark.parametrize("i", range(12))
def test_other(i):
    record("other", i)
'''


def test_each_ray_module_runs_whole_on_one_worker_with_its_own_ray_folder(
        tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(HERE / "conftest.py", suite / "conftest.py")
    (suite / "record.py").write_text(_RECORD)
    for module in ("ray_a", "ray_b"):
        (suite / f"test_{module}.py").write_text(_RAY_MODULE.format(module=module))
    (suite / "test_other.py").write_text(_OTHER_MODULE)
    (suite / "pytest.ini").write_text("[pytest]\nmarkers =\n    ray\n    slow\n    fault\n")
    where = tmp_path / "where"
    where.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "RAY_TMPDIR"}
    env.update(WHERE_TESTS_RAN=str(where),
               PYTHONPATH=os.pathsep.join(filter(None, [str(HERE.parent), str(suite),
                                                         os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "-p",
                           "no:cacheprovider", str(suite)], cwd=suite, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    ran = {p.name: json.loads(p.read_text()) for p in where.iterdir()}
    assert len(ran) == 24
    worker_of = {module: {w for name, (w, _) in ran.items() if name.startswith(module)}
                 for module in ("ray_a", "ray_b", "other")}
    assert len(worker_of["ray_a"]) == 1 and len(worker_of["ray_b"]) == 1, json.dumps(ran)
    assert worker_of["ray_a"] != worker_of["ray_b"], "the two groups ran on one worker"
    assert worker_of["other"] == {"gw0", "gw1"}, "a worker ran none of the rest"
    folders = {w: folder for w, folder in ran.values()}
    assert len(set(folders.values())) == 2 and None not in folders.values(), folders
    assert all(not Path(folder).exists() for folder in folders.values()), \
        "a worker's Ray folder outlived it"


def test_the_groups_balance_the_tiers_that_run() -> None:
    """A module's time counts the tiers of its selected tests: its CI-tier seconds, its
    ``extended`` seconds, or both; a module with no selected test is in no group."""
    from tests.conftest import EXTENDED_RAY_MODULE_SECONDS, RAY_MODULE_SECONDS, ray_groups

    faults = "tests/faults/test_study_faults.py"
    big = max(RAY_MODULE_SECONDS, key=RAY_MODULE_SECONDS.get)
    assert EXTENDED_RAY_MODULE_SECONDS[faults] > RAY_MODULE_SECONDS[big]
    ci = [f"{faults}::test_ci", f"{big}::test_ci"]
    # The CI tier: the fault module's CI seconds are under the largest module's.
    groups = ray_groups(ci, 2)
    assert groups[ci[1]] == "ray-0" and groups[ci[0]] == "ray-1"
    # Its extended test selected too: the extended seconds count, and it goes first.
    extended = f"{faults}::test_extended"
    groups = ray_groups([*ci, extended], 2, frozenset({extended}))
    assert groups[extended] == groups[ci[0]] == "ray-0" and groups[ci[1]] == "ray-1"
    assert set(ray_groups([ci[1]], 2)) == {ci[1]}
