"""The console: ``--quiet`` / ``--verbose`` set our logger and Ray's, one format,
progress lines on stdout and warnings on stderr, and a worker's progress line is
printed once with no Ray Train INFO chatter (a real ``python -m raydp_synth.train``)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from raydp_synth import log as console
from raydp_synth.cli import configure_console_from
from raydp_synth.evaluate import build_parser as evaluate_parser
from raydp_synth.log import (
    LOGGER_NAME,
    PRINT_PATCH_ENV,
    RAY_LOGGERS,
    VERBOSITY_ENV,
    Verbosity,
    configure_console,
    progress,
    ray_log_level,
    tune_verbosity,
    worker_env,
)
from raydp_synth.train.__main__ import build_parser as train_parser
from raydp_synth.tune.__main__ import build_parser as tune_parser

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _restore_console(monkeypatch):
    """Each test's console settings are undone: the environment and the loggers."""
    monkeypatch.delenv(VERBOSITY_ENV, raising=False)
    monkeypatch.delenv(PRINT_PATCH_ENV, raising=False)
    monkeypatch.delenv(console.TUNE_NEW_OUTPUT_ENV, raising=False)
    from ray.train.v2._internal.execution import context

    names = (LOGGER_NAME, *RAY_LOGGERS, context.logger.name, "optuna")
    saved = {name: (logging.getLogger(name).level, list(logging.getLogger(name).handlers),
                    logging.getLogger(name).propagate) for name in names}
    yield
    for name, (level, handlers, propagate) in saved.items():
        logger = logging.getLogger(name)
        logger.setLevel(level)
        logger.handlers[:] = handlers
        logger.propagate = propagate


@pytest.mark.parametrize("parser", [train_parser, tune_parser, evaluate_parser],
                         ids=["train", "tune", "evaluate"])
@pytest.mark.parametrize(("flags", "level", "verbosity"), [
    ([], logging.INFO, Verbosity.DEFAULT),
    (["--quiet"], logging.WARNING, Verbosity.QUIET),
    (["-q"], logging.WARNING, Verbosity.QUIET),
    (["--verbose"], logging.DEBUG, Verbosity.VERBOSE),
    (["-v"], logging.DEBUG, Verbosity.VERBOSE),
])
def test_each_cli_sets_our_logger_at_its_flag(parser, flags, level, verbosity) -> None:
    configure_console_from(parser().parse_args(["x", *flags]))
    logger = logging.getLogger(LOGGER_NAME)
    assert logger.level == level and not logger.propagate
    # One console handler: a line once, even when set up twice.
    assert sum(isinstance(h, console._ConsoleHandler) for h in logger.handlers) == 1
    assert os.environ[VERBOSITY_ENV] == verbosity.value  # what Ray's processes inherit
    assert worker_env() == {VERBOSITY_ENV: verbosity.value, PRINT_PATCH_ENV: "0"}


def test_quiet_and_verbose_together_are_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        train_parser().parse_args(["dpaf", "--quiet", "--verbose"])
    assert exit_info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_ray_loggers_are_at_warning_unless_verbose() -> None:
    import optuna
    import ray  # noqa: F401 - importing Ray sets its logger to INFO; the console undoes it

    configure_console(Verbosity.DEFAULT)
    assert {name: logging.getLogger(name).getEffectiveLevel() for name in RAY_LOGGERS} == {
        name: logging.WARNING for name in RAY_LOGGERS}
    assert ray_log_level() == "WARNING" and tune_verbosity() == 1
    # Ray Train's "Reporting training result" logger is named by its file.
    from ray.train.v2._internal.execution import context

    assert context.logger.getEffectiveLevel() == logging.WARNING
    assert optuna.logging.get_verbosity() == logging.WARNING  # "A new study created ..."
    configure_console(Verbosity.QUIET)
    assert logging.getLogger("ray.train").getEffectiveLevel() == logging.WARNING
    assert tune_verbosity() == 0
    configure_console(Verbosity.VERBOSE)
    assert all(logging.getLogger(name).getEffectiveLevel() == logging.INFO
               for name in RAY_LOGGERS)
    assert ray_log_level() == "INFO" and tune_verbosity() == 2


def test_one_format_progress_on_stdout_warnings_on_stderr(capsys) -> None:
    configure_console(Verbosity.DEFAULT)
    log = logging.getLogger("raydp_synth.some.module")
    log.debug("hidden")
    log.info("plan epsilon=1.0")
    log.warning("stopping the search")
    captured = capsys.readouterr()
    assert captured.out == "[raydp_synth] plan epsilon=1.0\n"
    assert captured.err == "[raydp_synth] warning: stopping the search\n"
    configure_console(Verbosity.QUIET)
    log.info("progress")
    log.warning("still said")
    captured = capsys.readouterr()
    assert captured.out == "" and "still said" in captured.err


def test_a_worker_takes_the_drivers_verbosity_from_its_environment(monkeypatch) -> None:
    monkeypatch.setenv(VERBOSITY_ENV, "quiet")
    console.configure_worker_console()
    console.configure_worker_console()
    logger = logging.getLogger(LOGGER_NAME)
    assert logger.level == logging.WARNING
    assert sum(isinstance(h, console._ConsoleHandler) for h in logger.handlers) == 1
    monkeypatch.setenv(VERBOSITY_ENV, "nonsense")  # an unknown value: the default
    assert console.current_verbosity() is Verbosity.DEFAULT


def test_progress_bars_are_off_when_quiet_or_not_on_a_terminal() -> None:
    configure_console(Verbosity.QUIET)
    with progress(3, "evaluation") as bar:
        bar.update()
        assert bar.disable
    configure_console(Verbosity.DEFAULT)
    with progress(3, "evaluation") as bar:  # pytest's captured stderr is no terminal
        assert bar.disable


@pytest.mark.ray
def test_a_training_run_prints_each_worker_line_once_and_no_ray_train_chatter(tmp_path) -> None:
    """A real ``python -m raydp_synth.train dpaf`` (its own local Ray): each of the
    worker's progress lines is shown once (not from its stdout and again from its
    stderr), Ray Train's ``Reporting training result`` lines are not shown, and the
    driver's plan and result lines are."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    env.pop(VERBOSITY_ENV, None)
    proc = subprocess.run(
        [sys.executable, "-m", "raydp_synth.train", "dpaf", "--no-eval", "--epsilon", "4",
         "--set", "epochs=1", "--set", "classifier_epochs=0.2", "--set", "base_width=8",
         "--synthetic-samples", "20", "--out", str(tmp_path / "run")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert "Reporting training result" not in output
    # "(RayTrainWorker pid=..) [raydp_synth] [dpaf] classifier epoch 1/1: ..."
    progress_lines = [line.split(") ", 1)[-1] for line in output.splitlines()
                      if "[dpaf]" in line and " epoch " in line]
    assert progress_lines, output[-4000:]
    assert Counter(progress_lines).most_common(1)[0][1] == 1, output[-4000:]
    assert "[raydp_synth]   plan epsilon=" in proc.stdout
    assert "release written to" in proc.stdout


def test_quiet_turns_off_tunes_experiment_box(monkeypatch) -> None:
    """At verbosity 0 Tune's newer console still prints its "Configuration for
    experiment" box and result paths; with --quiet Tune gets no newer-console
    reporter at all (Tune's own switch), and the other levels keep the newer one."""
    from ray.tune.experimental.output import get_air_verbosity

    configure_console(Verbosity.DEFAULT)
    assert get_air_verbosity(tune_verbosity()) is not None
    configure_console(Verbosity.QUIET)
    assert os.environ[console.TUNE_NEW_OUTPUT_ENV] == "0"
    assert get_air_verbosity(tune_verbosity()) is None  # Tune's older reporter, silent at 0
    monkeypatch.setenv(console.TUNE_NEW_OUTPUT_ENV, "1")  # the user's choice stays
    configure_console(Verbosity.QUIET)
    assert os.environ[console.TUNE_NEW_OUTPUT_ENV] == "1"
