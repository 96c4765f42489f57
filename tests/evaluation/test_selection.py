"""The private selection score: its mechanism, its noise scale, its place in the plan."""

from __future__ import annotations

import random

import dp_accounting as dpa
import numpy as np
import pytest

from raydp_synth.data import DataInfo
from raydp_synth.errors import ConfigError
from raydp_synth.methods import get_method
from raydp_synth.privacy.accounting import epsilon_of
from raydp_synth.privacy.events import DiscreteGaussianDpEvent
from raydp_synth.privacy.plan import Mechanism
from raydp_synth.privacy.selection_score import (
    SELECTION_SCORE,
    correct_count,
    release_score,
    with_score_mechanism,
)
from tests.stats import std_interval

DIGITS = DataInfo(num_records=1442, image_size=16, channels=1, num_classes=10)


@pytest.fixture(scope="module")
def dpaf_plans():
    method = get_method("dpaf")
    config = method.make_config({"epochs": 20}, DIGITS)
    with_score = method.plan(config, target_epsilon=5.0, delta=1e-5, data=DIGITS, score_share=0.05)
    without = method.plan(config, target_epsilon=5.0, delta=1e-5, data=DIGITS)
    return with_score, without


@pytest.mark.slow
def test_score_is_a_discrete_gaussian_event_with_sensitivity_one_in_the_plan(dpaf_plans) -> None:
    plan, _ = dpaf_plans
    score = plan.mechanism(SELECTION_SCORE)
    assert score.sample_rate is None and score.num_steps == 1 and score.sensitivity == 1.0
    assert score.event() == DiscreteGaussianDpEvent(score.noise_multiplier)
    assert plan.event().events[-1] == DiscreteGaussianDpEvent(score.noise_multiplier)
    assert isinstance(score.event(), dpa.GaussianDpEvent)  # RDP: the Gaussian's curve
    assert plan.epsilon() <= 5.0


@pytest.mark.slow
def test_plan_with_the_score_costs_more_than_without_it(dpaf_plans) -> None:
    plan, _ = dpaf_plans
    assert plan.without(SELECTION_SCORE).epsilon() < plan.epsilon()


@pytest.mark.slow
def test_score_share_buys_the_score_budget_from_the_training_mechanisms(dpaf_plans) -> None:
    with_score, without = dpaf_plans
    for m in without.mechanisms:
        assert with_score.mechanism(m.name).noise_multiplier > m.noise_multiplier
    # The score's own cost, alone, is about its share of the budget (RDP composes
    # below the sum of the parts, so each part is above its nominal share).
    alone = epsilon_of(with_score.mechanism(SELECTION_SCORE).event(), delta=1e-5)
    assert 0.05 * 5.0 <= alone < 0.5 * 5.0


def test_score_share_is_validated() -> None:
    for bad in (-0.1, 1.0, float("nan")):
        with pytest.raises(ConfigError, match="budget share"):
            with_score_mechanism([], bad)
    assert with_score_mechanism([], 0.0) == []


def test_correct_count_has_sensitivity_one_under_add_remove() -> None:
    """Neighbouring test (docs/architecture.md, invariant 8): remove each record, and add one."""
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, size=200)
    predicted = np.where(rng.random(200) < 0.6, labels, (labels + 1) % 10)
    full = correct_count(predicted, labels)
    for i in range(len(labels)):
        keep = np.arange(len(labels)) != i
        assert abs(full - correct_count(predicted[keep], labels[keep])) <= 1
    for extra_pred, extra_label in [(3, 3), (3, 4)]:
        added = correct_count(np.append(predicted, extra_pred), np.append(labels, extra_label))
        assert abs(added - full) <= 1


def _mechanism(sigma: float) -> Mechanism:
    return Mechanism(name=SELECTION_SCORE, noise_multiplier=sigma, sample_rate=None,
                     num_steps=1, sensitivity=1.0)


def test_score_noise_has_the_planned_scale() -> None:
    """Seeded draws of the released score minus the true accuracy, in count units,
    are integers with std sigma (chi-square interval from the sample size; the
    discrete Gaussian's std equals sigma within 1e-30 at sigma 4). Their law is
    tested exactly in tests/privacy/test_discrete_gaussian.py."""
    sigma, n, draws = 4.0, 180, 20_000
    labels = np.arange(n) % 10
    predicted = labels.copy()
    predicted[:50] = (predicted[:50] + 1) % 10  # 130 correct
    source = random.Random(7)
    noise = np.array([
        release_score(predicted, labels, mechanism=_mechanism(sigma), public=False,
                      noise_source=source, classifier="logreg").value * n - 130
        for _ in range(draws)
    ])
    assert np.abs(noise - np.round(noise)).max() < 1e-9  # an integer, up to float rounding
    lo, hi = std_interval(draws)
    assert lo <= np.sqrt(np.mean(noise**2)) / sigma <= hi
    # The same check rejects a wrong scale, e.g. noise added to the accuracy
    # instead of the count (a stray 1/n) or a factor sqrt(2) off.
    lo, hi = std_interval(draws)
    for wrong in (sigma / n, sigma * np.sqrt(2), sigma / np.sqrt(2)):
        assert not lo <= np.sqrt(np.mean(noise**2)) / wrong <= hi


def test_public_split_is_scored_exactly_and_private_needs_the_mechanism() -> None:
    labels = np.arange(20) % 10
    exact = release_score(labels, labels, mechanism=None, public=True, noise_source=None,
                          classifier="cnn")
    assert exact.value == 1.0 and not exact.private and exact.noise_std == 0
    with pytest.raises(ConfigError, match="selection_score"):
        release_score(labels, labels, mechanism=None, public=False,
                      noise_source=random.Random(), classifier="cnn")
    released = release_score(labels, labels, mechanism=_mechanism(2.0), public=False,
                             noise_source=random.Random(0), classifier="cnn")
    assert released.private and released.noise_std == pytest.approx(2.0 / 20)


def test_non_private_reference_plan_has_infinite_epsilon() -> None:
    method = get_method("dpaf")
    config = method.make_config({"epochs": 20}, DIGITS)
    plan = method.non_private_plan(config, delta=1e-5, data=DIGITS)
    assert not plan.private and plan.epsilon() == float("inf")
    assert {m.name for m in plan.mechanisms} == {"classifier", "conv2", "dpagg", SELECTION_SCORE}
    assert all(m.noise_std == 0 for m in plan.mechanisms)
