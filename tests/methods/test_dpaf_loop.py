"""DPAF's loop, in-process with one worker: it runs exactly its plan, in every mode."""

from __future__ import annotations

import numpy as np
import pytest

from raydp_synth.data import load_dataset
from raydp_synth.methods import DataInfo, get_method
from tests.methods.loop_run import run_loop

DPAF = get_method("dpaf")


@pytest.fixture(scope="module")
def digits():
    train = load_dataset("digits").train
    info = DataInfo(num_records=len(train), image_size=16, channels=1, num_classes=10)
    return train, info


@pytest.mark.parametrize("aggregation", ["batch", "class"])
@pytest.mark.parametrize("generator_loss", ["d_hat", "aggregate"])
def test_loop_runs_its_plan_and_reports_only_safe_keys(digits, aggregation: str, generator_loss: str) -> None:
    train, info = digits
    config = DPAF.make_config({"epochs": 0.5, "classifier_epochs": 0.1, "batch_size": 256, "mu": 2,
                               "aggregation": aggregation, "generator_loss": generator_loss}, info)
    plan = DPAF.plan(config, epsilon=5.0, delta=1e-5, data=info)
    reports, states = run_loop(DPAF, config, plan, info, train)
    assert all(set(r) <= DPAF.metric_allowlist for r in reports)
    assert {r["phase"] for r in reports} == {1, 2}
    # The steps run are the steps planned: the last report spends exactly the plan.
    assert states[-1]["steps"] == {m.name: m.num_steps for m in plan.mechanisms}
    assert reports[-1]["epsilon_spent"] == pytest.approx(plan.epsilon(), rel=1e-12)
    assert np.isfinite(reports[-1]["g_loss"])


def test_spent_epsilon_grows_to_the_plans(digits) -> None:
    _, info = digits
    plan = DPAF.plan(DPAF.make_config({"epochs": 2, "base_width": 8}, info), epsilon=3.0, delta=1e-5, data=info)
    full = {m.name: m.num_steps for m in plan.mechanisms}
    half = {k: v // 2 for k, v in full.items()}
    assert plan.spent_epsilon({}) == 0.0
    assert 0 < plan.spent_epsilon(half) < plan.spent_epsilon(full)
    assert plan.spent_epsilon(full) == pytest.approx(plan.epsilon(), rel=1e-12)
