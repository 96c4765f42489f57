"""A command line run as a user runs it at a terminal, for the Ctrl-C tests of
``train`` (tests/train/test_interrupt_train.py) and ``tune``
(tests/tune/test_interrupt.py): started with SIGINT at its default, its standard
output read line by line until the phase to interrupt says it began."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def start_command(module: str, args: list[str], cwd: Path, *,
                  append_stderr: bool = False) -> subprocess.Popen[str]:
    """``python -m MODULE ARGS`` in ``cwd`` on its own local cluster, standard output
    piped, standard error to ``cwd/stderr.txt`` (a pipe nobody reads while the test
    waits for a line on standard output would fill with Ray's lines and block the
    command); ``append_stderr``: a second command in the same folder adds to it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    env.pop("RAY_ADDRESS", None)
    return subprocess.Popen(
        [sys.executable, "-m", module, *args], cwd=cwd, env=env,
        stdout=subprocess.PIPE, stderr=(cwd / "stderr.txt").open("a" if append_stderr else "w"),
        text=True,
        # As at a terminal: a background shell's children inherit SIGINT ignored.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def wait_for_line(proc: subprocess.Popen[str], needle: str, timeout: float) -> list[str]:
    """Read standard output (in a thread that keeps draining it afterwards) until a
    line holds ``needle``; the lines read so far (the list grows as the thread reads)."""
    seen: list[str] = []
    found = threading.Event()

    def drain() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line)
            if needle in line:
                found.set()

    threading.Thread(target=drain, daemon=True).start()
    if not found.wait(timeout):
        raise AssertionError(f"no line with {needle!r} in {timeout} s: {''.join(seen)[-3000:]}")
    return seen
