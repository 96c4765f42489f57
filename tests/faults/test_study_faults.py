"""Fault injection on whole studies: a Ray Train worker killed mid-trial, the driver
killed mid-study and resumed. Each asserts that the ledger loses nothing (every
grant stays charged), nothing is rerun under the same grant, and the whole-search
statement is the composition of every grant, within budget."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import dp_accounting as dpa
import pytest
import yaml

from raydp_synth.accountant.ledger import Ledger
from raydp_synth.privacy.events import event_from_json
from raydp_synth.privacy.pricing import epsilon as stated_epsilon
from tests.tune.test_study import TINY

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.fault]

DELTA = 1e-5


def ledger_entries(study: Path, kind: str) -> list[dict]:
    path = study / "ledger.jsonl"
    return [e for e in Ledger(path).entries() if e["kind"] == kind] if path.exists() else []


def composed_epsilon(grants: list[dict]) -> float:
    return stated_epsilon(dpa.ComposedDpEvent([event_from_json(g["event"]) for g in grants]),
                      delta=DELTA)


def reported_an_epoch(study: Path, trial_id: str) -> bool:
    """Whether the trial is mid-training: its first epoch is reported (checkpointed)."""
    return any((study / "trials" / trial_id).glob("train/checkpoint_*"))


def longer_tiny(folder: Path, epochs: int = 4) -> Path:
    """The tiny DPAF space with more epochs: a trial trains long enough to be hit
    after its first epoch is reported, with three to go."""
    space = yaml.safe_load(TINY.read_text())
    space["fixed"]["epochs"] = epochs
    path = folder / "longer_tiny.yaml"
    path.write_text(yaml.safe_dump(space))
    return path


def train_workers() -> dict[str, dict]:
    """Every Ray Train worker actor of the connected cluster, by actor id (from the
    GCS: works without the dashboard that ``ray.util.state`` needs)."""
    from ray._private import state

    return {aid: info for aid, info in state.actors().items()
            if info["ActorClassName"] == "RayTrainWorker"}


def loop_actors() -> dict[str, dict]:
    """Every actor that runs a trial's DP loop: Ray Train workers, and Tune's trial
    actors (a 1-worker trial runs its loop in its own process)."""
    from ray._private import state

    return {aid: info for aid, info in state.actors().items()
            if info["ActorClassName"] in ("RayTrainWorker", "ImplicitFunc")}


def test_a_train_worker_killed_mid_trial_keeps_its_grant_and_is_not_rerun(
        ray_local, tmp_path) -> None:
    """SIGKILL the process that runs the first trial's loop while it trains (its own
    Tune actor: a 1-worker trial runs its loop in process): the trial fails
    (no retries: a retry would release its mechanisms again), its grant stays in the
    ledger and in the statement, and the study goes on and releases the other trial."""
    from raydp_synth.tune.study import StudyRequest, run_study

    study = tmp_path / "killed-worker"
    killed: list[str] = []
    seen: dict[str, object] = {}

    def kill_first_trials_worker() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not killed:
            try:
                grants = ledger_entries(study, "grant")
                alive = [w for w in loop_actors().values() if w["State"] == "ALIVE"]
                # Mid-training: its first epoch is reported (checkpointed), more to come.
                reported = bool(grants) and reported_an_epoch(study, grants[0]["trial_id"])
                seen.update(grants=len(grants), alive=len(alive), reported=reported)
                if len(grants) == 1 and alive and reported:
                    for actor in alive:  # the trial's own, and any idle one Tune keeps
                        os.kill(actor["Pid"], signal.SIGKILL)
                    killed.append(grants[0]["trial_id"])
                    return
            except Exception as err:  # a transient read (GCS, a file being written)
                seen["error"] = repr(err)
            time.sleep(0.25)  # each poll lists every actor of the session cluster

    killer = threading.Thread(target=kill_first_trials_worker, daemon=True)
    killer.start()
    result = run_study(StudyRequest(
        method="dpaf", epsilon=6.0, delta=DELTA, trials=2, search_space=longer_tiny(tmp_path),
        storage=tmp_path, name="killed-worker", evaluate=False, synthetic_samples=20,
    ))
    killer.join(timeout=5)
    assert killed, f"no loop process was killed (last seen: {seen})"
    grants = ledger_entries(study, "grant")
    assert [g["trial_id"] for g in grants][0] == killed[0]
    assert len(grants) == 2 and len({g["trial_id"] for g in grants}) == 2  # never rerun
    finished = {t["trial"] for t in result.trials}
    assert killed[0] not in finished and result.best_trial in finished
    statement = json.loads((study / "release" / "privacy.json").read_text())
    assert statement["epsilon"] == pytest.approx(composed_epsilon(grants), rel=1e-9)
    assert statement["epsilon"] <= 6.0


#: The driver-kill study's command line (``--resume`` is added to resume it). A small
#: release (20 synthetic rows): what is checked is the ledger and the statement.
KILLED_STUDY_ARGV = ["dpaf", "--epsilon", "6", "--trials", "2", "--search-space", str(TINY),
                     "--name", "resumed", "--no-eval", "--synthetic-samples", "20"]


@pytest.fixture(scope="module")
def killed_study(tmp_path_factory) -> tuple[Path, Path]:
    """A study (its own process group: driver, local Ray, trial) killed with SIGKILL
    while its first trial trains, once Tune has saved its experiment and the ledger
    holds the first grant; and a copy of it as it was killed. Both resume tests
    resume it: the kill is the same for both, only what they delete before the resume
    differs. Each puts the copy back first, at the study's own path (Tune's saved
    experiment names its storage by absolute path: a restore from a copy elsewhere
    would write into the original)."""
    storage = tmp_path_factory.mktemp("killed-driver")
    study = storage / "resumed"
    log = tmp_path_factory.mktemp("killed-driver-log") / "study.log"
    with log.open("wb") as output:
        proc = subprocess.Popen([sys.executable, "-m", "raydp_synth.tune", *KILLED_STUDY_ARGV,
                                 "--storage", str(storage)],
                                start_new_session=True, stdout=output,
                                stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            saved = any(study.glob("tune/experiment_state*.json"))
            if saved and ledger_entries(study, "grant"):
                break
            assert proc.poll() is None, ("the study ended before its first grant:\n"
                                         + log.read_text(errors="replace")[-3000:])
            time.sleep(0.2)
        else:
            pytest.fail("no first grant in 300 s:\n" + log.read_text(errors="replace")[-3000:])
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    as_killed = tmp_path_factory.mktemp("as-killed") / "resumed"
    shutil.copytree(study, as_killed)
    return study, as_killed


# extended: the ledger it resumes on is rebuilt as after an accountant crash
# (tests/accountant/test_actor.py) and a resume is checked by tests/tune/test_resume_checks.py.
@pytest.mark.extended
@pytest.mark.parametrize("tune_saved", [True, False], ids=["tune-restore", "tune-never-saved"])
def test_a_killed_driver_resumes_on_the_same_ledger(ray_local, killed_study, capsys,
                                                    tune_saved) -> None:
    """Kill a study's whole process group (driver, local Ray, trial) while its first
    trial trains; then --resume (the study as it was killed: :func:`killed_study`).
    If Tune had saved its experiment, Tune restores it (the search's state, trial
    count) and the interrupted trial is refused a second grant; if not (killed in its
    first seconds), a new experiment runs the trials the ledger has not granted.
    Either way the first grant stays charged, the study runs only the trial it has
    left, and the total stays within budget."""
    study, as_killed = killed_study
    shutil.rmtree(study)  # an earlier resume's
    shutil.copytree(as_killed, study)
    argv = [*KILLED_STUDY_ARGV, "--storage", str(study.parent)]
    if not tune_saved:  # as if killed before Tune's first save
        for path in study.glob("tune/experiment_state*.json"):
            path.unlink()
    first = ledger_entries(study, "grant")
    assert len(first) == 1

    from raydp_synth.tune.__main__ import main

    assert main([*argv, "--resume"]) == 0
    out = capsys.readouterr().out
    grants = ledger_entries(study, "grant")
    assert len(grants) == 2 and grants[0] == first[0]  # one new trial, the old grant kept
    assert grants[1]["trial_id"] != first[0]["trial_id"]
    reruns = [r for r in ledger_entries(study, "refusal") if r["trial_id"] == first[0]["trial_id"]]
    if tune_saved:
        assert "resuming Tune experiment" in out
        assert not list(study.glob("tune-resume-*")), "a new experiment instead of Tune's restore"
        assert reruns and reruns[0]["reason"].startswith("trial already ran")
    else:
        assert "resuming Tune experiment" not in out and (study / "tune-resume-1").is_dir()
        assert not reruns
    statement = json.loads((study / "release" / "privacy.json").read_text())
    total = composed_epsilon(grants)
    assert statement["epsilon"] == pytest.approx(total, rel=1e-9) and total <= 6.0
