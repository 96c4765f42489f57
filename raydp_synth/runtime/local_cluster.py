"""A Ray cluster of ``ray start`` on this machine: finding one, and keeping one.

* :func:`running_local_cluster`: the cluster a plain ``ray.init()`` here would join,
  found as Ray finds it. ``ray start`` writes its address to ``ray_current_cluster``
  in Ray's temp folder (``/tmp/ray``, or ``$RAY_TMPDIR/ray``); the file outlives a
  crashed cluster, so the address counts only while a local Ray process still runs
  with it as its ``--gcs-address`` (the test ``ray start`` itself makes).
* :func:`keep_cluster` (``--keep-cluster`` of ``train`` and ``tune``): where there
  is no cluster to join, the command's Ray is a detached ``ray start --head``
  (:func:`start_detached_cluster`) rather than one that ends with the command; at the
  end one line gives its dashboard and the command that stops it.

Authentication stays as Ray sets it for a cluster of ``ray.init``: unless the user
chose ``RAY_AUTH_MODE``, token authentication is on and the token is
``~/.ray/auth_token`` (written if missing), and this process and the ``ray start``
it runs use it.

* :func:`loopback_node`: every local cluster this package starts (``ray.init`` or the
  detached ``ray start --head``) has 127.0.0.1 as its node IP, so that each of its
  ports listens on the loopback interface only. The metrics export port above all:
  Ray binds it to every interface wherever the node IP is not loopback, and it has
  no token (design.md, invariant 15; docs/privacy.md, "The trust boundary").
"""

from __future__ import annotations

import logging
import os
import re
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raydp_synth.errors import ConfigError

__all__ = ["LOOPBACK_SETTINGS", "cluster_processes", "dashboard_url", "keep_cluster",
           "keep_requested", "kept_cluster_line", "loopback_node", "private_token",
           "run_with_cluster", "running_local_cluster", "start_detached_cluster",
           "StoppedCluster", "stop_cluster", "stop_command", "token_path"]

_LOG = logging.getLogger(__name__)

#: Ray's default ports of a ``ray start --head`` whose collision with another local
#: Ray (e.g. a ``ray.init`` in a notebook) would fail the start or lose the
#: dashboard's agent: each is used if free, else any free port.
_PREFERRED_PORTS = {
    "--port": 6379,
    "--dashboard-port": 8265,
    "--ray-client-server-port": 10001,
    "--dashboard-agent-listen-port": 52365,
}

_keep = False  # inside keep_cluster()

#: The environment of a local cluster whose node IP is 127.0.0.1. Ray 2.60 has no
#: setting for the metrics export's host: its reporter agent
#: (``dashboard/modules/reporter/reporter_agent.py``) binds it to 127.0.0.1 where the
#: node IP is loopback and to every interface otherwise, and ``--node-ip-address``
#: (``_node_ip_address``) turns 127.0.0.1 back into the machine's address
#: (``services.resolve_ip_for_localhost``). This switch, off, makes
#: ``services.get_node_ip_address`` return 127.0.0.1 (it exists for macOS and Windows,
#: where it is off by default); on Linux it also stops ``ray start --address`` from
#: adding a node, which a local cluster never does. Ray's GCS, raylet, object manager,
#: dashboard agent, runtime-env agent and workers then listen on 127.0.0.1 too.
LOOPBACK_SETTINGS = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


def running_local_cluster() -> str | None:
    """The GCS address (``host:port``) of the running ``ray start`` cluster that a
    plain ``ray.init()`` on this machine joins, or None."""
    from ray._private import services

    address = services.find_bootstrap_address(None)
    if address and address in services.find_gcs_addresses():
        return str(address)
    return None


def dashboard_url() -> str | None:
    """The dashboard of the cluster this process is connected to (None: no dashboard)."""
    import ray
    from ray._private.worker import get_dashboard_url

    if not ray.is_initialized():
        return None
    url = get_dashboard_url()
    return f"http://{url}" if url and "://" not in url else (url or None)


def loopback_node() -> None:
    """Make the local Ray that this process starts or joins run on 127.0.0.1
    (:data:`LOOPBACK_SETTINGS`): for the processes it starts (``ray start``, and Ray's
    own through ``ray.init``), in the environment; for this process, in Ray's constant
    too, which Ray read when it was imported (perhaps before this call). Call it
    before ``ray.init`` of a local cluster, never for a cluster in ``RAY_ADDRESS``."""
    os.environ.update(LOOPBACK_SETTINGS)
    from ray._private import ray_constants

    ray_constants.ENABLE_RAY_CLUSTER = False


def _port_or_any(preferred: int) -> int:
    """``preferred`` if nothing listens on it, else a free port."""
    for port in (preferred, 0):
        with socket.socket() as probe:
            try:
                probe.bind(("", port))
            except OSError:
                continue
            return int(probe.getsockname()[1])
    raise OSError("no free port")  # pragma: no cover - port 0 always binds


def token_path() -> Path:
    """``~/.ray/auth_token``, where Ray reads and writes its cluster token."""
    return Path.home() / ".ray" / "auth_token"


def private_token() -> None:
    """Ray's token file, private to its user, before a local cluster starts.

    Where token authentication will be on (``RAY_AUTH_MODE`` unset or ``token``) and
    no token is given by the environment or on disk, the token is written here as Ray
    would write it (its own generator: 256 bits), but created with mode 0600 in a
    0700 folder: Ray's own write follows the umask (0644 in a 0755 ``~/.ray`` on a
    stock machine), and whoever reads the token can submit jobs to the user's
    clusters. A token already on disk that others can read gets a one-line warning
    with the fix; it is never changed behind the user's back.
    """
    if os.environ.get("RAY_AUTH_MODE", "token").lower() != "token":
        return
    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return
    path = token_path()
    if not path.exists():
        from ray._private.authentication.authentication_token_generator import (
            generate_new_authentication_token,
        )

        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another command wrote it meanwhile: it stands
            return
        with os.fdopen(fd, "w") as out:
            out.write(generate_new_authentication_token())
        return
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        _LOG.warning(f"{path} can be read by other users of this machine (mode {mode:o}), and "
                     f"its token lets anyone submit jobs to your Ray clusters: chmod 600 {path}")


def _token_auth_as_ray_init_would() -> None:
    """What ``ray.init`` does before it starts a local cluster: token authentication
    on unless ``RAY_AUTH_MODE`` says otherwise, the token written if missing (this
    process's environment then carries the mode to ``ray start`` and to ``ray.init``)."""
    from ray._private.authentication.authentication_token_setup import (
        enable_token_auth_by_default,
        ensure_token_if_auth_enabled,
    )

    enable_token_auth_by_default()
    ensure_token_if_auth_enabled(None, create_token_if_missing=True)


def start_detached_cluster(*, num_cpus: int | None = None) -> str:
    """Start a local ``ray start --head`` that outlives this process.

    It inherits this process's environment (the settings of
    :data:`~raydp_synth.runtime.ray_session.RAY_SETTINGS` included), runs on 127.0.0.1
    (:func:`loopback_node`: its dashboard, metrics export and every other port listen
    there only), and becomes the cluster :func:`running_local_cluster` finds. Returns
    its GCS address.
    """
    private_token()
    _token_auth_as_ray_init_would()
    loopback_node()
    ray_bin = Path(sys.executable).with_name("ray")
    command = [str(ray_bin) if ray_bin.exists() else "ray", "start", "--head",
               f"--num-cpus={num_cpus or os.cpu_count() or 1}", "--dashboard-host=127.0.0.1",
               *(f"{flag}={_port_or_any(port)}" for flag, port in _PREFERRED_PORTS.items())]
    _LOG.debug("starting %s", " ".join(command))
    started = subprocess.run(command, capture_output=True, text=True, timeout=300,
                             stdin=subprocess.DEVNULL)
    address = running_local_cluster()
    if started.returncode != 0 or address is None:
        tail = (started.stdout + started.stderr).strip().splitlines()[-15:]
        raise RuntimeError("`ray start --head` did not start a cluster:\n" + "\n".join(tail))
    return address


def keep_requested() -> bool:
    """Whether the command runs inside :func:`keep_cluster`."""
    return _keep


@contextmanager
def keep_cluster() -> Iterator[None]:
    """``--keep-cluster``: :func:`~raydp_synth.runtime.ray_session.ensure_ray`, called
    inside, runs on a detached ``ray start --head`` where it would have started a
    local Ray, so the cluster (its dashboard, the runs' history) survives the
    command. At the end, if this process is connected to a local ``ray start``
    cluster, prints one line with its dashboard and how to stop it; nothing is
    started, and nothing printed, for a command that stops before it needs Ray."""
    global _keep
    _keep = True
    try:
        yield
    finally:
        _keep = False
        line = kept_cluster_line()
        if line is not None:
            print(line, flush=True)


def kept_cluster_line() -> str | None:
    """``the Ray cluster stays up: dashboard URL; ...; stop it with `ray stop` `` where this
    process is connected to a local ``ray start`` cluster (None otherwise)."""
    if os.environ.get("RAY_ADDRESS") or "ray" not in sys.modules:
        return None
    import ray

    if not ray.is_initialized() or running_local_cluster() is None:
        return None
    url = dashboard_url()
    token = (" (token: ~/.ray/auth_token)"
             if os.environ.get("RAY_AUTH_MODE", "").lower() == "token" else "")
    where = f"dashboard {url}{token}" if url else "no dashboard"
    # Ray's commands (`ray status`) rewrite 127.0.0.1 to this machine's address, where
    # a cluster of loopback_node() does not listen, unless the switch is off for them.
    loopback = " ".join(f"{k}={v}" for k, v in LOOPBACK_SETTINGS.items())
    address = running_local_cluster()
    return (f"the Ray cluster stays up: {where}; it listens on 127.0.0.1 only (Ray's "
            f"commands need {loopback}); stop it (and no other Ray on this machine) with "
            f"`{stop_command(address)}`")


def stop_command(address: str | None) -> str:
    """The command that stops the local cluster at ``address`` only."""
    return "raydp-synth stop-cluster" + (f" --address {address}" if address else "")


_SESSION = re.compile(r"session_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_\d+_\d+")


def cluster_processes(address: str) -> list[Any]:
    """The processes of this user's local Ray cluster whose GCS listens at ``address``
    (``host:port``), as ``psutil.Process``: its GCS server, then every process of its
    session (raylet, dashboard, monitors: their command lines name the session's
    folder) or that names the address (Ray Client's server), and their children (Ray's
    workers and agents rename themselves ``ray::...``). Empty if no GCS listens there."""
    import psutil

    port = address.rpartition(":")[2]
    mine = psutil.Process().username()
    processes = []
    for process in psutil.process_iter(["cmdline", "username"]):
        if process.info["username"] == mine and process.info["cmdline"]:
            processes.append((process, " ".join(process.info["cmdline"])))
    sessions = {match.group(0) for process, line in processes
                if "gcs_server" in line and f"--gcs_server_port={port} " in line + " "
                for match in [_SESSION.search(line)] if match}
    if not sessions:
        return []
    found: dict[int, Any] = {}
    for process, line in processes:
        if any(session in line for session in sessions) or f"--address={address}" in line \
                or f"--gcs-address={address}" in line:
            found[process.pid] = process
            try:
                found.update((child.pid, child) for child in process.children(recursive=True))
            except psutil.Error:
                pass
    found.pop(os.getpid(), None)
    return list(found.values())


@dataclass(frozen=True)
class StoppedCluster:
    """What :func:`stop_cluster` stopped: ``processes`` in all, ``killed`` of them with
    SIGKILL after the grace period (0 when the cluster ended on SIGTERM)."""

    processes: int
    killed: int


def stop_cluster(address: str, *, timeout_s: float = 15.0) -> StoppedCluster:
    """Stop the local Ray cluster at ``address`` and nothing else (``ray stop`` stops
    every Ray of the user on the machine). In ``ray stop``'s order: the raylet first,
    then every other process of the cluster, the GCS server last, each group sent
    SIGTERM and given ``timeout_s`` before SIGKILL. (SIGTERM to all at once left the
    GCS server and the autoscaler's monitor waiting on each other until the SIGKILL:
    15 s; in this order each group is gone in a second or two.)

    Raises:
        ConfigError: no local cluster of this user listens at ``address``.
    """
    import psutil

    processes = cluster_processes(address)
    if not processes:
        raise ConfigError(f"no Ray cluster of yours listens at {address} on this machine "
                          "(`ray status` lists what runs)")
    killed = 0
    for group in _stop_order(processes):
        for process in group:
            try:
                process.terminate()
            except psutil.Error:
                pass
        _, alive = psutil.wait_procs(group, timeout=timeout_s)
        for process in alive:
            try:
                process.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(alive, timeout=timeout_s)
        killed += len(alive)
    return StoppedCluster(processes=len(processes), killed=killed)


def _stop_order(processes: list[Any]) -> list[list[Any]]:
    """``processes`` in the groups ``ray stop`` stops one after the other, told apart by
    process name as ``ray stop`` does: the raylet (whose agents share its fate),
    everything else, the GCS server."""
    import psutil

    def kind(process: Any) -> int:
        try:
            return {"raylet": 0, "gcs_server": 2}.get(process.name(), 1)
        except psutil.Error:
            return 1

    groups: list[list[Any]] = [[], [], []]
    for process in processes:
        groups[kind(process)].append(process)
    return [group for group in groups if group]


def run_with_cluster(keep: bool, run: Callable[[], object]) -> None:
    """``run()``, inside :func:`keep_cluster` if ``keep`` (``--keep-cluster``)."""
    if not keep:
        run()
        return
    with keep_cluster():
        run()
