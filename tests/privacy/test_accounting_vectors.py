"""Golden epsilons of docs/budget-pricing.md, section 6.3 (dp-accounting 0.6.0)."""

from __future__ import annotations

import math

import dp_accounting as dpa
import pytest

from raydp_synth.privacy.accounting import epsilon_of
from raydp_synth.privacy.events import subsampled_gaussian_event

ONE_RUN = subsampled_gaussian_event(noise_multiplier=1.0, sample_rate=64 / 60000, num_steps=10_000)


def test_one_run() -> None:
    assert epsilon_of(ONE_RUN, delta=1e-5) == pytest.approx(0.8127, abs=1e-4)


def test_ten_runs_composed() -> None:
    assert epsilon_of(dpa.SelfComposedDpEvent(ONE_RUN, 10), delta=1e-5) == pytest.approx(1.9170, abs=1e-4)


@pytest.mark.parametrize(
    ("mean", "shape", "expected"),
    [
        (10, math.inf, 1.4683),  # Poisson
        (10, 1, 1.6102),  # geometric
        (10, 0, 1.4167),  # logarithmic
        (10, 0.5, 1.5175),  # truncated negative binomial
        (100, math.inf, 4.3702),
        (100, 1, 2.1764),
    ],
)
def test_repeat_and_select(mean: float, shape: float, expected: float) -> None:
    event = dpa.dp_event.RepeatAndSelectDpEvent(ONE_RUN, mean, shape)
    assert epsilon_of(event, delta=1e-5) == pytest.approx(expected, abs=1e-4)


def test_hundred_runs_composed() -> None:
    assert epsilon_of(dpa.SelfComposedDpEvent(ONE_RUN, 100), delta=1e-5) == pytest.approx(7.0092, abs=1e-4)
