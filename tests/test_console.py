"""``raydp-synth COMMAND``: the console script dispatches to the ``python -m`` forms'
``main(argv)``; ``--version`` everywhere; user errors are one line and exit 2.

The installed script itself (the wheel's entry point) is run by ``.ci/wheel_check``.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import raydp_synth
from raydp_synth.cli import run_cli
from raydp_synth.console import COMMANDS, command_main, dispatch, main
from tests.accountant.test_core import Study, _compose, _plan

ROOT = Path(__file__).resolve().parents[1]


def test_the_script_and_the_version_come_from_pyproject():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["scripts"] == {"raydp-synth": "raydp_synth.console:main"}
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "raydp_synth.__version__"}
    assert raydp_synth.__version__.count(".") == 2


@pytest.mark.parametrize("argv", [["--version"], *([c, "--version"] for c in COMMANDS)])
def test_version_everywhere(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"raydp_synth {raydp_synth.__version__}"


@pytest.mark.parametrize("module", ["raydp_synth.train", "raydp_synth.tune",
                                    "raydp_synth.evaluate", "raydp_synth.budget",
                                    "raydp_synth.report", "raydp_synth.sample",
                                    "raydp_synth.dashboard"])
def test_python_m_version(module):
    done = subprocess.run([sys.executable, "-m", module, "--version"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout.strip()) == (0, f"raydp_synth {raydp_synth.__version__}")


def test_help_lists_every_command(capsys):
    assert dispatch(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(f"  {command}" in out for command in COMMANDS)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_each_command_is_its_modules_main(command):
    module = importlib.import_module(COMMANDS[command][0])
    assert command_main(command) is module.main


def test_a_command_runs_with_the_rest_of_argv(tmp_path, capsys):
    study = Study(tmp_path, _compose(3.0))
    study.request("t0", _plan(6.0, None, 1))
    with pytest.raises(SystemExit) as exit_:
        main(["budget", str(tmp_path)])
    assert exit_.value.code == 0
    assert "1 trials granted, 0 refused" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    ([], "give a command: train, tune"),
    (["fly"], "unknown command 'fly'; choose one of train, tune"),
    (["budget", "/nonexistent/study"], "does not exist"),
])
def test_user_errors_are_one_line_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_a_command_this_version_lacks_is_one_line(monkeypatch, capsys):
    monkeypatch.setitem(COMMANDS, "sample", ("raydp_synth.no_such_module", "absent"))
    with pytest.raises(SystemExit) as exit_:
        run_cli(dispatch, ["sample", "release", "-n", "4"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == (
        f"error: raydp-synth sample is not available in this version "
        f"(raydp_synth {raydp_synth.__version__})\n")
