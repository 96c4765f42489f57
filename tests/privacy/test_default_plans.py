"""Refactoring pin: every method's default plan is the one it was.

``default_plans.json`` holds, for each registered method's default config on a
digits-sized split, the calibrated plan (noise multipliers, sample rates, steps,
sensitivities) and its epsilon at target epsilon 1 and 10, delta 1e-5, with the
default selection-score share. A change of any of them is a change of the
privacy/utility trade-off a user gets and must be deliberate: regenerate the file
(the values are what ``_plans()`` returns) in the commit that explains why.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raydp_synth.data import DataInfo
from raydp_synth.methods import get_method, method_names
from raydp_synth.privacy.selection_score import DEFAULT_SCORE_SHARE

pytestmark = pytest.mark.slow  # calibrates ten plans (~50 s)

PINNED = json.loads((Path(__file__).parent / "default_plans.json").read_text())
INFO = DataInfo(num_records=1442, image_size=16, channels=1, num_classes=10, public_records=355)


def _plan(name: str, epsilon: float) -> dict:
    method = get_method(name)
    plan = method.plan(method.make_config({}, INFO), target_epsilon=epsilon, delta=1e-5, data=INFO,
                       score_share=DEFAULT_SCORE_SHARE)
    return {
        "mechanisms": [
            {"name": m.name, "noise_multiplier": m.noise_multiplier, "sample_rate": m.sample_rate,
             "num_steps": m.num_steps, "sensitivity": m.sensitivity}
            for m in plan.mechanisms
        ],
        "epsilon": plan.epsilon(),
    }


def test_pinned_methods_are_registered() -> None:
    """A pin of a renamed or removed method would pin nothing: refuse it. (A new method
    needs no pin; add one once its plan should stay put.)"""
    assert {key.split("@")[0] for key in PINNED} <= set(method_names())


@pytest.mark.parametrize("key", sorted(PINNED))
def test_default_plan_unchanged(key: str) -> None:
    name, epsilon = key.split("@")
    plan, pinned = _plan(name, float(epsilon)), PINNED[key]
    assert [m["name"] for m in plan["mechanisms"]] == [m["name"] for m in pinned["mechanisms"]]
    for got, want in zip(plan["mechanisms"], pinned["mechanisms"], strict=True):
        assert got["num_steps"] == want["num_steps"], got["name"]
        for field in ("noise_multiplier", "sample_rate", "sensitivity"):
            if want[field] is None:
                assert got[field] is None, (got["name"], field)
            else:
                assert got[field] == pytest.approx(want[field], rel=1e-9), (got["name"], field)
    assert plan["epsilon"] == pytest.approx(pinned["epsilon"], rel=1e-9)
    assert plan["epsilon"] <= float(epsilon)
