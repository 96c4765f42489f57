"""Ray's metrics export port during a random-stopping study (design.md, invariant 15).

The port has no token: whoever reaches it reads every gauge. The study here is the
real CLI (``python -m raydp_synth.tune``) on a local cluster that it starts itself
(``ensure_ray``), in a Ray temp folder of the test's own, while the test reads the
node's metrics endpoint (its port from the session's port file) over HTTP. Under
random stopping nothing that counts the trials or gives a trial's result may appear
there: no ``trials_granted``/``trials_refused``, no per-trial series; and the port
listens on 127.0.0.1 only. The same study's ledger and statement are checked too
(repeat-and-select of the reference plan, tests/tune/test_study.py).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.runtime.test_local_cluster import ray_home  # noqa: F401 (the fixture)
from tests.tune.test_study import (
    check_random_stopping_prices_repeat_and_select_of_the_reference_plan,
    tiny_without_split,
)

pytestmark = [pytest.mark.ray, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
#: Substrings that must never be on the port while a random-stopping study runs.
FORBIDDEN = ("raydp_synth_trials_granted", "raydp_synth_trials_refused",
             "raydp_synth_trial_metric", "raydp_synth_epsilon")
LOOPBACK = {"127.0.0.1", "::ffff:127.0.0.1", "::1"}


def _machine_ip() -> str | None:
    """This machine's address on its default route (no packet is sent), or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
            ip = str(probe.getsockname()[0])
        except OSError:
            return None
    return None if ip.startswith("127.") else ip


def _metrics_port(folder: str) -> int | None:
    files = list((Path(folder) / "ray" / "session_latest").glob("metrics_export_port_*"))
    try:
        return int(files[0].read_text().strip()) if files else None
    except ValueError:  # being written
        return None


def _scrape(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            return str(reply.read().decode())
    except OSError:
        return None


def _listening_addresses(port: int) -> set[str]:
    """The local addresses of the TCP sockets listening on ``port`` (from the kernel's
    tables: /proc/net/tcp, tcp6; state 0A is LISTEN)."""
    found: set[str] = set()
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        path = Path("/proc/net") / table
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            hex_ip, hex_port = local.split(":")
            if state != "0A" or int(hex_port, 16) != port:
                continue
            raw = bytes.fromhex(hex_ip)
            # the kernel prints each 32-bit word in host (little-endian) order
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            ip = socket.inet_ntop(family, raw)
            found.add(ip.removeprefix("::ffff:") if family == socket.AF_INET6 else ip)
    return found


def test_random_stopping_study_exports_no_trial_count_on_a_loopback_metrics_port(
        ray_home, tmp_path) -> None:  # noqa: F811 (the imported fixture)
    folder, env = ray_home
    storage, name = tmp_path / "studies", "metrics-port"
    study = storage / name
    command = [sys.executable, "-m", "raydp_synth.tune", "dpaf", "--epsilon", "5",
               "--strategy", "random-stopping", "--sampler", "random", "--trials", "1",
               # geometric with mean 1 draws K = 1 surely; Poisson's K = 0 (probability
               # 1/e) would run no trial and release nothing
               "--distribution", "geometric",
               "--search-space", str(tiny_without_split(tmp_path)), "--storage", str(storage),
               "--name", name, "--no-eval", "--synthetic-samples", "20"]
    log = tmp_path / "study.log"
    with log.open("w") as out:
        proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    during: list[str] = []  # scrapes while a granted trial runs, before the release
    addresses: set[str] = set()
    refused_remotely: bool | None = None
    try:
        deadline = time.monotonic() + 540
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(1.0)
            port = _metrics_port(folder)
            if port is None:
                continue
            if not addresses:
                addresses = _listening_addresses(port)
            ip = _machine_ip()
            if refused_remotely is None and ip is not None and addresses:
                try:
                    with socket.create_connection((ip, port), timeout=3):
                        refused_remotely = False
                except OSError:
                    refused_remotely = True
            text = _scrape(port)
            released = (study / "release").exists()
            ledger = study / "ledger.jsonl"
            granted = ledger.exists() and '"kind":"grant"' in ledger.read_text()
            if text is not None and granted and not released:
                during.append(text)
        assert proc.wait(timeout=max(1.0, deadline - time.monotonic())) == 0, \
            log.read_text()[-4000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)

    assert (study / "release" / "privacy.json").is_file(), log.read_text()[-3000:]
    # The endpoint was live while a trial ran: Ray's own node metrics were there.
    assert during, "no scrape while a granted trial ran"
    assert any("\nray_" in text for text in during), "the endpoint exported nothing at all"
    for text in during:
        leaked = [line for line in text.splitlines() if any(f in line for f in FORBIDDEN)]
        assert not leaked, leaked[:5]
    assert addresses and addresses <= LOOPBACK, addresses
    if _machine_ip() is not None:
        assert refused_remotely is True, "the metrics port answers on the machine's address"
    # The same study's pricing (tests/tune/test_study.py): one study serves both.
    check_random_stopping_prices_repeat_and_select_of_the_reference_plan(study, epsilon=5.0)
