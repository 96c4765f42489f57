"""``ray job submit -- python -m raydp_synth.tune`` against a local head started here.

Ray 2.60's token authentication stays on, as a user should run it: head, client and
job share ``RAY_AUTH_MODE=token`` and ``~/.ray/auth_token``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
TINY = Path(__file__).with_name("tiny_dpaf.yaml")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_dashboard(port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"no dashboard on port {port}")


@pytest.fixture(scope="module")
def head():
    """A Ray head of its own (stopped through its own process group, not `ray stop`,
    which would stop every Ray of this user, the test session's included)."""
    ray_bin = Path(sys.executable).with_name("ray")
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_USAGE_STATS_ENABLED": "0"}
    dash = _free_port()
    temp = tempfile.mkdtemp(prefix="rh", dir="/tmp")  # Unix socket paths must stay short
    proc = subprocess.Popen(
        [str(ray_bin), "start", "--head", "--block", f"--port={_free_port()}",
         "--dashboard-host=127.0.0.1", f"--dashboard-port={dash}", "--num-cpus=2",
         # Not the default agent ports: the test session's own local Ray holds them.
         f"--dashboard-agent-listen-port={_free_port()}",
         f"--dashboard-agent-grpc-port={_free_port()}",
         f"--runtime-env-agent-port={_free_port()}", f"--metrics-export-port={_free_port()}",
         "--include-dashboard=true", f"--temp-dir={temp}"],
        env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_dashboard(dash)
        yield f"http://127.0.0.1:{dash}", env, ray_bin
    finally:
        proc.terminate()  # `ray start --block` stops the processes it started
        try:
            proc.wait(timeout=60)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            shutil.rmtree(temp, ignore_errors=True)


def test_study_runs_as_a_ray_job_with_token_auth(head, tmp_path) -> None:
    address, env, ray_bin = head
    storage = tmp_path / "studies"
    # The job runs from the repository (an editable install here), with this
    # interpreter: on a cluster, `python` is the cluster's environment. One trial and
    # a small release: what is checked is the job's run under token authentication
    # (the search itself is tests/tune/test_study.py's).
    command = [str(ray_bin), "job", "submit", "--address", address, "--",
               sys.executable, "-m", "raydp_synth.tune", "dpaf", "--epsilon", "4",
               "--trials", "1", "--search-space", str(TINY), "--storage", str(storage),
               "--name", "job", "--no-eval", "--synthetic-samples", "20", "--set", "epochs=1"]
    for _ in range(30):  # the head's job agent comes up a little after the dashboard
        submit = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True,
                                timeout=500)
        if "No available agent" not in submit.stdout + submit.stderr:
            break
        time.sleep(2)
    assert submit.returncode == 0, submit.stdout[-3000:] + submit.stderr[-3000:]
    assert "succeeded" in submit.stdout
    statement = json.loads((storage / "job" / "release" / "privacy.json").read_text())
    assert statement["details"]["study"]["mode"] == "compose" and statement["epsilon"] <= 4.0


def test_without_the_token_mode_the_client_is_refused(head) -> None:
    address, env, ray_bin = head
    env = {k: v for k, v in env.items() if k != "RAY_AUTH_MODE"}
    listing = subprocess.run([str(ray_bin), "job", "list", "--address", address], env=env,
                             capture_output=True, text=True, timeout=120)
    assert listing.returncode != 0
    assert "authentication" in (listing.stdout + listing.stderr).lower()
