"""Compose's trial plans, as every trial makes them (roles.trial_plan with the
ledger's grants so far): the last trial of a study still fits, and the whole study
uses its budget without exceeding it."""

from __future__ import annotations

import dp_accounting as dpa
import pytest

from raydp_synth.methods import get_method
from raydp_synth.methods.base import DataInfo
from raydp_synth.privacy.pricing import epsilon as stated_epsilon
from raydp_synth.tune.strategies.roles import trial_plan

DELTA = 1e-5


@pytest.mark.slow
def test_the_last_trial_of_an_eight_trial_compose_study_fits_and_uses_the_budget():
    """Regression: the trials are calibrated with PLD's slack, so RDP alone prices the
    first seven grants over the budget; the eighth trial's calibration used to search
    under RDP only and fail ("no noise multiplier reaches epsilon=0.0016")."""
    dpaf = get_method("dpaf")
    data = DataInfo(num_records=1442, image_size=16, channels=1, num_classes=10)
    config = dpaf.make_config({"epochs": 2, "classifier_epochs": 0.5, "batch_size": 512,
                               "base_width": 4, "mu": 1}, data)
    first = trial_plan(dpaf, config, data, role="compose", epsilon=10.0, delta=DELTA,
                       trials=8, score_share=0.1)
    # Trials 2-7 of the same config plan as the first (each meets the budget with
    # the copies still to come); the eighth composes with seven grants.
    granted = [first.event()] * 7
    last = trial_plan(dpaf, config, data, role="compose", epsilon=10.0, delta=DELTA,
                      trials=8, score_share=0.1, granted=granted)
    total = stated_epsilon(dpa.ComposedDpEvent([*granted, last.event()]), delta=DELTA)
    assert 10.0 * 0.99 <= total <= 10.0
