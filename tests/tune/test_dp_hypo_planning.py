"""The reference plan of a dp-hypo study meets the budget under DP-HyPO's bound (no Ray)."""

from __future__ import annotations

import pytest

from raydp_synth.data import DataInfo
from raydp_synth.methods import get_method
from raydp_synth.privacy.accounting import random_stopping_epsilon
from raydp_synth.privacy.adaptive_tuning import adaptive_random_stopping_epsilon
from raydp_synth.tune.planning import reference_plan
from raydp_synth.tune.search_space import load_search_space, make_sampler
from raydp_synth.tune.search_space.dp_hypo import space_distributions

DIGITS = DataInfo(num_records=1442, image_size=16, channels=1, num_classes=10)


def test_reference_plan_is_calibrated_to_the_dp_hypo_total() -> None:
    dpaf = get_method("dpaf")
    config = dpaf.make_config({}, DIGITS)
    common = dict(target_epsilon=5.0, delta=1e-5, mean_trials=3.0, shape=1.0, score_share=0.2)
    hypo = reference_plan(dpaf, config, DIGITS, density_ratio=2.0, **common).event()
    plain = reference_plan(dpaf, config, DIGITS, **common).event()
    total = adaptive_random_stopping_epsilon(hypo, mean=3.0, shape=1.0, delta=1e-5,
                                             density_ratio=2.0)
    assert total <= 5.0 and total == pytest.approx(5.0, rel=0.05)
    # the adaptive search pays for its adaptivity: E_ref is noisier than plain random stopping's
    assert random_stopping_epsilon(hypo, mean=3.0, shape=1.0, delta=1e-5) < random_stopping_epsilon(
        plain, mean=3.0, shape=1.0, delta=1e-5)


def test_sampler_is_built_on_a_method_space() -> None:
    space = load_search_space(None, "dpaf", DIGITS)
    sampler = make_sampler("dp-hypo", [1, 2, 3, 4], density_ratio=2.0,
                           distributions=space_distributions(space.define_by_run))
    assert set(sampler.candidates[0]) == set(space.trial_keys)
