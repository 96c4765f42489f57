"""The suite's own scheduling (tests/conftest.py): on pytest-xdist, every Ray test runs
on one worker, so no two of the suite's Ray clusters run at once."""

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

_TESTS = '''
import json, os, time
from pathlib import Path
import pytest

def _record(kind, name):
    out = Path(os.environ["WHERE_TESTS_RAN"])
    (out / f"{kind}-{name}").write_text(os.environ["PYTEST_XDIST_WORKER"])
    time.sleep(0.3)

@pytest.mark.parametrize("i", range(6))
@pytest.mark.ray
def test_ray(i):
    _record("ray", i)

@pytest.mark.parametrize("i", range(6))
@pytest.mark.fault
def test_fault(i):
    _record("ray", f"fault{i}")

@pytest.mark.parametrize("i", range(12))
def test_other(i):
    _record("other", i)
'''


def test_ray_and_fault_tests_run_on_one_worker_and_the_rest_on_both(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(HERE / "conftest.py", suite / "conftest.py")
    (suite / "test_mixed.py").write_text(_TESTS)
    (suite / "pytest.ini").write_text("[pytest]\nmarkers =\n    ray\n    slow\n    fault\n")
    where = tmp_path / "where"
    where.mkdir()
    env = {**os.environ, "WHERE_TESTS_RAN": str(where),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE.parent),
                                                        os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "-p",
                           "no:cacheprovider", str(suite)], cwd=suite, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    ran = {p.name: p.read_text() for p in where.iterdir()}
    assert len(ran) == 24
    ray_workers = {w for name, w in ran.items() if name.startswith("ray-")}
    assert len(ray_workers) == 1, json.dumps(ran)
    assert {w for name, w in ran.items() if name.startswith("other-")} - ray_workers, \
        "the other worker ran none of the rest"
