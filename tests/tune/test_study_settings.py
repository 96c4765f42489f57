"""StudySettings: the one frozen value every trial of a study reads (no Ray needed)."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path
from typing import Any

import pytest

from raydp_synth.data import DataInfo, parse_dataset_spec
from raydp_synth.methods import get_method
from raydp_synth.tune.planning import reference_plan
from raydp_synth.tune.search_space import load_search_space
from raydp_synth.tune.strategies.roles import trial_role
from raydp_synth.tune.study_settings import StudySettings

DIGITS = DataInfo(num_records=1442, image_size=16, channels=1, num_classes=10)


def _settings(tmp_path: Path, **changes: Any) -> StudySettings:
    """The settings of a tiny study; ``role=NAME`` sets the trial role of that name."""
    if isinstance(changes.get("role"), str):
        changes["role"] = trial_role(changes["role"])
    values: dict[str, Any] = dict(
        study_name="s", study_dir=tmp_path / "s", method="dpaf", data=DIGITS,
        dataset=parse_dataset_spec("digits"), public=None, seed=0, epsilon=5.0, delta=1e-5,
        role=trial_role("compose"),
        trials=3, reference_event=None, space=load_search_space(None, "dpaf", DIGITS),
        workers=1, use_gpu=False, cpus_per_worker=1.0, score_share=0.2,
        score_classifier="logreg", public_validation=None,
    )
    return StudySettings(**{**values, **changes})


def _reference_event() -> Any:
    dpaf = get_method("dpaf")
    return reference_plan(dpaf, dpaf.make_config({}, DIGITS), DIGITS, target_epsilon=5.0,
                          delta=1e-5, mean_trials=3.0, shape=1.0, score_share=0.2).event()


def test_settings_are_frozen_and_travel_to_trials_unchanged(tmp_path: Path) -> None:
    settings = _settings(tmp_path, role="random-stopping", reference_event=_reference_event())
    assert pickle.loads(pickle.dumps(settings)) == settings  # what tune.with_parameters ships
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.epsilon = 10.0  # type: ignore[misc]


@pytest.mark.parametrize(("selection", "with_reference"),
                         [("compose", True), ("random-stopping", False)])
def test_a_reference_event_comes_exactly_with_random_stopping(
        tmp_path: Path, selection: str, with_reference: bool) -> None:
    with pytest.raises(ValueError, match="reference event"):
        _settings(tmp_path, role=selection,
                  reference_event=_reference_event() if with_reference else None)


def test_the_study_dir_is_absolute(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="absolute"):
        _settings(tmp_path, study_dir=Path("studies/s"))


@pytest.mark.parametrize("gpus", [0.0, 1.5, float("nan")])
def test_a_worker_asks_for_one_gpu_or_a_share_of_one(tmp_path: Path, gpus: float) -> None:
    assert _settings(tmp_path, use_gpu=True, gpus_per_worker=0.25).gpus_per_worker == 0.25
    with pytest.raises(ValueError, match="gpus_per_worker"):
        _settings(tmp_path, use_gpu=True, gpus_per_worker=gpus)


@pytest.mark.slow
def test_a_trial_reuses_the_drivers_plan_only_for_the_same_inputs(tmp_path: Path) -> None:
    """The budget check's plan (PlannedTrial) is what trial_plan computes for the same
    inputs; the trial function takes it only when config, grants and the study's
    settings are those it was computed with."""
    from raydp_synth.privacy.events import event_to_json
    from raydp_synth.tune.strategies.roles import trial_plan
    from raydp_synth.tune.study_settings import PlannedTrial
    from raydp_synth.tune.trial import trial_plan_of

    dpaf = get_method("dpaf")
    tiny = {"epochs": 2, "classifier_epochs": 0.5, "batch_size": 512, "base_width": 4}
    config = dpaf.make_config(tiny, DIGITS)
    study = _settings(tmp_path)
    fresh = trial_plan(dpaf, config, DIGITS, role="compose", epsilon=5.0, delta=1e-5,
                       trials=3, score_share=0.2)
    planned = PlannedTrial(inputs=study.plan_inputs(), config=config, granted=(), plan=fresh)
    study = dataclasses.replace(study, planned=planned)
    assert pickle.loads(pickle.dumps(study)) == study  # it travels with the settings
    assert trial_plan_of(study, dpaf, config, []) is fresh
    assert trial_plan_of(study, dpaf, config, [], DIGITS) is fresh  # the study's own data
    # Anything else plans afresh: another config, grants so far, other settings.
    other = dpaf.make_config({**tiny, "mu": 2}, DIGITS)
    assert trial_plan_of(study, dpaf, other, []) is not fresh
    granted = [event_to_json(fresh.event())]
    second = trial_plan_of(study, dpaf, config, granted)
    assert second is not fresh and second.epsilon() == pytest.approx(fresh.epsilon(), rel=0.05)
    assert trial_plan_of(dataclasses.replace(study, epsilon=4.0), dpaf, config, []) is not fresh


def test_a_trial_seeds_its_configuration_with_the_study_seed(tmp_path: Path) -> None:
    settings = _settings(tmp_path, seed=7, role="random-stopping",
                         reference_event=_reference_event())
    assert {settings.trial_seed() for _ in range(5)} == {7}


def test_each_restart_draws_its_own_seed(tmp_path: Path) -> None:
    """``--default-share 1``: every call (one per trial) a fresh draw in [0, 2**31),
    not the study's seed; 64 draws collide with probability about 1e-6."""
    settings = _settings(tmp_path, seed=7, role="random-stopping",
                         reference_event=_reference_event(), restarts=True)
    seeds = [settings.trial_seed() for _ in range(64)]
    assert len(set(seeds)) == 64 and all(0 <= s < 2**31 for s in seeds)
    assert settings.seed == 7  # the data split's seed stays the study's


def test_a_draw_with_no_dominated_plan_is_refused_with_its_reason(tmp_path: Path) -> None:
    """Random stopping at epsilon 1 on digits: dpwgan's draws at batch 128 have no plan
    dominated by E_ref (batch 64) at dp-accounting's fractional orders, whatever the
    noise up to the calibration's limit (docs/budget-pricing.md, 6.2). The function
    the trial calls returns why (the trial then takes a no-op grant, one of the K
    runs: test_study); a draw that fits gets its dominated plan. Under compose the
    calibration's error stands (it depends on the budget left, not the config)."""
    import math

    from raydp_synth.errors import ConfigError
    from raydp_synth.privacy.accounting import dominates
    from raydp_synth.tune.trial import plan_or_refusal

    dpwgan = get_method("dpwgan")
    reference = reference_plan(dpwgan, dpwgan.make_config({}, DIGITS), DIGITS,
                               target_epsilon=1.0, delta=1e-5, mean_trials=8.0,
                               shape=math.inf, score_share=0.2).event()
    study = _settings(tmp_path, method="dpwgan", epsilon=1.0, trials=8,
                      role="random-stopping", reference_event=reference,
                      space=load_search_space(None, "dpwgan", DIGITS))
    wide = dpwgan.make_config({"batch_size": 128, "epochs": 20}, DIGITS)
    plan, reason = plan_or_refusal(study, dpwgan, wide, [])
    assert plan is None and reason is not None
    assert "dominated by E_ref" in reason and "no noise multiplier" in reason
    plan, reason = plan_or_refusal(
        study, dpwgan, dpwgan.make_config({"batch_size": 64, "epochs": 30}, DIGITS), [])
    assert reason is None and dominates(reference, plan.event())
    compose = _settings(tmp_path, method="dpwgan", epsilon=0.01, trials=8,
                        space=load_search_space(None, "dpwgan", DIGITS))
    with pytest.raises(ConfigError):
        plan_or_refusal(compose, dpwgan, wide, [])
