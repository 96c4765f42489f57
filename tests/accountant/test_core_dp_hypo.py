"""The accountant's random-stopping pricing with a density-ratio bound c (dp-hypo):
priced by DP-HyPO's bound, stated with it, and a resume with another c is refused."""

from __future__ import annotations

import pytest

from raydp_synth.accountant.core import LEDGER_NAME, StudyBudget, StudySettings, new_study_header
from raydp_synth.accountant.ledger import Ledger
from raydp_synth.errors import ConfigError
from raydp_synth.privacy.accounting import random_stopping_epsilon
from raydp_synth.privacy.adaptive_tuning import adaptive_random_stopping_epsilon
from raydp_synth.privacy.events import event_from_json, event_to_json, subsampled_gaussian_event

DELTA = 1e-5


REFERENCE = event_to_json(subsampled_gaussian_event(noise_multiplier=2.0, sample_rate=0.01,
                                                    num_steps=200))


def _settings(c: float, epsilon: float = 20.0, distribution: str = "geometric") -> StudySettings:
    return StudySettings(epsilon=epsilon, delta=DELTA, mode="random-stopping", trials=4,
                         distribution=distribution, reference_event=REFERENCE, density_ratio=c)


def test_priced_by_dp_hypo_and_c_one_is_papernot_steinke():
    ref = event_from_json(REFERENCE)
    plain = _settings(1.0)
    assert plain.random_stopping_epsilon() == random_stopping_epsilon(
        ref, mean=4, shape=1.0, delta=DELTA)
    hypo = _settings(2.0)
    assert hypo.random_stopping_epsilon() == adaptive_random_stopping_epsilon(
        ref, mean=4, shape=1.0, delta=DELTA, density_ratio=2.0)
    assert hypo.random_stopping_epsilon() > plain.random_stopping_epsilon()


def test_budget_refuses_a_c_the_budget_cannot_pay():
    affordable = _settings(1.0).random_stopping_epsilon() * 1.01
    _settings(1.0, epsilon=affordable)
    with pytest.raises(ConfigError, match="calibrate the reference plan"):
        _settings(3.0, epsilon=affordable)


def test_c_validation_and_modes():
    for bad in (0.9, float("inf"), float("nan")):
        with pytest.raises(ConfigError, match="--hypo-c"):
            _settings(bad)
    with pytest.raises(ConfigError, match="random stopping only"):
        StudySettings(epsilon=1.0, delta=DELTA, mode="compose", trials=4, density_ratio=2.0)
    with pytest.raises(ConfigError, match="truncated negative binomial"):
        _settings(2.0, distribution="poisson")


def test_header_statement_and_resume_with_another_c(tmp_path):
    settings = _settings(2.0)
    header = new_study_header(settings, name="t")
    assert header["density_ratio"] == 2.0
    Ledger(tmp_path / LEDGER_NAME).append(header, create=True)
    entries = Ledger(tmp_path / LEDGER_NAME).entries()
    budget = StudyBudget.replay(entries, source=tmp_path)  # settings from the header
    assert budget.settings.density_ratio == 2.0
    statement = budget.statement()
    assert "DP-HyPO" in statement["theorem"] and statement["density_ratio"] == 2.0
    assert statement["epsilon"] == settings.random_stopping_epsilon()
    with pytest.raises(ConfigError, match="density_ratio"):
        StudyBudget.replay(entries, settings=_settings(3.0))
    with pytest.raises(ConfigError, match="density_ratio"):
        StudyBudget.replay(entries, settings=_settings(1.0))
    # a c = 1 header carries no density_ratio (ledgers from before dp-hypo still match)
    plain = new_study_header(_settings(1.0), name="p")
    assert plain["density_ratio"] is None
    assert "Papernot" in StudyBudget(_settings(1.0), plain).statement()["theorem"]
