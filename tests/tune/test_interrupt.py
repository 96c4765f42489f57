"""Ctrl-C during a study's training stops it: exit 130, one line saying nothing was
released and the exact command that resumes it, no release written, the ledger intact
(it used to release the best finished trial and exit 0)."""

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
