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
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from ray.tune import Callback

from raydp_synth.accountant.gauges import STUDY_TAG, HeldGauges

__all__ = ["METRIC_TAG", "TRIAL_GAUGE", "TRIAL_TAG", "TrialMetricsGauges", "exported_metrics"]

#: The Ray metric name of every trial metric (one gauge, tagged by study, trial, key).
TRIAL_GAUGE = "raydp_synth_trial_metric"
TRIAL_TAG = "trial"
METRIC_TAG = "metric"


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
    the trials' metrics as gauges."""
    from ray import tune

    from raydp_synth.log import tune_verbosity
    from raydp_synth.methods import get_method
    from raydp_synth.tune.trial import TRIAL_METRICS

    allowed = get_method(study.method).metric_allowlist | TRIAL_METRICS
    return tune.RunConfig(name=experiment, storage_path=str(study.study_dir),
                          failure_config=tune.FailureConfig(max_failures=0),
                          verbose=tune_verbosity(),
                          callbacks=[TrialMetricsGauges(study.study_name, allowed)])
