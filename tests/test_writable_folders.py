"""An output folder the user cannot write to is refused in one line, exit 2, before
Ray starts (it used to start Ray, ~20 s, then die with a 26-38-line OSError)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from raydp_synth.errors import ConfigError
from raydp_synth.paths import require_writable_folder

#: A folder no user may write in on a stock Linux machine, even root (a read-only mount).
CANDIDATES = [Path("/proc/sys"), Path("/sys/kernel")]
READ_ONLY = next((p for p in CANDIDATES if p.is_dir() and not os.access(p, os.W_OK)), None)
needs_read_only = pytest.mark.skipif(READ_ONLY is None, reason="no read-only folder here")


def test_a_writable_or_creatable_folder_passes_and_a_file_in_the_way_is_said(tmp_path) -> None:
    require_writable_folder(tmp_path / "new" / "deeper", "--out")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        require_writable_folder(tmp_path / "file" / "run", "--out")


@needs_read_only
def test_a_folder_on_a_read_only_file_system_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"^--storage .*not writable.*pass a folder"):
        require_writable_folder(READ_ONLY / "studies", "--storage")


@needs_read_only
@pytest.mark.slow
@pytest.mark.parametrize(("command", "flag"), [("train", "--out"), ("tune", "--storage")])
def test_the_cli_refuses_it_in_one_line_before_ray_starts(tmp_path, command, flag) -> None:
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", f"raydp_synth.{command}", "dpaf", flag,
                           str(READ_ONLY / "x")], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "RAY_ADDRESS": ""}, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {flag} "), done.stderr
    assert "Ray" not in done.stdout and time.monotonic() - start < 60
