"""The console of the command-line tools: one logger, one format, Ray's chatter quiet.

Every progress and diagnostic line of the project goes through the ``raydp_synth``
logger (``logging.getLogger("raydp_synth")`` and its children) and is printed as
``[raydp_synth] message``: INFO and DEBUG on standard output, WARNING and above on
standard error. Results (the privacy statement, the evaluation table, ``budget``'s
ledger) stay plain ``print`` on standard output and are not affected by verbosity.

Three verbosities (``--quiet`` / default / ``--verbose``):

================  ===============  ==========================================
verbosity         ``raydp_synth``  Ray's loggers (``ray``, ``ray.train``, ...)
================  ===============  ==========================================
``quiet``         WARNING          WARNING, and no progress bars
``default``       INFO             WARNING
``verbose``       DEBUG            INFO (Ray's own default)
================  ===============  ==========================================

Optuna's logger is set with Ray's.

Ray Train's ``Reporting training result N: TrainingReport(...)`` line is logged at
INFO on a logger named by its module's file (:data:`RAY_FILE_LOGGERS`), outside the
``ray`` tree: it is set with Ray's loggers, in the driver and in each worker loop.

The same settings reach Ray's processes: the verbosity travels in the environment
variable :data:`VERBOSITY_ENV` (set here, inherited by a local Ray cluster, and put
in the job's and the Train workers' runtime environments by
:func:`~raydp_synth.runtime.ray_session.ensure_ray` and the driver), and each of our
worker loops calls :func:`configure_worker_console`. Ray Train's own log level is
:func:`ray_log_level` (``RunConfig(logging_config=...)``).

Ray's noise (its deprecation warnings, its C++ core-worker lines, the "Found multiple
active Ray instances" tracebacks of Train's helper actors on a shared host) is kept off
the console unless ``--verbose``, in two places: Ray's processes get
:data:`QUIET_WARNINGS` in :data:`WARNINGS_ENV` (:func:`warnings_env`), so they do not
print Ray's deprecation warnings at all; and the driver's printer of the lines Ray
forwards drops :data:`RAY_NOISE_LINES` and :data:`RAY_NOISE_TRACEBACKS`
(:class:`WorkerLogFilter`, installed by
:func:`~raydp_synth.runtime.ray_session.filter_worker_logs`); Ray's log files keep
those lines.

Why a worker's line used to print twice: Ray Train v2 replaces ``print`` in its
workers with a function that, because a Ray worker's ``sys.stdout`` is Ray's log file
and not ``sys.__stdout__``, both prints the line (to the worker's ``.out``) and logs it
on the root logger (to its ``.err``), and the driver shows both files. Our loops log
through the ``raydp_synth`` logger, whose one handler writes once and does not
propagate to the root logger; and ``RAY_TRAIN_ENABLE_PRINT_PATCH=0`` (which Ray Train
forwards from the driver to its controller and workers) turns that replacement off
for any other ``print`` in a worker.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

__all__ = [
    "LOGGER_NAME",
    "QUIET_WARNINGS",
    "RAY_LOGGERS",
    "RAY_NOISE_LINES",
    "RAY_NOISE_TRACEBACKS",
    "VERBOSITY_ENV",
    "Verbosity",
    "WARNINGS_ENV",
    "configure_console",
    "configure_worker_console",
    "current_verbosity",
    "epoch_line_label",
    "phase_progress",
    "progress",
    "quiet_ray_loggers",
    "ray_log_level",
    "trial_epoch_lines",
    "tune_verbosity",
    "RayNoiseRecordFilter",
    "WorkerLogFilter",
    "filter_ray_driver_noise",
    "is_ray_noise",
    "warnings_env",
    "worker_env",
]

#: The project's logger; modules log on ``logging.getLogger(__name__)`` below it.
LOGGER_NAME = "raydp_synth"
#: Ray's loggers kept at WARNING unless ``--verbose``.
RAY_LOGGERS = ("ray", "ray.train", "ray.tune", "ray.data")
#: Ray modules that log on a logger named by their *file* (``getLogger(__file__)``),
#: outside ``ray``'s tree: Ray Train's ``Reporting training result N: ...`` line, at
#: INFO on each report of each worker.
RAY_FILE_LOGGERS = ("ray.train.v2._internal.execution.context",)
#: The environment variable that carries the verbosity to child and Ray processes.
VERBOSITY_ENV = "RAYDP_SYNTH_VERBOSITY"
#: Ray Train's switch of its ``print`` replacement in workers (forwarded by Ray Train).
PRINT_PATCH_ENV = "RAY_TRAIN_ENABLE_PRINT_PATCH"

_PREFIX = "[raydp_synth] "


class Verbosity(enum.Enum):
    QUIET = "quiet"
    DEFAULT = "default"
    VERBOSE = "verbose"

    @property
    def level(self) -> int:
        """The ``raydp_synth`` logger's level."""
        return {Verbosity.QUIET: logging.WARNING, Verbosity.DEFAULT: logging.INFO,
                Verbosity.VERBOSE: logging.DEBUG}[self]

    @property
    def ray_level(self) -> int:
        """The level of Ray's loggers."""
        return logging.INFO if self is Verbosity.VERBOSE else logging.WARNING


class _ConsoleHandler(logging.Handler):
    """``[raydp_synth] message``: below WARNING to ``sys.stdout``, else ``sys.stderr``,
    both looked up when a record is written (so pytest's capture and a redirected
    stream see it). While a progress bar is drawn, lines go through ``tqdm.write`` so
    the bar is not broken."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter(_PREFIX + "%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
            if record.levelno >= logging.WARNING and not record.getMessage().startswith(
                    ("warning", "error")):
                text = text.replace(_PREFIX, _PREFIX + record.levelname.lower() + ": ", 1)
            stream: IO[str] = sys.stderr if record.levelno >= logging.WARNING else sys.stdout
            tqdm = sys.modules.get("tqdm")
            if tqdm is not None and getattr(tqdm.tqdm, "_instances", None):
                tqdm.tqdm.write(text, file=stream)
            else:
                stream.write(text + "\n")
            stream.flush()
        except Exception:  # noqa: BLE001 - logging's contract: never raise
            self.handleError(record)


def current_verbosity() -> Verbosity:
    """The verbosity of this process: :data:`VERBOSITY_ENV`'s (default: ``default``)."""
    try:
        return Verbosity(os.environ.get(VERBOSITY_ENV, Verbosity.DEFAULT.value))
    except ValueError:
        return Verbosity.DEFAULT


def _install(verbosity: Verbosity) -> None:
    logger = logging.getLogger(LOGGER_NAME)
    for handler in [h for h in logger.handlers if isinstance(h, _ConsoleHandler)]:
        logger.removeHandler(handler)
    logger.addHandler(_ConsoleHandler())
    logger.setLevel(verbosity.level)
    # One handler, one line: never again through a root handler (Ray Train's).
    logger.propagate = False


#: Ray Tune's switch between its newer console (the default) and its older one.
TUNE_NEW_OUTPUT_ENV = "RAY_AIR_NEW_OUTPUT"


def configure_console(verbosity: Verbosity = Verbosity.DEFAULT) -> None:
    """Set up this process's console for a command-line tool (call once, after parsing).

    Installs the one handler of the ``raydp_synth`` logger at ``verbosity``'s level,
    records the verbosity in the environment for Ray's processes, turns off Ray
    Train's ``print`` replacement in workers (unless the user set it), and sets Ray's
    loggers if Ray is already imported (:func:`quiet_ray_loggers`). With ``--quiet``,
    Tune's console is its older one (``RAY_AIR_NEW_OUTPUT=0``, unless the user set
    it): at verbosity 0 the newer one still prints its experiment box and result
    paths; the older one prints nothing."""
    os.environ[VERBOSITY_ENV] = verbosity.value
    os.environ.setdefault(PRINT_PATCH_ENV, "0")
    if verbosity is Verbosity.QUIET:
        os.environ.setdefault(TUNE_NEW_OUTPUT_ENV, "0")
    _install(verbosity)
    if "ray" in sys.modules:
        quiet_ray_loggers()


def configure_worker_console() -> None:
    """In a Ray worker or trial process: the driver's verbosity (from the environment)
    for the ``raydp_synth`` logger, with its one handler, and Ray's loggers there
    (e.g. a trial's "Checkpoint successfully created" line) at :func:`ray_log_level`
    (idempotent)."""
    _install(current_verbosity())
    quiet_ray_loggers()


def _quiet_ray_file_loggers() -> None:
    import importlib.util

    for module in RAY_FILE_LOGGERS:
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):  # another Ray version: nothing to quiet
            continue
        if spec is not None and spec.origin:
            logging.getLogger(spec.origin).setLevel(current_verbosity().ray_level)


def quiet_ray_loggers() -> None:
    """Ray's loggers at :func:`ray_log_level` in this process (call after ``import ray``:
    importing it sets ``ray`` to INFO), and Optuna's (its "A new study created" line)
    if it is imported (its first use would set it to INFO again)."""
    level = current_verbosity().ray_level
    for name in RAY_LOGGERS:
        logging.getLogger(name).setLevel(level)
    _quiet_ray_file_loggers()
    if "optuna" in sys.modules:
        import optuna

        optuna.logging.set_verbosity(level)


def ray_log_level() -> str:
    """The level name of Ray's loggers (``WARNING`` unless verbose), e.g. for
    ``ray.train.LoggingConfig`` and ``ray.init``."""
    return logging.getLevelName(current_verbosity().ray_level)


def tune_verbosity() -> int:
    """Ray Tune's ``RunConfig(verbose=...)``: 0 (silent) with ``--quiet``, 1 (the
    trial table, Tune's default) by default, 2 (every trial result) with ``--verbose``."""
    return {Verbosity.QUIET: 0, Verbosity.DEFAULT: 1, Verbosity.VERBOSE: 2}[current_verbosity()]


#: Python's warning filters (``-W``) of a process, from its environment.
WARNINGS_ENV = "PYTHONWARNINGS"
#: :data:`WARNINGS_ENV` of Ray's processes at default and quiet verbosity. Ray adds a
#: filter that shows its ``RayDeprecationWarning`` once per module, but only where no
#: ``-W`` option is set (``ray.util.annotations``: ``if not sys.warnoptions``); with
#: this one Python's default applies, which ignores deprecation warnings outside
#: ``__main__`` (a Ray worker's ``__main__`` is Ray's).
QUIET_WARNINGS = "ignore::DeprecationWarning"


def warnings_env() -> dict[str, str]:
    """The warning filters for Ray's processes: the user's :data:`WARNINGS_ENV` if set,
    else :data:`QUIET_WARNINGS` unless ``--verbose`` (then Ray's own behaviour)."""
    if os.environ.get(WARNINGS_ENV):
        return {WARNINGS_ENV: os.environ[WARNINGS_ENV]}
    if current_verbosity() is Verbosity.VERBOSE:
        return {}
    return {WARNINGS_ENV: QUIET_WARNINGS}


#: How a per-epoch line names the epsilon its run has spent so far (the reporter's
#: ``epsilon_spent`` key): a study's trials say "trial epsilon" (each trial's own,
#: restarting in each trial; the study's total is on the driver's lines), a run
#: "run epsilon". Carried to Ray's processes by :func:`worker_env`.
EPOCH_EPSILON_ENV = "RAYDP_SYNTH_EPOCH_EPSILON"
#: The per-epoch lines' label of ``epsilon_spent`` outside a study.
RUN_EPSILON_LABEL = "run epsilon"
#: The per-epoch lines' label of ``epsilon_spent`` in a study's trials.
TRIAL_EPSILON_LABEL = "trial epsilon"


def epoch_line_label(key: str) -> str:
    """How a per-epoch line names the reported metric ``key`` (the key reported to
    Tune is unchanged: only the printed label of ``epsilon_spent`` differs)."""
    if key == "epsilon_spent":
        return os.environ.get(EPOCH_EPSILON_ENV) or RUN_EPSILON_LABEL
    return key


@contextmanager
def trial_epoch_lines() -> Iterator[None]:
    """Within it, the per-epoch lines of this process and of the Ray processes it
    starts (:func:`worker_env`, read at ``ray.init``) say "trial epsilon"."""
    previous = os.environ.get(EPOCH_EPSILON_ENV)
    os.environ[EPOCH_EPSILON_ENV] = TRIAL_EPSILON_LABEL
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(EPOCH_EPSILON_ENV, None)
        else:
            os.environ[EPOCH_EPSILON_ENV] = previous


def worker_env() -> dict[str, str]:
    """Environment variables that carry the console settings to Ray's processes."""
    env = {VERBOSITY_ENV: current_verbosity().value,
           PRINT_PATCH_ENV: os.environ.get(PRINT_PATCH_ENV, "0")}
    if os.environ.get(EPOCH_EPSILON_ENV):
        env[EPOCH_EPSILON_ENV] = os.environ[EPOCH_EPSILON_ENV]
    return env


@contextmanager
def progress(total: int, description: str, *, unit: str = "step") -> Iterator[Any]:
    """A progress bar of ``total`` steps on standard error (``bar.update()`` per step,
    ``bar.set_postfix_str(...)`` to name the step). Hidden with ``--quiet``, and
    when standard error is not a terminal (a log file or a Ray job's output gets no
    bar, only the log lines)."""
    from tqdm import tqdm

    disable: bool | None = True if current_verbosity() is Verbosity.QUIET else None
    # No ETA on the bar of phases: its steps take from seconds to many minutes each, so
    # a rate of steps would promise the wrong time; each long phase has its own bar
    # (phase_progress), whose steps are alike.
    bar = tqdm(total=total, desc=description, unit=unit, disable=disable, leave=False,
               file=sys.stderr, dynamic_ncols=True,
               bar_format="{desc}: {n_fmt}/{total_fmt} {unit}s, {elapsed} |{bar}| {postfix}")
    try:
        yield bar
    finally:
        bar.close()


class _PhaseLog:
    """``phase_progress``'s counter where no bar is drawn: one INFO line at each
    quarter of the phase, with its elapsed time and the time left at that rate."""

    def __init__(self, total: int, description: str, unit: str) -> None:
        import time

        self._clock = time.monotonic
        self.total, self.description, self.unit = max(1, total), description, unit
        self.n, self._start, self._next = 0, self._clock(), 1

    def update(self, n: int = 1) -> None:
        self.n += n
        quarter = 4 * self.n // self.total
        if quarter >= self._next:
            self._next = quarter + 1
            elapsed = self._clock() - self._start
            left = elapsed * (self.total - self.n) / max(self.n, 1)
            logging.getLogger(LOGGER_NAME).info(
                f"{self.description}: {self.n}/{self.total} {self.unit}s, {elapsed:.0f} s"
                + (f", about {left:.0f} s left" if self.n < self.total else ""))


@contextmanager
def phase_progress(total: int, description: str, *, unit: str = "step") -> Iterator[Any]:
    """Progress within one long phase (a classifier's training steps): its own bar
    below :func:`progress`'s on a terminal, with an ETA from its alike steps; in a log
    (standard error not a terminal: a Ray job, a file), a line at each quarter. Nothing
    with ``--quiet``. ``.update()`` per step."""
    from tqdm import tqdm

    if current_verbosity() is Verbosity.QUIET:
        bar: Any = tqdm(total=total, disable=True)
    elif sys.stderr.isatty():
        bar = tqdm(total=total, desc=description, unit=unit, leave=False, position=1,
                   file=sys.stderr, dynamic_ncols=True)
    else:
        bar = _PhaseLog(total, description, unit)
    try:
        yield bar
    finally:
        if hasattr(bar, "close"):
            bar.close()


# --- Ray's noise on the console --------------------------------------------------------
#
# The driver prints what Ray forwards from its worker processes (the ``.out``/``.err``
# files of actors and tasks: Train's controller, its workers, Tune's trials). Some of
# it is Ray talking to itself. At default and quiet verbosity the lines below are kept
# off the user's console by :class:`WorkerLogFilter` (installed in the driver by
# :func:`~raydp_synth.runtime.ray_session.ensure_ray`); they stay in Ray's own log files
# (``/tmp/ray/session_*/logs``; Ray's deprecation warnings are, besides, not printed at
# all by processes that get :func:`warnings_env`), and ``--verbose`` shows them. Our lines
# (``[raydp_synth] ...``) always pass, and so does every other line: a Python traceback
# of our code, an exception a trial raised, Ray's fatal (``F``) C++ lines.

#: Single lines of Ray's noise: (pattern searched in a forwarded line, why it is noise).
RAY_NOISE_LINES: tuple[tuple[str, str], ...] = (
    (r"\bRayDeprecationWarning\b",
     "Ray warning about its own use of a deprecated Ray API (e.g. Ray Data's "
     "ExecutionOptions.exclude_resources in Train's controller): nothing the user can "
     "change; the source line Python prints below a warning is dropped with it"),
    (r"/ray/\S+\.py:\d+: DeprecationWarning:",
     "a DeprecationWarning raised inside Ray's own package, same reason"),
    (r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [DIWE] \d+ \d+\] "
     r"(core_worker\w*|gcs_\w+)\.cc:\d+:",
     "a C++ log line of Ray's core worker or GCS client (e.g. 'Actor with class name: "
     "PreemptionWatcher ... has constructor arguments in the object store and "
     "max_restarts > 0'): Ray's internals; fatal (F) lines still show"),
    (r"Found multiple active Ray instances",
     "Ray's state API in Train's PlacementGroupCleaner/TrainStateActor looking for 'the' "
     "local cluster on a host where another user's or test's Ray runs; our run is not "
     "affected (the same message ends the tracebacks of RAY_NOISE_TRACEBACKS)"),
    (r"Failed to query Ray Train Controller actor state",
     "Train's PlacementGroupCleaner retrying its state query (repeated every few "
     "seconds without a dashboard or with another Ray on the host); it continues"),
)
#: Tracebacks of Ray's noise: a traceback (with the line before it that introduces it,
#: e.g. "Exception in thread ..." or a Ray log line) is dropped whole when one of its
#: lines contains one of these; any other traceback is shown.
RAY_NOISE_TRACEBACKS: tuple[tuple[str, str], ...] = (
    ("Found multiple active Ray instances",
     "Train's PlacementGroupCleaner and TrainStateActor threads dying on Ray's "
     "ConnectionError when a second Ray runs on the host (63 of 198 console lines of a "
     "`train` run on a shared host); Train's run itself goes on"),
    ("Failed to send resource request for train-",
     "Train's controller telling Ray's autoscaling coordinator what the run needs: its "
     "5-s wait timed out on a busy machine (GetTimeoutError); the controller asks again "
     "every 20 s, the run goes on, and Ray's own line says it is safe to ignore"),
    ("Failed to cancel resource request for train-",
     "the same coordinator's cancel at the run's end: the request expires on its own"),
)

_NOISE_RES = tuple(re.compile(pattern) for pattern, _ in RAY_NOISE_LINES)
_TRACEBACK_HEAD = "Traceback (most recent call last):"
_CHAIN_LINES = ("During handling of the above exception, another exception occurred:",
                "The above exception was the direct cause of the following exception:")
#: A pending traceback split across two batches of one process is shown once it is
#: this old (in seconds) and not finished; a longer one is shown at this many lines.
_PENDING_MAX_AGE_S = 2.0
_PENDING_MAX_LINES = 400


def is_ray_noise(line: str) -> bool:
    """Whether one forwarded line is Ray's noise (:data:`RAY_NOISE_LINES`); our own
    ``[raydp_synth]`` lines never are."""
    if line.lstrip().startswith(_PREFIX.strip()):
        return False
    return any(pattern.search(line) for pattern in _NOISE_RES)


#: Ray's driver-side loggers whose records may be Ray's noise: ``ray.init``'s
#: "Found multiple active Ray instances ... Connecting to latest cluster" when it joins
#: a ``ray start`` cluster on a host where other Ray clusters run (our next line names
#: the cluster joined).
RAY_DRIVER_NOISE_LOGGERS = ("ray._private.services",)


class RayNoiseRecordFilter(logging.Filter):
    """Drops a log record of Ray's own driver code that is Ray's noise
    (:func:`is_ray_noise`), at default and quiet verbosity: the driver's counterpart
    of :class:`WorkerLogFilter`."""

    def filter(self, record: logging.LogRecord) -> bool:
        return (current_verbosity() is Verbosity.VERBOSE
                or not is_ray_noise(record.getMessage()))


def filter_ray_driver_noise() -> None:
    """Install :class:`RayNoiseRecordFilter` on :data:`RAY_DRIVER_NOISE_LOGGERS`, once
    (before ``ray.init``, whose own records it filters)."""
    for name in RAY_DRIVER_NOISE_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RayNoiseRecordFilter) for f in logger.filters):
            logger.addFilter(RayNoiseRecordFilter())


@dataclasses.dataclass
class _Traceback:
    lines: list[str]
    metadata: dict[str, Any]
    since: float
    complete: bool = False  # its exception line is seen (a chained one may follow)

    @property
    def noisy(self) -> bool:
        return any(marker in line for line in self.lines for marker, _ in RAY_NOISE_TRACEBACKS)


class WorkerLogFilter:
    """Drops Ray's noise from the batches of lines Ray forwards to the driver.

    A batch is Ray's ``{"ip", "pid", "is_err", "lines", ...}`` of one process's stream;
    :meth:`__call__` returns the batches to print (the same one less its noise, and a
    traceback of another process held back from an earlier batch, now shown). A
    traceback is held until its exception line to know whether it is Ray's noise
    (:data:`RAY_NOISE_TRACEBACKS`); one still unfinished at the end of a batch waits
    for the process's next batch, at most :data:`_PENDING_MAX_AGE_S` seconds."""

    def __init__(self, clock: Any = None) -> None:
        import time

        self._clock = clock or time.monotonic
        self._pending: dict[tuple[Any, ...], _Traceback] = {}
        self._skip_source_line: set[tuple[Any, ...]] = set()

    def __call__(self, batch: dict[str, Any]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        key = (batch.get("ip"), batch.get("pid"), batch.get("is_err"))
        now = self._clock()
        for other, held_back in list(self._pending.items()):
            if other != key and now - held_back.since > _PENDING_MAX_AGE_S:
                del self._pending[other]
                if not held_back.noisy:
                    out.append({**held_back.metadata, "lines": held_back.lines})
        if batch.get("pid") == "autoscaler":  # the autoscaler's events: not ours to filter
            return [*out, batch]
        metadata = {k: v for k, v in batch.items() if k != "lines"}
        lines: list[str] = []
        head_candidate = False  # the last line shown is a plain line of this batch
        block: _Traceback | None = self._pending.pop(key, None)
        for line in batch.get("lines", []):
            if block is not None:
                held = self._continues(block, line)
                if held:
                    block.lines.append(line)
                    if len(block.lines) < _PENDING_MAX_LINES:
                        continue
                if not block.noisy:  # finished (or too long to hold): decided
                    lines.extend(block.lines)
                block, head_candidate = None, False
                if held:
                    continue
            if line.strip() == _TRACEBACK_HEAD:
                # The line that introduces it ("Exception in thread ...", a log line)
                # goes with it.
                head = [lines.pop()] if head_candidate and lines[-1].strip() and not lines[
                    -1].lstrip().startswith(_PREFIX.strip()) else []
                block = _Traceback(lines=[*head, line], metadata=metadata, since=now)
                continue
            if key in self._skip_source_line:
                self._skip_source_line.discard(key)
                if line.startswith((" ", "\t")):  # the source line under a warning
                    head_candidate = False
                    continue
            if is_ray_noise(line):
                if "Warning:" in line:
                    self._skip_source_line.add(key)
                head_candidate = False
                continue
            lines.append(line)
            head_candidate = True
        if block is not None:
            if block.complete:
                if not block.noisy:
                    lines.extend(block.lines)
            else:
                self._pending[key] = block
        if lines:
            out.append({**metadata, "lines": lines})
        return out

    @staticmethod
    def _continues(block: _Traceback, line: str) -> bool:
        """Whether ``line`` belongs to the traceback ``block`` (and updates it)."""
        text = line.strip()
        if not block.complete:
            if not text or text == _TRACEBACK_HEAD or line.startswith((" ", "\t")):
                return True  # frames, source lines, carets
            block.complete = True  # the exception line
            return True
        if not text:
            return True  # a blank line, maybe before a chained exception
        if text in _CHAIN_LINES:  # the next traceback of the chain follows
            block.complete = False
            return True
        return False
