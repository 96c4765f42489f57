"""A study on a simulated multi-node cluster whose trials span nodes, with a worker
node preempted mid-trial (see :mod:`tests.faults.multinode_study`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.faults.test_study_faults import composed_epsilon

# extended: a second node's start and a preemption; a one-node trial's killed worker
# (test_study_faults.py) runs the same no-retry path in CI.
pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.fault, pytest.mark.extended]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def observed(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("multinode")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-m", "tests.faults.multinode_study", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-4000:])
    return json.loads((out / "observed.json").read_text())


def test_each_trials_two_train_workers_run_on_two_nodes(observed) -> None:
    assert len(observed["pairs"]) >= 2
    for nodes in observed["pairs"]:
        assert len(set(nodes)) == 2, f"a trial's workers shared a node: {nodes}"
    assert len({n for nodes in observed["pairs"] for n in nodes}) >= 2


def test_a_node_preempted_mid_trial_is_not_retried_and_keeps_its_grant(observed) -> None:
    """Ray Train's and Tune's own preemption retries would have rerun the trial's DP
    loop under its one grant, on the spare node; it fails instead."""
    killed = observed["killed"]
    assert killed is not None, "no node was killed"
    assert killed["node"] != observed["head"]
    grants = observed["grants"]
    ids = [g["trial_id"] for g in grants]
    assert len(grants) == 2 and len(set(ids)) == 2  # the killed trial was not rerun
    assert ids[0] == killed["trial"]  # its grant stayed in the ledger
    assert killed["trial"] not in observed["finished"]
    assert observed["finished"] == [ids[1]] and observed["best"] == ids[1]
    assert observed["statement_epsilon"] == pytest.approx(composed_epsilon(grants), rel=1e-9)
    assert observed["statement_epsilon"] <= 6.0
