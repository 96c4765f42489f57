"""The command lines' Ctrl-C (:func:`raydp_synth.cli.run_cli`), without Ray: a first
Ctrl-C that lands in a weakref callback (where Python swallows the KeyboardInterrupt,
"Exception ignored") still stops the command, once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: A command whose first SIGINT arrives while a weakref callback runs: the handler
#: raises KeyboardInterrupt inside the callback, which Python reports and ignores.
_SWALLOWED = textwrap.dedent("""
    import os, signal, sys, time, weakref
    from raydp_synth.cli import run_cli

    class Thing:
        pass

    def callback(ref):
        os.kill(os.getpid(), signal.SIGINT)
        total = 0
        for i in range(100000):  # bytecodes: the handler runs here, in the callback
            total += i

    def main(argv):
        thing = Thing()
        keep = weakref.ref(thing, callback)
        del thing  # the callback runs now
        print("callback done", flush=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            time.sleep(0.01)
        print("not interrupted", flush=True)
        return 0

    run_cli(main)
""")


def test_a_first_ctrl_c_swallowed_by_a_callback_still_stops_the_command() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", _SWALLOWED], env=env, capture_output=True, text=True,
        timeout=60, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.returncode == 130, (proc.stdout, proc.stderr)
    assert "callback done" in proc.stdout and "not interrupted" not in proc.stdout
    assert proc.stderr.strip().splitlines()[-1] == "interrupted", proc.stderr
    assert "Exception ignored" not in proc.stderr  # re-raised, not reported
