from __future__ import annotations

import json
import math

import dp_accounting as dpa
import pytest

from raydp_synth.errors import ConfigError
from raydp_synth.privacy.accounting import epsilon_of
from raydp_synth.privacy.events import event_from_json, event_to_json, subsampled_gaussian_event


def test_round_trip_preserves_event_and_epsilon() -> None:
    event = dpa.ComposedDpEvent([
        subsampled_gaussian_event(noise_multiplier=1.3, sample_rate=0.01, num_steps=500),
        subsampled_gaussian_event(noise_multiplier=4.0, sample_rate=None, num_steps=1),
        dpa.dp_event.RepeatAndSelectDpEvent(dpa.GaussianDpEvent(2.0), 5, math.inf),
    ])
    restored = event_from_json(json.loads(json.dumps(event_to_json(event))))
    assert restored == event
    assert epsilon_of(restored, delta=1e-5) == epsilon_of(event, delta=1e-5)


def test_builder_shapes() -> None:
    assert subsampled_gaussian_event(noise_multiplier=1.0, sample_rate=None, num_steps=1) == dpa.GaussianDpEvent(1.0)
    assert subsampled_gaussian_event(noise_multiplier=1.0, sample_rate=1.0, num_steps=3) == dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(1.0), 3)
    assert isinstance(subsampled_gaussian_event(noise_multiplier=1.0, sample_rate=0.1, num_steps=0), dpa.NoOpDpEvent)


@pytest.mark.parametrize("kwargs", [
    {"noise_multiplier": 0.0, "sample_rate": 0.1, "num_steps": 1},
    {"noise_multiplier": 1.0, "sample_rate": 1.5, "num_steps": 1},
    {"noise_multiplier": 1.0, "sample_rate": 0.1, "num_steps": -1},
])
def test_builder_rejects_bad_parameters(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        subsampled_gaussian_event(**kwargs)


def test_unknown_event_rejected() -> None:
    with pytest.raises(ConfigError):
        event_from_json({"type": "os.system", "command": "rm"})
