"""What the operator reads while a study runs, in the driver's output (a terminal, or
the job's driver log on the Ray dashboard's Jobs page under ``ray job submit``).

* :class:`StudyProgressReporter`: Ray Tune's progress table (a ``CLIReporter``) with
  each trial's ``score`` and ``trial epsilon``, finished trials sorted by score, and the
  study's running budget statement in its header (:func:`budget_line`).
* :class:`StudySummaryLog`: one ``[raydp_synth] study NAME: ...`` line at each grant,
  at each finished trial (its score and epsilon) and when the search ends.

Both ask the study's accountant for its :meth:`~raydp_synth.accountant.actor.BudgetAccountant.status`
with one query in flight at most, waiting half a second at most for it while the search
runs (:class:`StatusPoll`): a table printed while the accountant is busy shows the last
answer it had, and Tune's loop is never held up for longer.

Privacy (design.md, section 3 and invariants 13 and 15): the table's columns are keys a
trial may report (:data:`~raydp_synth.tune.trial.TRIAL_METRICS`: the selection score, a
mechanism of the granted plan; the plan's epsilon, public arithmetic), which Tune
prints and writes to the study directory anyway. The driver's output is curator-only
(the dashboard and its job logs are behind Ray's token: docs/privacy.md, "The trust
boundary"), yet the lines here follow the gauges' rule, so that a log passed on says no
more than the metrics port: the spent epsilon and the counts of grants only where the
pricing mode publishes them while the study runs
(:data:`~raydp_synth.accountant.gauges.LIVE_MODES`: compose, whose trial count is
public). Under random stopping, DP-HyPO and subsampled tuning a count of grants is the
secret K and a subsampled study's spent epsilon moves when its tuning phase ends: the
header then states the budget alone, no line is written per grant or per trial, and
the spent epsilon is stated once, at the release (``[raydp_synth] released ...``).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time
from collections.abc import Iterator, Mapping
from typing import Any

import ray
from ray.tune import Callback, CLIReporter

from raydp_synth.accountant import get_accountant
from raydp_synth.accountant.gauges import LIVE_MODES
from raydp_synth.log import TUNE_NEW_OUTPUT_ENV

__all__ = ["METRIC_COLUMNS", "StatusPoll", "StudyProgressReporter", "StudySummaryLog",
           "budget_line", "grant_line", "legacy_tune_output", "trial_line",
           "with_study_progress"]

_LOG = logging.getLogger(__name__)

#: The trial keys the table shows (result key -> column), all on the trial's
#: allow-list (:data:`~raydp_synth.tune.trial.TRIAL_METRICS`).
METRIC_COLUMNS: dict[str, str] = {"score": "score", "trial_epsilon": "trial epsilon",
                                  "epoch": "epoch"}

#: Seconds between two progress tables while the search runs (Tune's new console
#: prints every 30 s too); the last one is printed when the search ends.
REPORT_EVERY_S = 30

#: Seconds between two status queries of :class:`StudySummaryLog`.
POLL_EVERY_S = 1.0


def _number(value: float) -> str:
    """An epsilon to 4 decimals, as the release's line states it (3.9999 stays below a
    budget of 4), without trailing zeros."""
    return f"{value:.4f}".rstrip("0").rstrip(".")


def budget_line(status: Mapping[str, Any] | None, *, trials: int | None = None) -> str:
    """The study's running statement from the accountant's ``status`` (None: not known
    yet): under a mode of :data:`~raydp_synth.accountant.gauges.LIVE_MODES` the spent
    epsilon of the budget and the trials granted of ``trials`` (compose: at most that
    many); under any other mode the budget alone."""
    if status is None:
        return "budget: asking the study's accountant"
    budget = (f"epsilon {_number(float(status['budget_epsilon']))}, "
              f"delta {float(status['delta']):g}")
    if status["mode"] not in LIVE_MODES:
        return (f"budget: {budget} for the whole search ({status['mode']}: the spent "
                "epsilon is stated at the release)")
    granted = int(status["trials_granted"])
    of = f" of at most {trials}" if trials else ""
    plural = "s" if (trials or granted) != 1 else ""
    return (f"budget: spent epsilon {_number(float(status['spent_epsilon']))} of {budget} "
            f"({status['mode']}); {granted}{of} trial{plural} granted")


def grant_line(study: str, status: Mapping[str, Any], *, trials: int | None = None) -> str:
    """The line written when the ``trials_granted``-th grant of a live-mode study is
    seen: ``study S: trial 2 of at most 3 granted; spent epsilon 6.2 of 10 (delta 1e-05)``."""
    of = f" of at most {trials}" if trials else ""
    return (f"study {study}: trial {int(status['trials_granted'])}{of} granted; spent "
            f"epsilon {_number(float(status['spent_epsilon']))} of "
            f"{_number(float(status['budget_epsilon']))} (delta {float(status['delta']):g})")


def trial_line(study: str, trial_id: str, result: Mapping[str, Any]) -> str | None:
    """The line of a finished trial of a live-mode study: its score and its plan's
    epsilon (None: the trial reported neither)."""
    score, epsilon = result.get("score"), result.get("trial_epsilon")
    if not isinstance(score, (int, float)) and not isinstance(epsilon, (int, float)):
        return None
    parts = []
    if isinstance(score, (int, float)):
        parts.append("refused, no score" if math.isinf(score) and score < 0
                     else f"score {score:.4f}")
    if isinstance(epsilon, (int, float)):
        parts.append(f"trial epsilon {_number(float(epsilon))}")
    return f"study {study}: trial {trial_id} finished: {', '.join(parts)}"


class StatusPoll:
    """The study's accountant status, asked without waiting: :meth:`latest` returns the
    last answer received (None before the first) and has one query in flight at most.

    The accountant is looked up by the study's name when first needed, so that a
    pickled copy (Tune saves its run config, this included, with the experiment) holds
    no actor handle: a restored experiment finds the accountant of its own cluster.
    """

    def __init__(self, study: str) -> None:
        self.study = study
        self._handle: Any = None
        self._pending: Any = None
        self._latest: dict[str, Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"study": self.study, "_handle": None, "_pending": None, "_latest": None}

    def latest(self, wait_s: float = 0.0) -> dict[str, Any] | None:
        """The newest status received: asks the accountant unless a query is in flight,
        and waits up to ``wait_s`` for its answer. Never raises: the table and the
        lines must not stop a study (an accountant that cannot answer leaves the last
        status shown)."""
        try:
            if self._pending is None:
                if self._handle is None:
                    self._handle = get_accountant(self.study)
                self._pending = self._handle.status.remote()
            ready, _ = ray.wait([self._pending], timeout=wait_s)
            if ready:
                pending, self._pending = self._pending, None
                self._latest = ray.get(pending)
        except Exception as exc:  # noqa: BLE001 - progress output never ends a study
            _LOG.debug(f"no budget status from the accountant of study {self.study}: {exc}")
            self._handle = self._pending = None
        return self._latest


class StudyProgressReporter(CLIReporter):
    """Tune's progress table of a study: metric columns ``score``, ``trial epsilon`` and
    ``epoch`` (:data:`METRIC_COLUMNS`), finished trials sorted by score (best first),
    the current best trial, and :func:`budget_line` under Tune's ``== Status ==``.

    Args:
        study: the study's name (its accountant's).
        trials: the study's ``--trials`` (compose: at most that many).
        max_report_frequency: seconds between two tables while the search runs.
    """

    def __init__(self, study: str, *, trials: int | None = None,
                 max_report_frequency: int = REPORT_EVERY_S) -> None:
        super().__init__(metric_columns=dict(METRIC_COLUMNS), metric="score", mode="max",
                         sort_by_metric=True, print_intermediate_tables=True,
                         max_report_frequency=max_report_frequency)
        self.trials = trials
        self.poll = StatusPoll(study)

    def report(self, trials: list[Any], done: bool, *sys_info: str) -> None:
        status = self.poll.latest(wait_s=2.0 if done else 0.5)
        self._print(self._progress_str(trials, done, *sys_info,
                                       budget_line(status, trials=self.trials)))


class StudySummaryLog(Callback):
    """One ``[raydp_synth]`` line per grant, per finished trial and at the search's end
    (live modes; the end line only otherwise), from the accountant's status, in the
    driver that runs Tune.

    Args:
        study: the study's name (its accountant's).
        trials: the study's ``--trials`` (compose: at most that many).
    """

    def __init__(self, study: str, *, trials: int | None = None) -> None:
        self.study = study
        self.trials = trials
        self.poll = StatusPoll(study)
        self._granted_seen: int | None = None
        self._polled_at = -math.inf

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_granted_seen": None, "_polled_at": -math.inf}

    def _grants(self, wait_s: float = 0.0) -> dict[str, Any] | None:
        """The latest status; a line when the count of grants has grown since the last
        status (the first one is the baseline: a resumed study's earlier grants are not
        new)."""
        status = self.poll.latest(wait_s=wait_s)
        if status is None or status["mode"] not in LIVE_MODES:
            return status
        granted = int(status["trials_granted"])
        if self._granted_seen is not None and granted > self._granted_seen:
            _LOG.info(grant_line(self.study, status, trials=self.trials))
        if self._granted_seen is None or granted > self._granted_seen:
            self._granted_seen = granted
        return status

    def on_step_end(self, iteration: int, trials: list[Any], **info: Any) -> None:
        now = time.monotonic()
        if now - self._polled_at >= POLL_EVERY_S:
            self._polled_at = now
            self._grants()

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any,
                          **info: Any) -> None:
        status = self._grants(wait_s=1.0)
        if status is None or status["mode"] not in LIVE_MODES:
            return
        line = trial_line(self.study, str(trial.trial_id), trial.last_result or {})
        if line is not None:
            _LOG.info(line)

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        status = self._grants(wait_s=5.0)
        if status is not None:  # budget_line states the budget alone outside LIVE_MODES
            _LOG.info(f"study {self.study}: search done; {budget_line(status, trials=self.trials)}")


def with_study_progress(run_config: Any, study: Any) -> Any:
    """``run_config`` (Tune's ``RunConfig`` of the study's experiment) with the study's
    progress table (:class:`StudyProgressReporter`) and lines (:class:`StudySummaryLog`);
    ``study``: a :class:`~raydp_synth.tune.study_settings.StudySettings`. Tune uses the
    table only under :func:`legacy_tune_output`."""
    run_config.progress_reporter = StudyProgressReporter(study.study_name, trials=study.trials)
    run_config.callbacks = [*(run_config.callbacks or []),
                            StudySummaryLog(study.study_name, trials=study.trials)]
    return run_config


@contextlib.contextmanager
def legacy_tune_output() -> Iterator[None]:
    """Run a ``Tuner.fit()`` under Tune's older console (``RAY_AIR_NEW_OUTPUT=0``), the
    one that prints the run config's ``progress_reporter``: Ray 2.60's newer console
    (its default) ignores a reporter, with a warning. A value the user set is kept; the
    setting is restored after."""
    if TUNE_NEW_OUTPUT_ENV in os.environ:
        yield
        return
    os.environ[TUNE_NEW_OUTPUT_ENV] = "0"
    try:
        yield
    finally:
        os.environ.pop(TUNE_NEW_OUTPUT_ENV, None)
