"""DPAF charges exactly the plan it runs."""

from __future__ import annotations

import math

import dp_accounting as dpa
import pytest
import torch

from raydp_synth.data import DataInfo
from raydp_synth.errors import ConfigError
from raydp_synth.methods import get_method
from raydp_synth.methods.dpaf.mechanisms import dpagg
from raydp_synth.methods.dpaf.networks import DiscriminatorParts
from raydp_synth.privacy.pricing import epsilon as stated_epsilon
from tests.stats import assert_gaussian_std

DIGITS = DataInfo(num_records=1437, image_size=16, channels=1, num_classes=10)
DPAF = get_method("dpaf")
SMALL = {"epochs": 4, "classifier_epochs": 1, "base_width": 8}


@pytest.fixture(scope="module")
def plan_and_config():
    config = DPAF.make_config(SMALL, DIGITS)
    return DPAF.plan(config, target_epsilon=5.0, delta=1e-5, data=DIGITS), config


@pytest.mark.slow
def test_plan_structure(plan_and_config) -> None:
    plan, config = plan_and_config
    n = DIGITS.num_records
    cls, conv2, agg = (plan.mechanism(k) for k in ("classifier", "conv2", "dpagg"))
    assert cls.sample_rate == pytest.approx(config.classifier_batch_size / n)
    assert agg.sample_rate == pytest.approx(config.batch_size / n)
    assert conv2.sample_rate == pytest.approx(config.mu * config.batch_size / n)  # virtual batch mu*B
    assert agg.num_steps == math.ceil(config.epochs * n / config.batch_size)
    assert conv2.num_steps == agg.num_steps // config.mu
    # The loop's cadence is the plan's: conv2* releases once every mu DPAGG iterations.
    assert (conv2.every, agg.every, cls.every) == (config.mu, 1, 1)
    assert cls.num_steps == math.ceil(config.classifier_epochs * n / config.classifier_batch_size)
    arch = config.architecture(channels=1, num_classes=10)
    assert agg.sensitivity == pytest.approx(math.sqrt(arch.agg_maps) * arch.agg_map_size)
    assert conv2.sensitivity == config.clip_conv2 and cls.sensitivity == config.clip_classifier


@pytest.mark.slow
def test_plan_epsilon_is_dp_accountings_value(plan_and_config) -> None:
    plan, _ = plan_and_config
    event = dpa.ComposedDpEvent([
        dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(m.sample_rate, dpa.GaussianDpEvent(m.noise_multiplier)), m.num_steps)
        for m in plan.mechanisms
    ])
    assert plan.epsilon() == pytest.approx(stated_epsilon(event, delta=1e-5), rel=1e-12)
    assert 0.98 * 5.0 <= plan.epsilon() <= 5.0


@pytest.mark.slow
def test_dpagg_noise_has_std_sigma3_sqrt_m_p(plan_and_config) -> None:
    plan, config = plan_and_config
    agg = plan.mechanism("dpagg")
    arch = config.architecture(channels=1, num_classes=10)
    assert agg.noise_std == pytest.approx(agg.noise_multiplier * math.sqrt(arch.agg_maps) * arch.agg_map_size)
    parts = DiscriminatorParts(arch)
    gen = torch.Generator().manual_seed(0)
    empty = torch.zeros(0, 1, 16, 16), torch.zeros(0, dtype=torch.long)
    noise = torch.cat([dpagg(parts, *empty, noise_std=agg.noise_std, generator=gen).ravel() for _ in range(80)])
    assert noise.numel() >= 10_000
    assert_gaussian_std(noise.numpy(), agg.noise_std)
    # Around a real batch, the release is the clean feature sum plus the same noise.
    images, labels = torch.rand(8, 1, 16, 16) * 2 - 1, torch.arange(8)
    with torch.no_grad():
        clean = parts.features(images, labels).sum(0)
    diffs = torch.cat([(dpagg(parts, images, labels, noise_std=agg.noise_std, generator=gen) - clean).ravel()
                       for _ in range(80)])
    assert_gaussian_std(diffs.numpy(), agg.noise_std)


def test_mu_larger_than_the_run_is_refused() -> None:
    config = DPAF.make_config({"epochs": 0.1, "mu": 50}, DIGITS)
    with pytest.raises(ConfigError, match="mu=50"):
        DPAF.plan(config, target_epsilon=1.0, delta=1e-5, data=DIGITS)


def test_batch_larger_than_dataset_is_refused() -> None:
    config = DPAF.make_config({"batch_size": 5000}, DIGITS)
    with pytest.raises(ConfigError, match="batch_size"):
        DPAF.plan(config, target_epsilon=1.0, delta=1e-5, data=DIGITS)


@pytest.mark.parametrize(("values", "match"), [
    ({"layer_split": "C2-C1-C1"}, "at most 3"),
    ({"budget_split": "0.1,0.9"}, "budget_split"),
    ({"topk_fraction": 0}, "topk_fraction"),
    ({"mu": "eight"}, "mu"),
    ({"no_such_key": 1}, "unknown setting"),
])
def test_bad_configs(values: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        DPAF.make_config(values, DIGITS)


@pytest.mark.slow
def test_generator_width_costs_no_privacy() -> None:
    narrow = DPAF.make_config({**SMALL, "g_base_width": None}, DIGITS)  # G as wide as D
    wide = DPAF.make_config({**SMALL, "g_base_width": 64}, DIGITS)
    plan_narrow = DPAF.plan(narrow, target_epsilon=5.0, delta=1e-5, data=DIGITS)
    plan_wide = DPAF.plan(wide, target_epsilon=5.0, delta=1e-5, data=DIGITS)
    assert plan_narrow.mechanisms == plan_wide.mechanisms
    g_narrow, g_wide = DPAF.build_generator(narrow, DIGITS), DPAF.build_generator(wide, DIGITS)
    assert sum(p.numel() for p in g_wide.parameters()) > 4 * sum(p.numel() for p in g_narrow.parameters())
