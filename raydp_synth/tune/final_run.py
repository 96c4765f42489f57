"""A study's final run: ONE trial of a fixed configuration on the sensitive data,
with the budget the accountant has left.

Strategies that choose the hyperparameters elsewhere (``--tune-on-public``:
:mod:`raydp_synth.tune.public_search`; ``--strategy subsampled``, a priced search
on a secret subset of the sensitive data: :mod:`raydp_synth.tune.subsampled_search`)
end here. The final run is an ordinary study trial
(:func:`~raydp_synth.tune.trial.run_trial`) in a Tune experiment of one sample
whose configuration is fixed, so it goes through the same path as every trial:
its plan is calibrated before it reads data, the study's accountant grants it
(and writes the ledger entry), and :func:`~raydp_synth.tune.study_release.release_best`
releases it.

Privacy: the trial is priced as a ``compose`` trial calibrated so that the plans
the accountant granted before it, composed with its own plan, meet the study's
total: it takes exactly the budget left (all of it when nothing was granted
before). The accountant re-prices the composition and refuses what would
overspend. The configuration is a fixed input: whatever chose it must be priced
by the caller (public data: nothing to price).

The subsampled final run (:func:`subsampled_final_settings`) is priced instead as the
tuning phase's curve composed with its plan (variant 1 of Koskela & Kulkarni 2023),
calibrated to the study's total and granted by the accountant as the final run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from raydp_synth.tune.progress import legacy_tune_output, with_study_progress
from raydp_synth.tune.strategies.roles import COMPOSE_TRIAL, SUBSAMPLED_FINAL_TRIAL
from raydp_synth.tune.study_settings import StudySettings
from raydp_synth.tune.trial import trial_trainable
from raydp_synth.tune.trial_metrics import study_run_config

__all__ = ["FINAL_EXPERIMENT", "final_run_settings", "run_final", "subsampled_final_settings"]

#: The final run's Tune experiment (a ``tune*`` folder: the study's release looks there).
FINAL_EXPERIMENT = "tune"


def final_run_settings(study: StudySettings, *, granted_before: int) -> StudySettings:
    """``study`` as the final run's settings: one ``compose`` trial after the
    ``granted_before`` plans the accountant holds, so its plan takes the budget left
    (:func:`~raydp_synth.tune.planning.plan_for_compose` with one remaining trial)."""
    if granted_before < 0:
        raise ValueError(f"granted_before={granted_before} must be >= 0")
    return replace(study, role=COMPOSE_TRIAL, trials=granted_before + 1, reference_event=None)


def subsampled_final_settings(study: StudySettings,
                              settings: Mapping[str, Any]) -> StudySettings:
    """``study`` (a subsampled study's settings) as its final run's: the method
    settings ``settings`` (the extrapolated best config) fixed, nothing searched, the
    plan calibrated against the tuning phase's curve (``study.tuning_rdp``)."""
    if study.tuning_rdp is None:
        raise ValueError("a subsampled final run needs the tuning phase's curve")
    fixed = {k: v for k, v in settings.items() if k != "seed"}  # the study's seed is used
    return replace(study, role=SUBSAMPLED_FINAL_TRIAL, space=study.space.with_fixed(fixed))


def run_final(study: StudySettings, config: Mapping[str, Any], *, driver_cpus: float) -> None:
    """Run the final trial of ``config`` (a Tune trial config, as a search produced
    it) under ``study`` (:func:`final_run_settings`); its checkpoint lands under
    ``study.study_dir / FINAL_EXPERIMENT`` for the release."""
    import os

    from ray import tune
    from ray.tune.schedulers import FIFOScheduler

    if not (study.role.may_be_final_run
            and (study.reference_event is None or study.role.granted_as_final)):
        raise ValueError("the final run is a compose trial (final_run_settings) or a "
                         "subsampled study's (subsampled_final_settings)")
    os.environ["TUNE_DISABLE_STRICT_METRIC_CHECKING"] = "1"
    tuner = tune.Tuner(
        trial_trainable(study, driver_cpus=driver_cpus),
        param_space=dict(config),
        tune_config=tune.TuneConfig(scheduler=FIFOScheduler(), num_samples=1),
        run_config=with_study_progress(study_run_config(FINAL_EXPERIMENT, study), study),
    )
    with legacy_tune_output():  # the study's progress table (raydp_synth.tune.progress)
        tuner.fit()
