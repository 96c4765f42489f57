"""A ``ray start --head`` cluster on this machine: ``ensure_ray`` joins it, and
``--keep-cluster`` leaves one up.

Each test's Ray lives in a temp folder of its own (``RAY_TMPDIR``): its address file
(``ray_current_cluster``) is not the user's, so the commands under test find only the
cluster the test started, and the test session's shared Ray (``ray_local``) is never
found. ``ray stop`` would stop every Ray of the user, the session's included: the
tests stop their clusters by ending the processes whose command line names their
temp folder.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from raydp_synth.log import VERBOSITY_ENV, WARNINGS_ENV
from tests.runtime.test_console_noise import assert_a_clean_training_console

pytestmark = [pytest.mark.ray, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
RAY = Path(sys.executable).with_name("ray")
TINY_TRAIN = ["--no-eval", "--epsilon", "4", "--set", "epochs=1", "--set",
              "classifier_epochs=0.2", "--set", "base_width=8", "--synthetic-samples", "20"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _processes_naming(folder: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if folder in (entry / "cmdline").read_bytes().decode(errors="replace"):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def _stop(folder: str) -> None:
    """End the Ray processes of ``folder`` in ``ray stop``'s order (the raylet, the
    rest, the GCS server last; all at once, the GCS waits for a SIGKILL): TERM, then
    KILL to what is left after 5 s."""
    def stage(pid: int) -> int:
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            return 1
        return {"raylet": 0, "gcs_server": 2}.get(name, 1)

    for current in (0, 1, 2):
        for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            pids = [pid for pid in _processes_naming(folder) if stage(pid) == current]
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and any(
                    stage(pid) == current for pid in _processes_naming(folder)):
                time.sleep(0.2)


@pytest.fixture
def ray_home() -> Iterator[tuple[str, dict[str, str]]]:
    """A Ray temp folder of the test's own (short: Unix socket paths), and the
    environment of a user's shell that uses it: no ``RAY_ADDRESS``, no auth mode."""
    folder = tempfile.mkdtemp(prefix="rk", dir="/tmp")
    env = {**os.environ, "RAY_TMPDIR": folder, "PYTHONPATH": str(ROOT),
           "RAY_USAGE_STATS_ENABLED": "0"}
    for name in ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_JOB_CONFIG_JSON_ENV_VAR", VERBOSITY_ENV,
                 "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"):  # the product sets it where it starts Ray
        env.pop(name, None)
    try:
        yield folder, env
    finally:
        _stop(folder)
        shutil.rmtree(folder, ignore_errors=True)


ENSURE_RAY = """
import json, ray
from raydp_synth.log import configure_console
from raydp_synth.runtime.ray_session import ensure_ray
configure_console()
ensure_ray(num_cpus=2)
print("RESOURCES " + json.dumps(ray.cluster_resources()))
"""


def _ensure_ray(env: dict[str, str]) -> tuple[dict[str, float], str]:
    done = subprocess.run([sys.executable, "-c", ENSURE_RAY], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESOURCES "))
    return json.loads(line.removeprefix("RESOURCES ")), output


def test_ensure_ray_attaches_to_a_running_ray_start_cluster(ray_home) -> None:
    folder, env = ray_home
    dash = _free_port()
    start = subprocess.run(
        [str(RAY), "start", "--head", "--num-cpus=1", f"--port={_free_port()}",
         "--dashboard-host=127.0.0.1", f"--dashboard-port={dash}", '--resources={"probe": 1}',
         # Not the default agent ports: the test session's own local Ray may hold them.
         f"--dashboard-agent-listen-port={_free_port()}",
         f"--ray-client-server-port={_free_port()}"],
        env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert start.returncode == 0, (start.stdout + start.stderr)[-4000:]
    address = (Path(folder) / "ray" / "ray_current_cluster").read_text().strip()

    # ensure_ray(num_cpus=2) used to fail here: Ray joins the running cluster on its
    # own and then refuses num_cpus.
    resources, output = _ensure_ray(env)
    assert resources.get("probe") == 1.0 and resources["CPU"] == 1.0, output[-4000:]
    assert (f"[raydp_synth] attached to the local Ray cluster at {address} (ray start); "
            f"dashboard: http://127.0.0.1:{dash}") in output


def test_a_stale_address_file_is_no_cluster(ray_home) -> None:
    """The address of a `ray start` that is gone: a local Ray of its own, as before."""
    folder, env = ray_home
    (Path(folder) / "ray").mkdir()
    (Path(folder) / "ray" / "ray_current_cluster").write_text(f"127.0.0.1:{_free_port()}")
    resources, output = _ensure_ray(env)
    assert resources["CPU"] == 2.0 and "probe" not in resources
    assert "attached" not in output


def test_keep_cluster_leaves_the_cluster_of_a_train_run_up(ray_home, tmp_path) -> None:
    """A tiny ``train dpaf --keep-cluster`` at default verbosity: the cluster stays up,
    the line says how to stop it and the command stops it alone; the same run's
    console is checked for Ray's noise (tests/runtime/test_console_noise.py)."""
    folder, env = ray_home
    env = {k: v for k, v in env.items() if k != WARNINGS_ENV}
    run = subprocess.run(
        [sys.executable, "-m", "raydp_synth.train", "dpaf", *TINY_TRAIN,
         "--out", str(tmp_path / "run"), "--keep-cluster"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400,
        stdin=subprocess.DEVNULL)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-4000:]
    assert_a_clean_training_console(output, run.stdout)
    assert (tmp_path / "run" / "release" / "privacy.json").is_file()
    last = run.stdout.strip().splitlines()[-1]
    assert last.startswith("the Ray cluster stays up: dashboard http://127.0.0.1:"), output[-3000:]
    assert "`ray stop`" not in last  # it would stop every Ray of the user here
    assert last.endswith("; stop it (and no other Ray on this machine) with "
                         "`raydp-synth stop-cluster --address 127.0.0.1:"
                         f"{last.rsplit(':', 1)[1].rstrip('`')}`")
    assert "attached to the local Ray cluster at" in output

    # The driver is gone; the cluster answers (GCS) and serves its dashboard.
    dash = int(last.split("http://127.0.0.1:")[1].split()[0].rstrip(";"))
    with socket.create_connection(("127.0.0.1", dash), timeout=10):
        pass
    address = (Path(folder) / "ray" / "ray_current_cluster").read_text().strip()
    # It runs on 127.0.0.1 only (loopback_node); the line says how Ray's commands reach it.
    assert "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0" in last and address.startswith("127.0.0.1:")
    status = subprocess.run([str(RAY), "status", f"--address={address}"],
                            env={**env, "RAY_AUTH_MODE": "token",
                                 "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}, capture_output=True,
                            text=True, timeout=120)
    assert status.returncode == 0, (status.stdout + status.stderr)[-3000:]
    assert f"/{os.cpu_count()}.0 CPU" in status.stdout, status.stdout[-3000:]

    # The command the line gives stops this cluster and no other (the test session's
    # own Ray, started by the ray_local of other tests, is another cluster).
    command = last.rsplit("with `", 1)[1].rstrip("`").split()
    assert command[:2] == ["raydp-synth", "stop-cluster"] and command[3] == address
    stop = subprocess.run([sys.executable, "-m", "raydp_synth.stop_cluster",
                           *command[2:]], env=env, capture_output=True, text=True, timeout=120)
    assert stop.returncode == 0, (stop.stdout + stop.stderr)[-3000:]
    # Every process ended on SIGTERM, in ray stop's order (raylet, the rest, GCS last):
    # sent to all at once, the GCS and the autoscaler's monitor waited for the SIGKILL.
    assert re.fullmatch(rf"stopped the Ray cluster at {re.escape(address)} \(\d+ processes\)\n",
                        stop.stdout), stop.stdout
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", dash), timeout=5).close()
    again = subprocess.run([sys.executable, "-m", "raydp_synth.stop_cluster",
                            *command[2:]], env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and again.stderr.count("\n") == 1, again.stderr
