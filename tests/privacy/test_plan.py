"""A plan round-trips through its JSON form, and plans written before a field existed still read."""

from __future__ import annotations

import json

import pytest

from raydp_synth.errors import ConfigError
from raydp_synth.privacy.plan import Mechanism, PrivacyPlan

PLAN = PrivacyPlan(
    mechanisms=(
        Mechanism(name="dpagg", noise_multiplier=3.0, sample_rate=0.1, num_steps=40,
                  sensitivity=2.0),
        Mechanism(name="conv2", noise_multiplier=5.0, sample_rate=0.4, num_steps=10,
                  sensitivity=1.0, every=4),
    ),
    delta=1e-5,
    target_epsilon=10.0,
)


def test_round_trip_keeps_every_field() -> None:
    restored = PrivacyPlan.from_dict(json.loads(json.dumps(PLAN.to_dict())))
    assert restored == PLAN
    assert restored.mechanism("conv2").every == 4


def test_a_plan_written_without_a_cadence_reads_as_every_release() -> None:
    old = PLAN.to_dict()
    for m in old["mechanisms"]:
        del m["every"]
    restored = PrivacyPlan.from_dict(old)
    assert [m.every for m in restored.mechanisms] == [1, 1]
    assert restored.epsilon() == PLAN.epsilon()  # the cadence does not enter the event


def test_a_cadence_below_one_is_refused() -> None:
    with pytest.raises(ConfigError, match="every=0"):
        Mechanism(name="x", noise_multiplier=1.0, sample_rate=0.1, num_steps=1, sensitivity=1.0,
                  every=0)
