"""DPAF's loop, in-process with one worker: it runs exactly its plan, in every mode."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from raydp_synth.data import DataInfo, ImageDataset, load_dataset
from raydp_synth.errors import ConfigError
from raydp_synth.methods import get_method
from raydp_synth.methods.dpaf.loop import total_variation
from tests.methods.loop_run import run_loop, shared_plan

DPAF = get_method("dpaf")
#: Every mechanism releases a few times on 240 records; conv2* every mu = 2 iterations.
LOOP_SETTINGS = {"epochs": 0.5, "classifier_epochs": 0.1, "batch_size": 24, "mu": 2}


@pytest.fixture(scope="module")
def digits():
    """240 training digits: every mode's loop runs a few releases of each mechanism."""
    full = load_dataset("digits").train
    train = ImageDataset(images=full.images[:240], labels=full.labels[:240],
                         num_classes=full.num_classes, name="digits (240)")
    info = DataInfo(num_records=len(train), image_size=16, channels=1, num_classes=10)
    return train, info


@pytest.mark.slow
@pytest.mark.parametrize("aggregation", ["batch", "class"])
@pytest.mark.parametrize(("generator_loss", "g_smoothness"), [("d_hat", 0.0), ("aggregate", 1.0)])
def test_loop_runs_its_plan_and_reports_only_safe_keys(
        digits, aggregation: str, generator_loss: str, g_smoothness: float) -> None:
    train, info = digits
    config = DPAF.make_config({**LOOP_SETTINGS, "aggregation": aggregation,
                               "generator_loss": generator_loss, "g_smoothness": g_smoothness},
                              info)
    plan = shared_plan(DPAF, config, info, target_epsilon=5.0)  # the same for every mode
    reports, states = run_loop(DPAF, config, plan, info, train)
    assert all(set(r) <= DPAF.metric_allowlist for r in reports)
    assert {r["phase"] for r in reports} == {1, 2}
    # The steps run are the steps planned: the last report spends exactly the plan.
    assert states[-1]["steps"] == {m.name: m.num_steps for m in plan.mechanisms}
    assert reports[-1]["epsilon_spent"] == pytest.approx(plan.epsilon(), rel=1e-12)
    assert np.isfinite(reports[-1]["g_loss"])


@pytest.mark.slow
def test_spent_epsilon_grows_to_the_plans(digits) -> None:
    _, info = digits
    config = DPAF.make_config(LOOP_SETTINGS, info)
    plan = shared_plan(DPAF, config, info, target_epsilon=5.0)  # the loop tests' plan
    full = {m.name: m.num_steps for m in plan.mechanisms}
    half = {k: v // 2 for k, v in full.items()}
    assert plan.spent_epsilon({}) == 0.0
    assert 0 < plan.spent_epsilon(half) < plan.spent_epsilon(full)
    assert plan.spent_epsilon(full) == pytest.approx(plan.epsilon(), rel=1e-12)


def test_the_smoothness_prior_is_the_mean_absolute_difference_of_neighbours() -> None:
    flat = torch.full((3, 1, 8, 8), 0.7)
    assert total_variation(flat).item() == 0.0
    rows, cols = torch.meshgrid(torch.arange(8), torch.arange(8), indexing="ij")
    checkerboard = (((rows + cols) % 2) * 2 - 1).float()[None, None]  # +-1: every step is 2
    assert total_variation(checkerboard).item() == pytest.approx(4.0)
    stripes = (cols % 2 * 2 - 1).float()[None, None]  # only horizontal neighbours differ
    assert total_variation(stripes).item() == pytest.approx(2.0)
    # real digits are smoother than uniform noise: the prior prefers them
    real = torch.as_tensor(load_dataset("digits").train.images[:256])
    assert total_variation(real) < 0.5 * total_variation(torch.rand_like(real) * 2 - 1)


@pytest.mark.parametrize("weight", [-0.1, float("nan"), float("inf")])
def test_a_bad_smoothness_weight_is_refused(digits, weight: float) -> None:
    with pytest.raises(ConfigError, match="g_smoothness"):
        DPAF.make_config({"g_smoothness": weight}, digits[1])
