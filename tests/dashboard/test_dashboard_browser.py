"""The Ray dashboard in a real browser (headless Chromium) while a study runs.

A 2-trial study with 2 Ray Train workers per trial (so each trial is a Ray Train
run: a 1-worker trial runs its loop in the trial's own process) starts as its own
command, with its own local Ray cluster and Ray 2.60's token authentication on.
The browser signs in with the token through the dashboard's own dialog, then the
test checks what a user would look for:

* the Jobs page lists the study's driver (``raydp_synth.tune``) as running;
* the Actors page lists the Tune trial (``run_trial``) and the Ray Train run it
  started: its ``TrainController`` and ``RayTrainWorker`` actors;
* Ray Train's state API, ``/api/train/v2/runs/v1`` (what the dashboard serves
  for Train runs, filled because every study sets ``RAY_TRAIN_ENABLE_STATE_TRACKING``;
  the open-source dashboard UI of Ray 2.60 has no Train page of its own), opened in
  the same signed-in browser, lists the trial's run as running, in the study's job.

A submitted job's page on the Jobs tab (each trial's score and epsilon and the study's
budget in its driver log) is read by tests/tune/test_job_submit.py, on the job it
submits anyway. The study is stopped once the checks pass: it runs long epochs only so that it is
still running while the page is read. The Actors page's screenshot is kept under
the test's tmp_path; ``RAYDP_DASHBOARD_SCREENSHOT=docs/images/dashboard_train.png``
writes it there instead (how the image in docs/ray-cluster.md, section 5, was made).

Needs ``/usr/bin/chromium`` (Debian's ``chromium`` package) and the ``playwright``
package (the dev extra); never ``playwright install``, which downloads a browser.
``.ci/run`` installs both, so CI never skips this test.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.dashboard.browser import CHROMIUM, dashboard_page

pytestmark = [pytest.mark.ray, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "tune" / "tiny_dpaf.yaml"
#: Ray prints this line (at INFO, hence the study's --verbose) when its local cluster
#: is up; the port is the first free one from 8265 on.
DASHBOARD_LINE = re.compile(r"View the dashboard at \S*?(http://[\w.\-]+:\d+)")
DEADLINE_S = 150  # under the load of a shared 2-core machine; about 60 s when idle

playwright_sync = pytest.importorskip(
    "playwright.sync_api", reason="the playwright package is not installed (pip install "
    "-e '.[dev]')")
if not CHROMIUM.is_file():
    pytest.skip("no /usr/bin/chromium (apt-get install chromium; .ci/run installs it)",
                allow_module_level=True)


@dataclass
class Study:
    dashboard: str
    token: str
    name: str
    process: subprocess.Popen[bytes]
    log: Path
    env: dict[str, str]
    prometheus_port: int

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop the study and the local Ray cluster it started (its own session)."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)  # Tune stops its trials, ray.shutdown runs
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Study]:
    """One study for the module's tests, running until the last one is done."""
    tmp_path = tmp_path_factory.mktemp("study")
    token = secrets.token_hex(32)
    prometheus_port = _free_port()
    # A short temp dir of its own: Ray's Unix socket paths must stay short, and the
    # cluster must not be found by (or find) the test session's.
    ray_tmp = tempfile.mkdtemp(prefix="rdw", dir="/tmp")
    env = {k: v for k, v in os.environ.items()
           if k not in ("RAY_ADDRESS", "RAY_AUTH_TOKEN_PATH")}
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token, RAY_TMPDIR=ray_tmp,
               # Where the head's dashboard looks for Prometheus (read when it starts),
               # and metrics sent every 2 s instead of 10 (the Prometheus test).
               RAY_PROMETHEUS_HOST=f"http://127.0.0.1:{prometheus_port}",
               RAY_metrics_report_interval_ms="2000",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])))
    log = tmp_path / "study.log"
    name = "dash"
    command = [sys.executable, "-m", "raydp_synth.tune", "dpaf", "--search-space", str(TINY),
               "--trials", "2", "--workers-per-trial", "2", "--no-eval",
               "--storage", str(tmp_path / "studies"), "--name", name,
               # Long enough to be still running while the dashboard is read.
               "--set", "epochs=200", "--verbose"]
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    try:
        # Only a hang's bound: on CI's two busy cores the study's imports and Ray's
        # start took more than 60 s once (the log still empty).
        deadline = time.monotonic() + 240
        match = None
        while match is None:
            match = DASHBOARD_LINE.search(re.sub(r"\x1b\[[0-9;]*m", "", log.read_text()))
            assert process.poll() is None or match, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "no dashboard line:\n" + log.read_text()[-3000:]
            time.sleep(0.5)
        yield Study(match.group(1), token, name, process, log, env, prometheus_port)
    finally:
        _stop(process)
        shutil.rmtree(ray_tmp, ignore_errors=True)


def _poll(what: str, check, study: Study, page, deadline: float):
    """``check()`` until it returns something true; fail at ``deadline``, leaving the
    page's text and screenshot beside the study's log."""
    last = None
    while time.monotonic() < deadline:
        assert study.process.poll() is None, f"the study ended early:\n{study.output()[-3000:]}"
        try:
            last = check()
        except playwright_sync.Error as error:  # a page still loading, a 5xx
            last = error
        if last and not isinstance(last, Exception):
            return last
        time.sleep(2)
    with contextlib.suppress(playwright_sync.Error):
        (study.log.parent / "page.txt").write_text(page.locator("body").inner_text())
        page.screenshot(path=str(study.log.parent / "page.png"), full_page=True)
    pytest.fail(f"{what} not on the dashboard before the deadline (last: {last!r}); the "
                f"page: {study.log.parent / 'page.txt'}; study output:\n"
                f"{study.output()[-1500:]}")


def test_dashboard_lists_the_study_train_run_and_trials(study: Study, tmp_path: Path) -> None:
    deadline = time.monotonic() + DEADLINE_S
    screenshot = Path(os.environ.get("RAYDP_DASHBOARD_SCREENSHOT")
                      or tmp_path / "dashboard_train.png")
    # Token authentication: the dashboard asks for the token in its dialog.
    with dashboard_page(playwright_sync, tmp_path / "chromium-profile", study.dashboard,
                        study.token, height=1000, timeout_ms=20_000) as page:
        assert any(c["name"] == "ray-authentication-token" for c in page.context.cookies())

        # Jobs: the study's driver, running.
        def study_job() -> bool:
            page.goto(f"{study.dashboard}/#/jobs")
            page.get_by_text("raydp_synth.tune").first.wait_for(timeout=5_000)
            return "RUNNING" in page.locator("body").inner_text()

        _poll("the study's job", study_job, study, page, deadline)

        # Ray Train's state API: the trial's Train run, running, in the study's job.
        def running_train_run() -> list[dict]:
            response = page.goto(f"{study.dashboard}/api/train/v2/runs/v1")
            if response is None or not response.ok:
                return []
            runs = json.loads(page.locator("body").inner_text())["train_runs"]
            return [run for run in runs if run["status"] == "RUNNING"]

        runs = _poll("a running Ray Train run", running_train_run, study, page, deadline)
        assert [run["name"] for run in runs] == ["train"]  # one trial at a time
        assert len({run["job_id"] for run in runs}) == 1

        # Actors: the Tune trial and its Train run's controller and 2 workers.
        def trial_and_train_actors() -> bool:
            page.goto(f"{study.dashboard}/#/actors")
            page.get_by_role("textbox", name="Page Size").fill("50")  # one page
            page.get_by_text("TrainController").first.wait_for(timeout=5_000)
            text = page.locator("body").inner_text()
            return (text.count("RayTrainWorker") >= 2 and all(name in text for name in (
                "ImplicitFunc", "run_trial", "TrainController", f"accountant-{study.name}")))

        _poll("the trial's actors", trial_and_train_actors, study, page, deadline)
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(screenshot), full_page=True)
    assert screenshot.stat().st_size > 10_000


PROMETHEUS = shutil.which("prometheus")
#: The panel whose query needs a finished trial (the score is reported at the end),
#: which this study's long trials never reach while the test reads Prometheus.
AFTER_A_TRIAL = "Selection score"
STUDY_EPSILON = 10.0  # tune's default


def _prometheus_query(port: int, query: str) -> list[dict]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    with urllib.request.urlopen(url, timeout=10) as response:
        body = json.load(response)
    assert body["status"] == "success", body
    return body["data"]["result"]


def test_prometheus_answers_every_panel_of_the_budget_dashboard(study: Study,
                                                                tmp_path: Path) -> None:
    """``raydp-synth dashboard`` on the study's Ray session: Prometheus scrapes the
    accountant's gauges and the trials' metrics, every query of the shipped Grafana
    dashboard is valid and (but the finished-trial panel) returns the study's series,
    the values agree with the budget, and Ray's dashboard finds Prometheus."""
    if PROMETHEUS is None:
        pytest.skip("no prometheus program (apt-get install prometheus; .ci/run installs it)")
    from raydp_synth.dashboard.grafana import DASHBOARD_FILE_NAME, dashboard_json, panel_queries

    log = tmp_path / "dashboard.log"
    with log.open("wb") as out:  # the default session: RAY_TMPDIR's session_latest
        monitor = subprocess.Popen(
            [sys.executable, "-m", "raydp_synth.dashboard", "--no-grafana",
             "--prometheus-port", str(study.prometheus_port), "--scrape-interval", "2"],
            cwd=tmp_path, env=study.env, stdout=out, stderr=subprocess.STDOUT)
    try:
        queries = {title: [q.replace("$study", study.name) for q in exprs]
                   for title, exprs in panel_queries().items()}
        deadline = time.monotonic() + 120
        missing: dict[str, list[str]] = {}
        while time.monotonic() < deadline:
            assert monitor.poll() is None, log.read_text()
            assert study.process.poll() is None, study.output()[-3000:]
            try:
                results = {(title, q): _prometheus_query(study.prometheus_port, q)
                           for title, exprs in queries.items() for q in exprs}
            except (urllib.error.URLError, ConnectionError):
                time.sleep(1)  # Prometheus starting
                continue
            missing = {}
            for (title, q), series in results.items():
                if not series and title != AFTER_A_TRIAL:
                    missing.setdefault(title, []).append(q)
            if not missing:
                break
            time.sleep(2)
        assert not missing, f"panels without data: {missing}\n{log.read_text()}"

        def value(name: str) -> float:
            [series] = _prometheus_query(
                study.prometheus_port, f'ray_raydp_synth_{name}{{study="{study.name}"}}')
            return float(series["value"][1])

        assert value("trials_granted") >= 1
        assert value("trials_refused") == 0
        spent, remaining = value("epsilon_spent"), value("epsilon_unspent")
        assert 0 < spent <= STUDY_EPSILON
        assert spent + remaining == pytest.approx(STUDY_EPSILON)
        trial_keys = {series["metric"]["metric"] for series in _prometheus_query(
            study.prometheus_port, f'ray_raydp_synth_trial_metric{{study="{study.name}"}}')}
        from raydp_synth.methods import get_method
        from raydp_synth.tune.trial import TRIAL_METRICS

        assert "epsilon_spent" in trial_keys
        assert trial_keys <= get_method("dpaf").metric_allowlist | TRIAL_METRICS

        # Grafana's provisioning folder of the session holds the dashboard.
        [session] = Path(study.env["RAY_TMPDIR"]).glob("ray/session_2*")
        assert ((session / "metrics/grafana/dashboards" / DASHBOARD_FILE_NAME).read_text()
                == dashboard_json())
        # Ray's dashboard finds this Prometheus (RAY_PROMETHEUS_HOST of the head).
        request = urllib.request.Request(f"{study.dashboard}/api/prometheus_health",
                                         headers={"Authorization": f"Bearer {study.token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
            assert json.load(response)["msg"] == "prometheus running"
    finally:
        # SIGTERM, which serve() handles itself: a test run in the background of a
        # non-interactive shell inherits SIGINT ignored, so Ctrl-C's signal would not
        # reach it. Stopping Prometheus may take up to 2 x 15 s (terminate, then kill).
        monitor.send_signal(signal.SIGTERM)
        try:
            code = monitor.wait(timeout=45)
        except subprocess.TimeoutExpired:
            monitor.kill()
            raise
    assert code == 0, log.read_text()
    assert f"Prometheus: http://localhost:{study.prometheus_port}" in log.read_text()
