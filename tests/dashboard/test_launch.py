"""``raydp-synth dashboard``'s launcher without Ray: finding the session, the
commands it runs, its one-line errors, and a real Prometheus started and stopped on
a session folder laid out as Ray lays it out (the test with a running study is in
test_dashboard_browser.py)."""

from __future__ import annotations

import json
import shutil
import socket
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from raydp_synth.dashboard.__main__ import main
from raydp_synth.dashboard.grafana import DASHBOARD_FILE_NAME, dashboard_json
from raydp_synth.dashboard.launch import (
    MetricsSession,
    find_session,
    grafana_command,
    prometheus_command,
    start,
)
from raydp_synth.errors import ConfigError

PROMETHEUS = shutil.which("prometheus")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _session(root: Path, targets: list[str] | None = None) -> Path:
    """A session folder with what Ray's dashboard writes: Prometheus's configuration
    (file service discovery) and Grafana's folders."""
    session = root / "ray" / "session_2026-11-25_00-00-00_000000_1"
    prometheus = session / "metrics" / "prometheus"
    prometheus.mkdir(parents=True)
    discovery = root / "ray" / "prom_metrics_service_discovery.json"
    discovery.write_text(json.dumps([{"labels": {"job": "ray"}, "targets": targets or []}]))
    (prometheus / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "10s", "evaluation_interval": "10s"},
        "scrape_configs": [{"job_name": "ray",
                            "file_sd_configs": [{"files": [str(discovery)]}]}]}))
    (session / "metrics" / "grafana" / "dashboards").mkdir(parents=True)
    (root / "ray" / "session_latest").symlink_to(session)
    return session


def test_the_latest_session_under_ray_tmpdir(tmp_path, monkeypatch):
    session = _session(tmp_path)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    assert find_session().session_dir == session.resolve()
    assert find_session(session).prometheus_config.is_file()


def test_no_session_is_one_line_naming_the_ways_out(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    with pytest.raises(SystemExit) as exit_:
        from raydp_synth.cli import run_cli

        run_cli(main, [])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("error: no Ray session at ") and "ray start --head" in err


def test_a_session_without_metrics_is_refused(tmp_path):
    (tmp_path / "session").mkdir()
    with pytest.raises(ConfigError, match="include-dashboard"):
        find_session(tmp_path / "session")


def test_prometheus_runs_on_a_copy_of_rays_configuration(tmp_path):
    session = MetricsSession(_session(tmp_path))
    before = session.prometheus_config.read_text()
    command = prometheus_command(session, binary="prometheus", host="127.0.0.1", port=9999,
                                 scrape_interval_s=2)
    assert session.prometheus_config.read_text() == before
    ours = Path(command[1].removeprefix("--config.file="))
    config = yaml.safe_load(ours.read_text())
    assert config["global"]["scrape_interval"] == "2s"
    assert config["scrape_configs"] == yaml.safe_load(before)["scrape_configs"]
    assert command[-1] == "--web.listen-address=127.0.0.1:9999"


@pytest.mark.parametrize(("binary", "form"), [
    ("/usr/sbin/grafana", ["server", "--config"]),
    ("/usr/sbin/grafana-server", ["--config"]),
])
def test_grafana_runs_on_rays_ini(tmp_path, binary, form):
    session = MetricsSession(_session(tmp_path))
    command = grafana_command(session, binary=binary, home=Path("/usr/share/grafana"))
    assert command[1:1 + len(form)] == form
    assert str(session.grafana_ini) in command and "/usr/share/grafana" in command
    assert (command[-1] == "web") == binary.endswith("grafana-server")


def test_no_prometheus_is_one_line(tmp_path, monkeypatch):
    session = MetricsSession(_session(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ConfigError, match="apt-get install prometheus"), start(session):
        pass
    assert not (session.grafana_dashboards / DASHBOARD_FILE_NAME).exists()


@pytest.mark.parametrize("interval", [0, -1, 7200])
def test_a_bad_scrape_interval_is_refused(tmp_path, interval):
    with pytest.raises(ConfigError, match="scrape-interval"), start(
            MetricsSession(_session(tmp_path)), scrape_interval_s=interval):
        pass


@pytest.mark.skipif(PROMETHEUS is None, reason="no prometheus program (apt-get install "
                    "prometheus; .ci/run installs it)")
def test_prometheus_starts_answers_and_stops(tmp_path):
    port = _free_port()
    session = MetricsSession(_session(tmp_path, targets=[f"127.0.0.1:{port}"]))
    with start(session, prometheus_port=port, scrape_interval_s=1,
               with_grafana=False) as monitor:
        assert monitor.grafana_url is None
        assert (session.grafana_dashboards / DASHBOARD_FILE_NAME).read_text() == dashboard_json()
        query = urllib.parse.urlencode({"query": "up"})
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/query?{query}") as reply:
            assert json.load(reply)["status"] == "success"
        # The port is now taken: a second one says so in one line.
        with pytest.raises(ConfigError, match=f"port {port} .* in use"), start(
                session, prometheus_port=port, with_grafana=False):
            pass
        [process] = monitor.processes.values()
    assert process.poll() is not None  # stopped on exit
