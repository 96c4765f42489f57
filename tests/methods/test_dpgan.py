"""dpGAN: clip groups priced as one Gaussian of multiplier sigma/sqrt(k), their noise
and clipping, Algorithm 2, public-data options, and a sentinel for the public side."""

from __future__ import annotations

import math

import dp_accounting as dpa
import numpy as np
import pytest
import torch

from raydp_synth.data import DataInfo, ImageDataset, load_dataset
from raydp_synth.errors import ConfigError
from raydp_synth.methods import get_method
from raydp_synth.methods.components.clip_groups import (
    ClipGroups,
    cluster_bounds,
    group_sigma,
    grouped_clipped_sum,
    plan_multiplier,
)
from raydp_synth.methods.dpgan.loop import prepare
from raydp_synth.privacy.plan import Mechanism, PrivacyPlan
from raydp_synth.runtime.context import WorkerContext
from raydp_synth.runtime.dp_step import dp_sgd_step
from tests.stats import assert_gaussian_std

DPGAN = get_method("dpgan")
INFO = DataInfo(num_records=1442, image_size=16, channels=1, num_classes=10)
PUBLIC_INFO = DataInfo(num_records=1442, image_size=16, channels=1, num_classes=10,
                       public_records=60)
# dp-accounting's RDP epsilon (delta 1e-5) of 1000 Poisson(q=0.01) Gaussians with
# multiplier 1.0, computed once: four groups each noised with sigma = 2.0 cost this.
# (The paper's parallel composition would claim the multiplier 2.0: epsilon 0.686.)
GOLDEN_EPSILON = 2.101366525420273


@pytest.fixture(scope="module")
def digits() -> ImageDataset:
    return load_dataset("digits").train


def test_k_groups_cost_one_gaussian_of_multiplier_sigma_over_sqrt_k() -> None:
    info = DataInfo(num_records=25600, image_size=16, channels=1, num_classes=10,
                    public_records=100)
    config = DPGAN.make_config({"groups": 4, "batch_size": 256, "epochs": 10}, info)
    (spec,) = DPGAN.schedule(config, info)
    assert spec.sample_rate == pytest.approx(0.01) and spec.num_steps == 1000
    assert spec.sensitivity == pytest.approx(2.0)  # sqrt(k): each group rescaled to norm 1
    z = plan_multiplier(2.0, 4)
    assert z == pytest.approx(1.0) and group_sigma(z, 4) == pytest.approx(2.0)
    plan = PrivacyPlan(mechanisms=(Mechanism(name=spec.name, noise_multiplier=z,
                                             sample_rate=spec.sample_rate, num_steps=spec.num_steps,
                                             sensitivity=spec.sensitivity),),
                       delta=1e-5, target_epsilon=3.0)
    from raydp_synth.privacy import pricing
    from raydp_synth.privacy.accounting import epsilon_of

    assert epsilon_of(plan.event(), delta=1e-5) == pytest.approx(GOLDEN_EPSILON, rel=1e-9)
    # The stated epsilon is the smaller of RDP's and PLD's (both bounds of this event).
    assert plan.epsilon() == pricing.epsilon(plan.event(), delta=1e-5) <= GOLDEN_EPSILON
    single = dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.01, dpa.GaussianDpEvent(1.0)), 1000)
    assert plan.event() == dpa.ComposedDpEvent([single])


def test_calibrated_plan_meets_its_target_with_k_groups() -> None:
    for groups in (1, 2, 5):
        config = DPGAN.make_config({"groups": groups, "epochs": 5}, PUBLIC_INFO)
        plan = DPGAN.plan(config, target_epsilon=3.0, delta=1e-5, data=PUBLIC_INFO)
        assert 0.99 * 3.0 <= plan.epsilon() <= 3.0
        assert plan.mechanism("critic").sensitivity == pytest.approx(math.sqrt(groups))


def test_released_update_has_noise_z_sqrt_k_c_j_over_qn_per_group() -> None:
    """An empty sample releases noise only: group j's coordinates have std
    z*sqrt(k)*C_j/(qN). A stray 1/sqrt(B), a missing sqrt(k) or a noise that
    ignores C_j would each be off by a large factor."""
    sizes, bounds = (6000, 5000, 7000), (0.5, 2.0, 0.1)
    group_of = torch.cat([torch.full((n,), j) for j, n in enumerate(sizes)])
    groups = ClipGroups(group_of, torch.tensor(bounds, dtype=torch.float64))
    z, expected = 0.9, 100.0
    # The loop's own release: dp_sgd_step with the plan's multiplier and sensitivity
    # sqrt(k), then ClipGroups.rescale (dpgan.loop passes post=groups.rescale).
    mech = Mechanism(name="critic", noise_multiplier=z, sample_rate=0.5, num_steps=1,
                     sensitivity=math.sqrt(3))
    info = DataInfo(num_records=4, image_size=8, channels=1, num_classes=2)
    train = ImageDataset(images=np.zeros((4, 1, 8, 8), np.float32), labels=np.arange(4) % 2,
                         num_classes=2, name="empty-release")
    ctx = WorkerContext(config=None, plan=PrivacyPlan(mechanisms=(mech,), delta=1e-5,
                                                      target_epsilon=10.0),
                        data=info, train=train, rank=0, world_size=1, device=torch.device("cpu"),
                        noise_generator=torch.Generator().manual_seed(4),
                        report=lambda metrics, state: None, log=lambda line: None, dp_seed=1)
    param = torch.nn.Parameter(torch.zeros(sum(sizes), dtype=torch.float64))
    dp_sgd_step(ctx, "critic", lambda batch: torch.zeros(sum(sizes), dtype=torch.float64),
                [param], torch.optim.SGD([param], lr=1.0), expected_batch_size=expected,
                post=groups.rescale)
    released = (-param.detach()).numpy()
    for j, bound in enumerate(bounds):
        assert_gaussian_std(released[group_of.numpy() == j] * expected, z * math.sqrt(3) * bound)


def test_each_group_is_clipped_to_its_bound() -> None:
    group_of = torch.tensor([0, 0, 0, 1, 1, 2])
    groups = ClipGroups(group_of, torch.tensor([0.1, 5.0, 1.0], dtype=torch.float64))
    big = torch.tensor([[3.0, 4.0, 0.0, 30.0, 40.0, -7.0]])  # every group over its bound
    small = torch.tensor([[0.03, 0.04, 0.0, 0.3, 0.4, 0.5]])  # group 0 over, 1 and 2 under
    for record in (big, small):
        out = grouped_clipped_sum(record, groups)
        norms = torch.zeros(3).index_add_(0, group_of, out**2).sqrt()
        assert torch.all(norms <= 1 + 1e-6)
    assert torch.allclose(torch.zeros(3).index_add_(0, group_of, grouped_clipped_sum(big, groups)**2).sqrt(),
                          torch.ones(3))
    # Unclipped groups pass through, rescaled by 1/C_j only.
    assert torch.allclose(grouped_clipped_sum(small, groups)[3:], small[0, 3:] / torch.tensor([5.0, 5.0, 1.0]))


def test_algorithm_2_merges_the_most_similar_bounds_with_l2_bounds() -> None:
    group_of, merged = cluster_bounds(np.array([1.0, 5.0, 1.1, 20.0, 5.2]), 3)
    # 1.0 and 1.1 merge first (gap 0.1), then 5.0 and 5.2 (gap 0.2).
    assert group_of[0] == group_of[2] and group_of[1] == group_of[4]
    assert len({group_of[0], group_of[1], group_of[3]}) == 3
    assert sorted(merged) == pytest.approx(sorted([math.hypot(1.0, 1.1), math.hypot(5.0, 5.2), 20.0]))
    alone, bounds = cluster_bounds(np.array([3.0, 1.0]), 5)
    assert sorted(bounds) == [1.0, 3.0] and len(set(alone)) == 2


def test_public_data_options_are_refused_without_public_data() -> None:
    for values in ({"warm_start_iters": 100}, {"adaptive_clip": True}, {"groups": 5}):
        with pytest.raises(ConfigError, match="public"):
            DPGAN.make_config(values, INFO)
    assert DPGAN.make_config({}, INFO).adaptive_clip is False
    assert DPGAN.make_config({}, PUBLIC_INFO).adaptive_clip is True
    assert DPGAN.make_config({"adaptive_clip": False}, PUBLIC_INFO).adaptive_clip is False


class SentinelSplit:
    """A private split that fails on any read."""

    def __getattr__(self, name: str):
        raise AssertionError(f"the public side read the private split ({name})")

    def __len__(self) -> int:
        raise AssertionError("the public side read the private split (len)")


def _prepared(train, public: ImageDataset, config) -> tuple[torch.Tensor, list[torch.Tensor]]:
    ctx = WorkerContext(config=config, plan=None, data=PUBLIC_INFO, train=train, rank=0,
                        world_size=1, device=torch.device("cpu"),
                        noise_generator=torch.Generator().manual_seed(0),
                        report=lambda m, s: None, log=lambda line: None, dp_seed=1, public=public)
    models = prepare(ctx)
    bounds = [models.public.clip_groups().bounds for _ in range(3)]
    params = torch.cat([p.detach().flatten() for p in models.gen.parameters()])
    return params, bounds


@pytest.mark.slow
def test_warm_start_and_adaptive_bounds_read_only_public_data(digits) -> None:
    config = DPGAN.make_config({"groups": 4, "warm_start_iters": 4, "n_critic": 2, "capacity": 4,
                                "public_batch_size": 16}, PUBLIC_INFO)
    public = ImageDataset(images=digits.images[:60], labels=digits.labels[:60], num_classes=10,
                          name="public", public=True)
    sentinel, bounds = _prepared(SentinelSplit(), public, config)
    real, real_bounds = _prepared(digits, public, config)
    assert torch.equal(sentinel, real)
    assert all(torch.equal(a, b) for a, b in zip(bounds, real_bounds, strict=True))
    # ...and they do read the public records: other public records, other results.
    other = ImageDataset(images=digits.images[60:120], labels=digits.labels[60:120],
                         num_classes=10, name="public", public=True)
    moved, other_bounds = _prepared(SentinelSplit(), other, config)
    assert not torch.equal(moved, real) and not torch.equal(other_bounds[0], bounds[0])


def test_unconditional_generator_ignores_labels() -> None:
    config = DPGAN.make_config({"conditional": False, "capacity": 4}, INFO)
    gen = DPGAN.build_generator(config, INFO).eval()
    a = DPGAN.sample(gen, config, torch.zeros(4, dtype=torch.long), rng=torch.Generator().manual_seed(1))
    b = DPGAN.sample(gen, config, torch.full((4,), 7), rng=torch.Generator().manual_seed(1))
    assert torch.equal(a, b)


def test_packaged_search_space_fits_with_and_without_public_data() -> None:
    from raydp_synth.tune.search_space import load_search_space

    private_only = load_search_space(None, "dpgan", INFO)
    with_public = load_search_space(None, "dpgan", PUBLIC_INFO)
    assert {"groups", "warm_start_iters", "n_critic", "gp_weight", "lr_d", "lr_g",
            "batch_size"} <= set(with_public.params)
    # Without public data the public-only choices are dropped, with a note.
    assert set(private_only.params["groups"].choices) == {1, 2}
    assert set(private_only.params["warm_start_iters"].choices) == {0} or \
        "warm_start_iters" in private_only.fixed
    assert any("warm_start_iters" in note for note in private_only.notes)
