"""Prometheus and Grafana for a Ray session, the way Ray documents them.

Ray's dashboard writes, into each session's folder (``/tmp/ray/session_latest``, or
under ``$RAY_TMPDIR/ray``), a Prometheus configuration that scrapes every node's
metrics agent (``metrics/prometheus/prometheus.yml``, with Ray's service-discovery
file) and a Grafana configuration (``metrics/grafana/grafana.ini``) whose
provisioning loads every dashboard JSON in ``metrics/grafana/dashboards``. Ray's
documentation starts them as::

    prometheus --config.file=/tmp/ray/session_latest/metrics/prometheus/prometheus.yml
    grafana-server --config /tmp/ray/session_latest/metrics/grafana/grafana.ini web

:func:`serve` does that on the head node: it adds raydp_synth's Grafana dashboard
(:mod:`raydp_synth.dashboard.grafana`) to the dashboards folder, starts both
programs on the ports that Ray's dashboard looks at by default (Prometheus 9090,
Grafana 3000: ``RAY_PROMETHEUS_HOST`` and ``RAY_GRAFANA_HOST``, read when the head
starts) and stops them when it is interrupted. It never downloads anything: both
programs are taken from the ``PATH`` (Debian and Ubuntu: ``apt-get install
prometheus``; Grafana from Grafana's own packages). Without Grafana, Prometheus runs
alone (the Ray dashboard's health check and any Grafana elsewhere can use it).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raydp_synth.dashboard.grafana import DASHBOARD_FILE_NAME, DASHBOARD_UID, dashboard_json
from raydp_synth.errors import ConfigError

__all__ = ["DEFAULT_GRAFANA_PORT", "DEFAULT_PROMETHEUS_PORT", "MetricsSession", "Monitor",
           "find_session", "grafana_command", "prometheus_command", "serve", "start"]

_LOG = logging.getLogger(__name__)

#: The ports at which Ray's dashboard looks for them unless told otherwise.
DEFAULT_PROMETHEUS_PORT = 9090
DEFAULT_GRAFANA_PORT = 3000
#: Where Grafana's packages put its home (``--homepath``).
GRAFANA_HOMES = (Path("/usr/share/grafana"), Path("/usr/local/share/grafana"))
READY_TIMEOUT_S = 60.0
PROMETHEUS_INSTALL = ("install Prometheus (Debian/Ubuntu: apt-get install prometheus; "
                      "elsewhere the release from prometheus.io) or pass --prometheus PATH")
GRAFANA_INSTALL = ("install Grafana (its packages at grafana.com/grafana/download) or pass "
                   "--grafana PATH; --no-grafana runs Prometheus alone")


@dataclass(frozen=True)
class MetricsSession:
    """The metrics folders of one Ray session (what Ray's dashboard wrote)."""

    session_dir: Path

    @property
    def metrics(self) -> Path:
        return self.session_dir / "metrics"

    @property
    def prometheus_config(self) -> Path:
        """Ray's Prometheus configuration (scrapes the nodes' metrics agents)."""
        return self.metrics / "prometheus" / "prometheus.yml"

    @property
    def grafana_ini(self) -> Path:
        return self.metrics / "grafana" / "grafana.ini"

    @property
    def grafana_dashboards(self) -> Path:
        """The folder whose JSON files Grafana's provisioning (Ray's) loads."""
        return self.metrics / "grafana" / "dashboards"

    @property
    def logs(self) -> Path:
        return self.session_dir / "logs"


def find_session(session_dir: Path | None = None) -> MetricsSession:
    """The Ray session whose metrics to serve: ``session_dir``, else this machine's
    latest (``session_latest`` in Ray's temp folder, as ``ray start`` leaves it).

    Raises:
        ConfigError: no such session, or one without Ray's metrics configuration
            (a cluster started without its dashboard).
    """
    if session_dir is None:
        system_tmp = os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp"
        session_dir = Path(system_tmp) / "ray" / "session_latest"
        hint = ("start Ray on this machine first (ray start --head, or raydp-synth tune ... "
                "--keep-cluster), or pass --session-dir")
    else:
        hint = "pass the folder of a Ray session (e.g. /tmp/ray/session_latest)"
    session_dir = session_dir.expanduser()
    if not session_dir.is_dir():
        raise ConfigError(f"no Ray session at {session_dir}: {hint}")
    session = MetricsSession(session_dir.resolve())
    if not session.prometheus_config.is_file():
        raise ConfigError(f"the Ray session {session.session_dir} has no metrics configuration "
                          f"({session.prometheus_config} is missing): its head runs without the "
                          "dashboard; start it with the dashboard (ray start --head "
                          "--include-dashboard=true)")
    return session


def install_dashboard(session: MetricsSession) -> Path:
    """Add raydp_synth's dashboard to those Grafana loads for ``session``; its path."""
    session.grafana_dashboards.mkdir(parents=True, exist_ok=True)
    path = session.grafana_dashboards / DASHBOARD_FILE_NAME
    path.write_text(dashboard_json())
    return path


def _binary(explicit: str | None, names: tuple[str, ...]) -> str | None:
    if explicit:
        found = shutil.which(explicit)
        if found is None:
            raise ConfigError(f"{explicit} is not an executable program")
        return found
    return next((found for name in names if (found := shutil.which(name))), None)


def prometheus_command(session: MetricsSession, *, binary: str, host: str, port: int,
                       scrape_interval_s: float) -> list[str]:
    """Prometheus on Ray's configuration, at ``scrape_interval_s`` (written as
    ``metrics/prometheus/raydp_synth_prometheus.yml`` beside Ray's; Ray's file is not
    changed), its data in ``metrics/prometheus/data``."""
    import yaml

    config = yaml.safe_load(session.prometheus_config.read_text()) or {}
    interval = f"{scrape_interval_s:g}s"
    config.setdefault("global", {}).update(scrape_interval=interval, evaluation_interval=interval)
    ours = session.prometheus_config.with_name("raydp_synth_prometheus.yml")
    ours.write_text(yaml.safe_dump(config, sort_keys=False))
    return [binary, f"--config.file={ours}",
            f"--storage.tsdb.path={session.prometheus_config.parent / 'data'}",
            f"--web.listen-address={host}:{port}"]


def grafana_command(session: MetricsSession, *, binary: str,
                    home: Path) -> list[str]:
    """Grafana on Ray's ``grafana.ini`` (``grafana server`` for the current single
    binary, ``grafana-server ... web`` for the older one)."""
    args = ["--config", str(session.grafana_ini), "--homepath", str(home)]
    if Path(binary).name == "grafana":
        return [binary, "server", *args]
    return [binary, *args, "web"]


def _grafana_home(explicit: Path | None, binary: str) -> Path:
    candidates = [explicit] if explicit else [*GRAFANA_HOMES, Path(binary).resolve().parents[1]]
    for home in candidates:
        if home is not None and (home / "conf" / "defaults.ini").is_file():
            return home
    raise ConfigError(f"no Grafana home (a folder with conf/defaults.ini) at "
                      f"{', '.join(str(c) for c in candidates)}: pass --grafana-home")


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def _url(host: str, port: int) -> str:
    shown = "localhost" if host in ("0.0.0.0", "127.0.0.1", "") else host
    return f"http://{shown}:{port}"


def _wait_ready(process: subprocess.Popen[bytes], url: str, what: str, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.is_file() else []
            raise ConfigError(f"{what} exited at start (code {process.returncode})"
                              + (f": {tail[0]}" if tail else "") + f"; its log: {log}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    raise ConfigError(f"{what} did not answer at {url} within {READY_TIMEOUT_S:.0f} s; its "
                      f"log: {log}")


@dataclass
class Monitor:
    """What :func:`start` started: the programs, and where they answer."""

    prometheus_url: str
    grafana_url: str | None
    dashboard_file: Path
    processes: dict[str, subprocess.Popen[bytes]]
    #: Both on the ports where Ray's dashboard looks unless told otherwise.
    default_ports: bool


def _launch(command: list[str], log: Path, env: dict[str, str] | None = None
            ) -> subprocess.Popen[bytes]:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, start_new_session=True)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


@contextmanager
def start(session: MetricsSession, *, host: str = "127.0.0.1",
          prometheus_port: int = DEFAULT_PROMETHEUS_PORT,
          grafana_port: int = DEFAULT_GRAFANA_PORT, scrape_interval_s: float = 10.0,
          prometheus: str | None = None, grafana: str | None = None,
          grafana_home: Path | None = None, with_grafana: bool = True) -> Iterator[Monitor]:
    """Start Prometheus (and Grafana) for ``session``; stop them on exit.

    Raises:
        ConfigError: no Prometheus (or, with an explicit ``grafana``, no Grafana), a
            port in use, a program that exits at start or does not answer.
    """
    if not 0 < scrape_interval_s <= 3600:
        raise ConfigError(f"--scrape-interval {scrape_interval_s:g} must be in (0, 3600] s")
    prometheus_binary = _binary(prometheus, ("prometheus",))
    if prometheus_binary is None:
        raise ConfigError(f"no prometheus program on the PATH: {PROMETHEUS_INSTALL}")
    grafana_binary = _binary(grafana, ("grafana", "grafana-server")) if with_grafana else None
    if with_grafana and grafana_binary is None:
        _LOG.warning(f"no Grafana on the PATH, Prometheus only: {GRAFANA_INSTALL}")
    home = _grafana_home(grafana_home, grafana_binary) if grafana_binary else None
    for port, what, flag in ((prometheus_port, "Prometheus", "--prometheus-port"),
                             (grafana_port, "Grafana", "--grafana-port")):
        if (what == "Prometheus" or grafana_binary) and not _port_free(host, port):
            raise ConfigError(f"port {port} on {host} is in use (another {what}?): stop it, or "
                              f"pass {flag} with a free port")
    dashboard_file = install_dashboard(session)
    with ExitStack() as stack:
        log = session.logs / "raydp_synth_prometheus.log"
        process = _launch(prometheus_command(session, binary=prometheus_binary, host=host,
                                             port=prometheus_port,
                                             scrape_interval_s=scrape_interval_s), log)
        stack.callback(_stop, process)
        processes = {"Prometheus": process}
        prometheus_url = _url(host, prometheus_port)
        _wait_ready(process, f"http://{host or '127.0.0.1'}:{prometheus_port}/-/ready",
                    "Prometheus", log)
        grafana_url = None
        if grafana_binary and home:
            log = session.logs / "raydp_synth_grafana.log"
            env = {**os.environ, "GF_SERVER_HTTP_PORT": str(grafana_port),
                   "GF_SERVER_HTTP_ADDR": host,
                   # Its database and logs in the session, not under its (read-only) home.
                   "GF_PATHS_DATA": str(session.metrics / "grafana" / "data"),
                   "GF_PATHS_LOGS": str(session.logs)}
            process = _launch(grafana_command(session, binary=grafana_binary, home=home), log,
                              env)
            stack.callback(_stop, process)
            processes["Grafana"] = process
            grafana_url = _url(host, grafana_port)
            _wait_ready(process, f"http://{host or '127.0.0.1'}:{grafana_port}/api/health",
                        "Grafana", log)
        yield Monitor(prometheus_url, grafana_url, dashboard_file, processes,
                      default_ports=(prometheus_port, grafana_port) == (
                          DEFAULT_PROMETHEUS_PORT, DEFAULT_GRAFANA_PORT))


def serve(session: MetricsSession, **options: Any) -> None:
    """:func:`start`, print where everything is, and wait until interrupted (or until
    a program exits)."""
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        with start(session, **options) as monitor:
            print(f"Prometheus: {monitor.prometheus_url} (scraping the Ray session "
                  f"{session.session_dir.name})")
            if monitor.grafana_url:
                print(f"Grafana: {monitor.grafana_url}/d/{DASHBOARD_UID} (the budget and "
                      "trials), Ray's own dashboards in its Ray folder")
            print(f"Grafana dashboard file: {monitor.dashboard_file}")
            if not monitor.default_ports:
                print(f"the Ray dashboard finds them if its head was started with "
                      f"RAY_PROMETHEUS_HOST={monitor.prometheus_url}"
                      + (f" RAY_GRAFANA_HOST={monitor.grafana_url}" if monitor.grafana_url else ""))
            print("Ctrl-C stops them")
            try:
                while not stopping and all(p.poll() is None
                                           for p in monitor.processes.values()):
                    time.sleep(0.5)
            except KeyboardInterrupt:
                pass
            ended = [(name, p) for name, p in monitor.processes.items() if p.poll() is not None]
            if ended and not stopping:
                name, process = ended[0]
                raise ConfigError(f"{name} exited (code {process.returncode}); its log is in "
                                  f"{session.logs}")
    finally:
        signal.signal(signal.SIGTERM, previous)
