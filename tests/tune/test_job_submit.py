"""``ray job submit`` of a study, as README's "A study as a Ray job" gives it, against a
local head whose ``ray start`` ran in the folder *above* a clone named ``raydp_synth``
(a link to this repository), submitted from a third folder.

Ray 2.60 runs a job in the folder where ``ray start`` ran, and puts that folder on every
worker's import path. There the clone's folder shadows an editable install:
``python -m raydp_synth.tune`` fails at once (``raydp_synth`` has no ``__version__``),
which is why the README submits the ``raydp-synth`` command; its trials import the
package because the driver stands in the package's own folder while ``ray.init``
runs (``runtime/ray_session.py``). The job's default ``--storage`` is
``~/raydp_synth_results/studies`` of the head (a home of the test's own here), and a
relative ``--storage`` is refused in one line with the fix (exit 2).

Token authentication stays on, as a user runs it: head, client and job share
``RAY_AUTH_MODE=token`` and ``~/.ray/auth_token``. One 2-trial study serves the
checks of its release, its log and the dashboard's Jobs page (headless Chromium: the
operator reads each trial's score and epsilon and the budget in the job's driver log,
filtered on ``raydp_synth``; the screenshot is kept under the test's tmp_path and, if
``RAYDP_SYNTH_SCREENSHOTS`` names a folder, copied there).
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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.dashboard.browser import CHROMIUM, dashboard_page

pytestmark = [pytest.mark.ray, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
TINY = Path(__file__).with_name("tiny_dpaf.yaml")
VENV_BIN = Path(sys.executable).parent
STUDY = "job"
SUBMISSION = "raydp-synth-test-job"
TRIALS = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_dashboard(port: int, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"no dashboard on port {port}")


@dataclass
class Head:
    address: str
    env: dict[str, str]
    home: Path
    parent: Path
    elsewhere: Path
    token: str

    def submit(self, *entrypoint: str, submission_id: str | None = None,
               timeout: float = 500) -> subprocess.CompletedProcess[str]:
        """README's command: ``ray job submit --address ... -- ENTRYPOINT``, from a
        folder that is neither the clone nor where ``ray start`` ran."""
        command = ["ray", "job", "submit", "--address", self.address]
        if submission_id is not None:
            command += ["--submission-id", submission_id]
        command += ["--", *entrypoint]
        for _ in range(30):  # the head's job agent comes up a little after the dashboard
            done = subprocess.run(command, env=self.env, cwd=self.elsewhere,
                                  capture_output=True, text=True, timeout=timeout)
            if "No available agent" not in done.stdout + done.stderr:
                return done
            time.sleep(2)
        return done


@pytest.fixture(scope="module")
def head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Head]:
    """A Ray head of its own, started in the folder above a clone named raydp_synth
    (stopped through its own process group, not `ray stop`, which would stop every Ray
    of this user, the test session's included)."""
    root = tmp_path_factory.mktemp("job")
    parent, home, elsewhere = root / "code", root / "home", root / "elsewhere"
    for folder in (parent, home, elsewhere):
        folder.mkdir()
    (parent / "raydp_synth").symlink_to(REPO, target_is_directory=True)  # the clone
    token = secrets.token_hex(32)  # README: ~/.ray/auth_token, 0600 in a 0700 folder
    (home / ".ray").mkdir(mode=0o700)
    (home / ".ray" / "auth_token").write_text(token)
    os.chmod(home / ".ray" / "auth_token", 0o600)
    env = {k: v for k, v in os.environ.items()
           if k not in ("RAY_ADDRESS", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "PYTHONPATH")}
    env.update(HOME=str(home), RAY_AUTH_MODE="token", RAY_USAGE_STATS_ENABLED="0",
               PATH=os.pathsep.join([str(VENV_BIN), env.get("PATH", "")]))
    dash = _free_port()
    temp = tempfile.mkdtemp(prefix="rh", dir="/tmp")  # Unix socket paths must stay short
    proc = subprocess.Popen(
        ["ray", "start", "--head", "--block", f"--port={_free_port()}",
         "--dashboard-host=127.0.0.1", f"--dashboard-port={dash}", "--num-cpus=2",
         # Not the default agent ports: the test session's own local Ray holds them.
         f"--dashboard-agent-listen-port={_free_port()}",
         f"--dashboard-agent-grpc-port={_free_port()}",
         f"--runtime-env-agent-port={_free_port()}", f"--metrics-export-port={_free_port()}",
         "--include-dashboard=true", f"--temp-dir={temp}"],
        cwd=parent, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_dashboard(dash)
        yield Head(f"http://127.0.0.1:{dash}", env, home, parent, elsewhere, token)
    finally:
        proc.terminate()  # `ray start --block` stops the processes it started
        try:
            proc.wait(timeout=60)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def job(head: Head) -> subprocess.CompletedProcess[str]:
    """The study, submitted as README says, without --storage. Two trials of one epoch
    and a small release: what is checked is the job's run (the search itself is
    tests/tune/test_study.py's)."""
    done = head.submit("raydp-synth", "tune", "dpaf", "--epsilon", "4", "--trials",
                       str(TRIALS), "--search-space", str(TINY), "--name", STUDY, "--no-eval",
                       "--synthetic-samples", "20", "--set", "epochs=1",
                       submission_id=SUBMISSION)
    (head.home.parent / "job.log").write_text(done.stdout + done.stderr)  # to read on failure
    return done


def _study_dir(head: Head) -> Path:
    return head.home / "raydp_synth_results" / "studies" / STUDY


def _epsilon(value: float) -> str:
    return f"{value:.4f}".rstrip("0").rstrip(".")


def _trial_results(study_dir: Path) -> dict[str, dict]:
    """Each trial's last result, as Tune wrote it (trial id -> result)."""
    found = {}
    for path in study_dir.glob("tune*/*/result.json"):
        last = json.loads(path.read_text().strip().splitlines()[-1])
        found[last["trial_id"]] = last
    return found


def test_the_study_releases_under_the_jobs_default_storage(head: Head, job) -> None:
    output = job.stdout + job.stderr
    assert job.returncode == 0, output[-4000:]
    assert "succeeded" in job.stdout
    release = _study_dir(head) / "release"
    statement = json.loads((release / "privacy.json").read_text())
    assert statement["epsilon"] <= 4.0
    assert f"to {release};" in output  # the command says where it wrote
    assert not (head.parent / "studies").exists() and not (head.elsewhere / "studies").exists()
    # Tune's table: each trial's score and epsilon, and the study's budget above it.
    assert re.search(r"\|\s+score \|\s+trial epsilon \|\s+epoch \|", output), output[-4000:]
    assert re.search(r"budget: spent epsilon [\d.]+ of epsilon 4, delta 1e-05 \(compose\); "
                     rf"{TRIALS} of at most {TRIALS} trials granted", output)
    for granted in range(1, TRIALS + 1):
        assert f"study {STUDY}: trial {granted} of at most {TRIALS} granted; spent epsilon" \
            in output
    results = _trial_results(_study_dir(head))
    assert len(results) == TRIALS
    for trial_id, result in results.items():
        assert (f"study {STUDY}: trial {trial_id} finished: score {result['score']:.4f}, "
                f"trial epsilon {_epsilon(result['trial_epsilon'])}") in output


def test_python_m_in_the_folder_above_a_clone_is_shadowed(head: Head) -> None:
    """Why README submits ``raydp-synth``: the job's working folder is where ``ray
    start`` ran, and there the clone's folder hides an editable install."""
    done = head.submit("python", "-m", "raydp_synth.tune", "--version", timeout=120)
    assert done.returncode != 0
    assert "__version__" in done.stdout + done.stderr


def test_a_relative_storage_under_a_job_is_refused_with_the_fix(head: Head) -> None:
    done = head.submit("raydp-synth", "tune", "dpaf", "--storage", "studies", timeout=120)
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "error: --storage studies is relative, but this runs as the Ray job raysubmit_" \
        in output, output[-3000:]
    assert f"--storage {Path('~/raydp_synth_results/studies')}" in output
    assert "exit code 2" in output


def test_without_the_token_mode_the_client_is_refused(head: Head) -> None:
    env = {k: v for k, v in head.env.items() if k != "RAY_AUTH_MODE"}
    listing = subprocess.run(["ray", "job", "list", "--address", head.address], env=env,
                             capture_output=True, text=True, timeout=120)
    assert listing.returncode != 0
    assert "authentication" in (listing.stdout + listing.stderr).lower()


def test_the_jobs_page_shows_each_trials_score_and_epsilon_and_the_budget(
        head: Head, job, tmp_path: Path) -> None:
    """What the operator reads on the dashboard, without opening a log file: the job
    on the Jobs page, then its driver log filtered on ``raydp_synth``."""
    playwright_sync = pytest.importorskip(
        "playwright.sync_api", reason="the playwright package is not installed "
        "(pip install -e '.[dev]')")
    if not CHROMIUM.is_file():
        pytest.skip("no /usr/bin/chromium (apt-get install chromium; .ci/run installs it)")
    assert job.returncode == 0, (job.stdout + job.stderr)[-3000:]
    results = _trial_results(_study_dir(head))
    expected = [f"study {STUDY}: trial {trial_id} finished: score {r['score']:.4f}, "
                f"trial epsilon {_epsilon(r['trial_epsilon'])}" for trial_id, r in results.items()]
    expected.append(f"study {STUDY}: search done; budget: spent epsilon ")
    expected.append(f"of epsilon 4, delta 1e-05 (compose); {TRIALS} of at most {TRIALS} "
                    "trials granted")
    screenshot = tmp_path / "jobs_page_budget.png"
    with dashboard_page(playwright_sync, tmp_path / "chromium-profile", head.address,
                        head.token, height=1400, timeout_ms=30_000) as page:
        page.get_by_text(SUBMISSION).first.wait_for()
        assert "SUCCEEDED" in page.locator("body").inner_text()

        page.goto(f"{head.address}/#/jobs/{SUBMISSION}")
        page.get_by_role("textbox", name="Keyword").first.fill("raydp_synth")
        deadline = time.monotonic() + 60
        text = ""
        while time.monotonic() < deadline:
            text = page.locator("body").inner_text()
            if all(line in text for line in expected):
                break
            time.sleep(1)
        page.screenshot(path=str(screenshot))  # the job, its log: the viewport
        (tmp_path / "jobs_page.txt").write_text(text)
    if os.environ.get("RAYDP_SYNTH_SCREENSHOTS"):
        folder = Path(os.environ["RAYDP_SYNTH_SCREENSHOTS"])
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(screenshot, folder / screenshot.name)
    missing = [line for line in expected if line not in text]
    assert not missing, f"not on the job's page: {missing}; the page: {tmp_path / 'jobs_page.txt'}"
    assert screenshot.stat().st_size > 10_000
