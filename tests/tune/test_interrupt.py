"""Ctrl-C stops a study in each of its phases, with exit 130 and one line on what it
kept, the ledger intact (it replays; no grant after the interrupt):

* in training: nothing released, the exact command that resumes it (it used to
  release the best finished trial and exit 0);
* in the release (after the search, while the best trial's release is written):
  nothing released, nothing half-written, the same resume command;
* in the evaluation: the release stays, and the line says how to rerun the
  evaluation (``python -m raydp_synth.evaluate STUDY``).

Each command starts with SIGINT at its default, as at a terminal (a suite run in the
background of a non-interactive shell inherits it ignored, and Python then installs
no KeyboardInterrupt; the CLI keeps an inherited SIG_IGN, as POSIX shells mean it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from raydp_synth.accountant.core import LEDGER_NAME
from tests.interrupted_command import start_command, wait_for_line

ROOT = Path(__file__).resolve().parents[2]
TINY = Path(__file__).with_name("tiny_dpaf.yaml")


@pytest.mark.ray
def test_sigint_in_training_releases_nothing_and_says_how_to_resume(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    storage = tmp_path / "studies"
    proc = subprocess.Popen(
        [sys.executable, "-m", "raydp_synth.tune", "dpaf", "--trials", "3", "--epsilon", "6",
         "--search-space", str(TINY), "--no-eval", "--storage", str(storage), "--name", "s"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # As at a terminal: a suite run in the background of a non-interactive shell
        # inherits SIGINT ignored, and Python then installs no KeyboardInterrupt.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    study = storage / "s"
    deadline = time.monotonic() + 180
    try:
        # A trial is training once its folder holds a checkpoint or its progress.
        while time.monotonic() < deadline and proc.poll() is None:
            if any((study / "trials").glob("*/train*")) or any((study / "trials").glob("*/*.json")):
                break
            time.sleep(0.5)
        assert proc.poll() is None, "the study ended before a trial started"
        time.sleep(2)
        proc.send_signal(signal.SIGINT)  # the driver only, as a first Ctrl-C reaches it
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (out[-3000:], err[-3000:])
    last = err.strip().splitlines()[-1]
    assert last.startswith("interrupted; nothing released; resume with: python -m "
                           "raydp_synth.tune dpaf"), err[-3000:]
    assert "--resume --name s" in last and f"--storage {storage}" in last
    assert "Tuner.restore" not in out + err
    assert not (study / "release").exists()
    # The ledger is whole: every line parses, and the grants made are there.
    lines = (study / LEDGER_NAME).read_text().splitlines()
    assert lines and all(json.loads(line) for line in lines)


def test_the_resume_command_keeps_the_users_settings_and_names_the_study() -> None:
    """From the arguments the CLI got (``python -m raydp_synth.tune`` or ``raydp-synth
    tune`` alike), never from the process's own argv."""
    from raydp_synth.tune.__main__ import resume_command

    assert resume_command(["dpaf", "--epsilon", "4", "--name", "old", "--resume"], "s",
                          Path("/data/studies")) == (
        "python -m raydp_synth.tune dpaf --epsilon 4 --storage /data/studies --resume --name s")
    assert resume_command(["dpaf", "--storage=here", "--name=x"], "s", Path("/abs")) == (
        "python -m raydp_synth.tune dpaf --storage=here --resume --name s")


#: The release and evaluation phases' study: one trial of one epoch. A large release
#: (100000 synthetic rows) keeps the release phase long enough (seconds) for a SIGINT
#: sent when its first line is read to land in it.
PHASES_ARGV = ["dpaf", "--trials", "1", "--epsilon", "4", "--search-space", str(TINY),
               "--set", "epochs=1", "--set", "classifier_epochs=0.2",
               "--synthetic-samples", "100000", "--name", "s"]


def _interrupt_at(proc: subprocess.Popen[str], line: str, timeout: float,
                  ledger: Path) -> tuple[bytes, list[str]]:
    """Send one SIGINT as soon as standard output shows ``line``; wait for the exit.
    Returns the ledger's bytes at the signal and the lines seen."""
    try:
        seen = wait_for_line(proc, line, timeout=timeout)
        proc.send_signal(signal.SIGINT)
        at_signal = ledger.read_bytes()
        proc.wait(timeout=120)  # not communicate: Ray's processes may keep the pipe
    finally:
        if proc.poll() is None:
            proc.kill()
    return at_signal, seen


def _ledger_intact(study: Path, at_signal: bytes) -> None:
    """The ledger replays (the budget CLI's offline statement) with its one grant,
    and nothing was appended after the interrupt."""
    from raydp_synth.budget import ledger_statement

    assert (study / LEDGER_NAME).read_bytes() == at_signal
    statement, _ = ledger_statement(study)
    assert statement["trials_granted"] == 1 and statement["epsilon"] <= 4.0


@pytest.fixture(scope="module")
def interrupted_in_release(tmp_path_factory) -> tuple[Path, Path, int, str]:
    """A one-trial study interrupted while it writes its release: (storage, the
    command's folder, its exit code, its standard error)."""
    cwd = tmp_path_factory.mktemp("release-phase")
    storage = cwd / "studies"
    proc = start_command("raydp_synth.tune", [*PHASES_ARGV, "--storage", str(storage)], cwd,
                         append_stderr=True)
    at_signal, _ = _interrupt_at(proc, "releasing the best trial of study s", 600,
                                 storage / "s" / LEDGER_NAME)
    _ledger_intact(storage / "s", at_signal)
    return storage, cwd, proc.returncode, (cwd / "stderr.txt").read_text()


@pytest.mark.ray
@pytest.mark.slow
def test_sigint_in_the_release_writes_nothing_and_says_how_to_resume(
        interrupted_in_release) -> None:
    storage, _, code, err = interrupted_in_release
    assert code == 130, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last == ("interrupted; nothing released; resume with: python -m raydp_synth.tune "
                    + " ".join(PHASES_ARGV[:-2]) + f" --storage {storage} --resume --name s"
                    ), err[-3000:]
    study = storage / "s"
    assert not (study / "release").exists()
    assert not list(study.glob(".release*"))  # no partial release left behind
    assert not (study / "evaluation.json").exists()


@pytest.mark.ray
@pytest.mark.slow
def test_sigint_in_the_evaluation_keeps_the_release_and_says_how_to_rerun_it(
        interrupted_in_release) -> None:
    """The study interrupted in its release, resumed (its trial is not run again: it
    releases), and interrupted again in its evaluation."""
    storage, cwd, _, _ = interrupted_in_release
    study = storage / "s"
    proc = start_command("raydp_synth.tune",
                         [*PHASES_ARGV, "--storage", str(storage), "--resume"], cwd,
                         append_stderr=True)
    at_signal, seen = _interrupt_at(proc, "evaluating s:", 600, study / LEDGER_NAME)
    err = (cwd / "stderr.txt").read_text()
    assert proc.returncode == 130, err[-3000:]
    assert any("released trial" in line for line in seen)
    assert err.strip().splitlines()[-1] == (
        f"interrupted; the release in {study / 'release'} stands; rerun its evaluation "
        f"with: python -m raydp_synth.evaluate {study}"), err[-3000:]
    assert (study / "release" / "privacy.json").is_file()
    assert not (study / "evaluation.json").exists()
    _ledger_intact(study, at_signal)
