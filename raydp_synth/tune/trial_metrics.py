"""Trial metrics as Prometheus gauges: what each trial reports to Tune, per study and
trial, for Grafana (``raydp-synth dashboard``) beside the accountant's budget gauges.

:class:`TrialMetricsGauges` is a Tune callback of the study's driver: every result
Tune receives sets ``raydp_synth_trial_metric{study, trial, metric}`` (Prometheus:
``ray_raydp_synth_trial_metric``) for each numeric key the trial may report.

Privacy: only keys on the study's allow-list leave through here (the method's
``metric_allowlist`` and the trial's own :data:`~raydp_synth.tune.trial.TRIAL_METRICS`);
they are the values Tune already shows and writes to the study directory, which the
workers checked against the same allow-list (docs/architecture.md, section 3). Tune's
own bookkeeping (times, host names, iteration counters) is not exported.

The gauge goes out on each node's metrics export port, which Ray's token does not
guard (design.md, invariant 15; docs/privacy.md, "The trust boundary"). One series per
trial counts the trials, and every trial's exact score is a result the statement
assumes hidden except for the best one's: so the callback exists only for the searches
whose trial count is public and whose trials' results the statement covers one by one
(:func:`exports_trial_metrics`: compose, and a search on declared public data).
Random stopping (DP-HyPO included) and subsampled tuning export no trial series.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from ray.tune import Callback

from raydp_synth.accountant.gauges import STUDY_TAG, HeldGauges
from raydp_synth.log import tune_verbosity
from raydp_synth.methods import get_method
from raydp_synth.tune.strategies.roles import TRIAL_ROLES, TrialRole
from raydp_synth.tune.trial import TRIAL_METRICS

__all__ = ["METRIC_TAG", "TRIAL_GAUGE", "TRIAL_TAG", "TrialMetricsGauges",
           "exported_metrics", "exports_trial_metrics", "study_callbacks"]

#: The Ray metric name of every trial metric (one gauge, tagged by study, trial, key).
TRIAL_GAUGE = "raydp_synth_trial_metric"
TRIAL_TAG = "trial"
METRIC_TAG = "metric"

def exports_trial_metrics(role: TrialRole | str) -> bool:
    """Whether the trials of ``role`` (a :class:`~raydp_synth.tune.strategies.roles.TrialRole`,
    or its name) set the trial gauge: the roles whose ``live_metrics`` say so, compose's
    (its trial count is public, every trial is priced in the statement) and a search's
    on data declared public (``public-search``: no sensitive record). Any other,
    including a name no role has, is exported nowhere: fail closed."""
    if isinstance(role, str):
        found = TRIAL_ROLES.get(role)
        return found is not None and found.live_metrics
    return role.live_metrics


def exported_metrics(result: Mapping[str, Any], allowed: Iterable[str]) -> dict[str, float]:
    """The values of ``result`` that go to Prometheus: keys in ``allowed`` whose value
    is a real number (a bool counts as 0/1; -inf, a refused trial's score, is kept:
    Prometheus stores it; NaN is dropped)."""
    keys = frozenset(allowed)
    out: dict[str, float] = {}
    for key, value in result.items():
        if key not in keys or not isinstance(value, (int, float)):
            continue
        value = float(value)
        if not math.isnan(value):
            out[key] = value
    return out


class TrialMetricsGauges(Callback):
    """Sets the trial gauge from every result of every trial (in the driver process).

    Args:
        study: the study's name (the ``study`` tag, as on the budget gauges).
        allowed: the keys a trial of this study may report.
    """

    def __init__(self, study: str, allowed: Iterable[str]) -> None:
        self._study = study
        self._allowed = frozenset(allowed)
        self._gauge: HeldGauges | None = None

    def on_trial_result(self, iteration: int, trials: list[Any], trial: Any,
                        result: dict[str, Any], **info: Any) -> None:
        values = exported_metrics(result, self._allowed)
        if not values:
            return
        if self._gauge is None:  # Ray is up by now: Tune calls this from its loop
            self._gauge = HeldGauges({TRIAL_GAUGE: (
                TRIAL_GAUGE, "A trial's reported metric (allow-listed)",
                (STUDY_TAG, TRIAL_TAG, METRIC_TAG))})
        for key, value in values.items():
            self._gauge.set(TRIAL_GAUGE, value, {STUDY_TAG: self._study,
                                                 TRIAL_TAG: trial.trial_id, METRIC_TAG: key})


def study_run_config(experiment: str, study: Any) -> Any:
    """Tune's ``RunConfig`` of a study's experiment ``experiment`` (a
    :class:`~raydp_synth.tune.study_settings.StudySettings`' study): under the study
    directory, a failed trial never rerun (``max_failures=0``: a granted trial counts
    in full and is not granted again), Tune's console at the study's verbosity, and
    the trials' metrics as gauges where the strategy allows it (:func:`study_callbacks`)."""
    from ray import tune

    return tune.RunConfig(name=experiment, storage_path=str(study.study_dir),
                          failure_config=tune.FailureConfig(max_failures=0),
                          verbose=tune_verbosity(), callbacks=study_callbacks(study))


def study_callbacks(study: Any) -> list[Any]:
    """The Tune callbacks of a search under ``study``: the trial gauge where
    :func:`exports_trial_metrics` allows it, none otherwise."""
    if not exports_trial_metrics(study.role):
        return []
    allowed = get_method(study.method).metric_allowlist | TRIAL_METRICS
    return [TrialMetricsGauges(study.study_name, allowed)]
