"""The console: ``--quiet`` / ``--verbose`` set our logger and Ray's, one format,
progress lines on stdout and warnings on stderr. A real run's console (each worker
progress line once, no Ray Train INFO chatter) is checked by test_console_noise.py's
``assert_a_clean_training_console`` on test_local_cluster.py's ``--keep-cluster`` run."""

from __future__ import annotations

import logging
import os

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


# A real run's console (each worker line once, no Ray Train chatter, the driver's plan
# and result lines) is checked by tests/runtime/test_console_noise.py's
# assert_a_clean_training_console on the one tiny training run of the suite's runtime
# tests (test_local_cluster.py's --keep-cluster run): CI's time is the suite's.


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
