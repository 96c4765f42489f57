"""DP-WGAN-GP with DP-Adam: its plan, its noise scale, clipping-independence, a study space."""

from __future__ import annotations

import math

import dp_accounting as dpa
import pytest
import torch

from raydp_synth.config import config_to_dict
from raydp_synth.data import DataInfo, load_dataset
from raydp_synth.methods import get_method
from raydp_synth.methods.components.gan_networks import Critic
from raydp_synth.methods.components.pairs import critic_record_grads
from raydp_synth.privacy.dp_sgd import clipped_sum, noised_release, split_by_shapes
from raydp_synth.runtime.seeding import seeded
from raydp_synth.tune.search_space import load_search_space
from tests.stats import assert_gaussian_std

INFO = DataInfo(num_records=1442, image_size=16, channels=1, num_classes=10)


def test_plan_is_one_poisson_subsampled_gaussian_of_the_critic() -> None:
    method = get_method("dpwgan")
    config = method.make_config({"batch_size": 256, "epochs": 10, "clip": 0.5}, INFO)
    plan = method.plan(config, target_epsilon=4.0, delta=1e-5, data=INFO)
    (critic,) = plan.mechanisms
    q = 256 / 1442
    assert critic.name == "critic" and critic.sample_rate == pytest.approx(q)
    assert critic.num_steps == math.ceil(10 / q) and critic.sensitivity == 0.5
    expected = dpa.SelfComposedDpEvent(
        dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(critic.noise_multiplier)), critic.num_steps)
    assert plan.event() == dpa.ComposedDpEvent([expected])
    assert 0.99 * 4.0 <= plan.epsilon() <= 4.0


def test_per_record_gradients_match_a_loop_over_records() -> None:
    rng = torch.Generator().manual_seed(0)
    critic = seeded(lambda: Critic(image_size=16, channels=1, num_classes=10, capacity=4), rng)
    x, f = torch.randn(4, 1, 16, 16, generator=rng), torch.randn(4, 1, 16, 16, generator=rng)
    y, a = torch.randint(10, (4,), generator=rng), torch.rand(4, 1, 1, 1, generator=rng)
    batched = critic_record_grads(critic, x, y, f, a, gp_weight=10.0)
    for i in range(4):
        xhat = (a[i] * x[i:i + 1] + (1 - a[i]) * f[i:i + 1]).requires_grad_(True)
        slope = torch.autograd.grad(critic(xhat, y[i:i + 1]).sum(), xhat, create_graph=True)[0]
        loss = (critic(f[i:i + 1], y[i:i + 1]).sum() - critic(x[i:i + 1], y[i:i + 1]).sum()
                + 10 * (slope.norm() - 1) ** 2)
        for g_loop, g_vmap in zip(torch.autograd.grad(loss, list(critic.parameters())), batched,
                                  strict=True):
            assert torch.allclose(g_loop, g_vmap[i], atol=1e-5, rtol=1e-4)


def test_released_critic_update_has_noise_sigma_c_over_qn_and_no_stray_sqrt_b() -> None:
    """An empty Poisson sample releases noise only: its std per coordinate must be
    sigma*C/(qN) (a stray 1/sqrt(B) would be off by a factor ~16 here)."""
    critic = Critic(image_size=16, channels=1, num_classes=10, capacity=4)
    shapes = [p.shape for p in critic.parameters()]
    empty = torch.zeros(0, 1, 16, 16)
    grads = critic_record_grads(critic, empty, torch.zeros(0, dtype=torch.long), empty,
                                torch.zeros(0, 1, 1, 1), gp_weight=10.0)
    sigma, clip, expected = 1.3, 0.7, 256.0
    # The step's release: the clipped sum, noised with sigma*C, over qN (dp_step.py).
    released = noised_release(clipped_sum(grads, max_grad_norm=clip, shapes=shapes),
                              noise_std=sigma * clip, expected_batch_size=expected,
                              generator=torch.Generator().manual_seed(3))
    flat = released.double().numpy()
    assert_gaussian_std(flat * expected, sigma * clip)


def _dp_adam_params(clip: float, steps: int = 5) -> torch.Tensor:
    splits = load_dataset("digits")
    x = torch.as_tensor(splits.train.images[:64])
    y = torch.as_tensor(splits.train.labels[:64])
    critic = seeded(lambda: Critic(image_size=16, channels=1, num_classes=10, capacity=4),
                    torch.Generator().manual_seed(0))
    params = list(critic.parameters())
    opt = torch.optim.Adam(params, lr=1e-3, betas=(0.5, 0.9), eps=1e-12)
    noise = torch.Generator().manual_seed(5)
    partners = torch.Generator().manual_seed(6)
    for _ in range(steps):
        f = torch.rand(64, 1, 16, 16, generator=partners) * 2 - 1
        a = torch.rand(64, 1, 1, 1, generator=partners)
        grads = critic_record_grads(critic, x, y, f, a, gp_weight=10.0)
        shapes = [p.shape for p in params]
        released = noised_release(clipped_sum(grads, max_grad_norm=clip, shapes=shapes),
                                  noise_std=1.0 * clip, expected_batch_size=64.0,
                                  generator=noise)
        for p, g in zip(params, split_by_shapes(released, shapes), strict=True):
            p.grad = g
        opt.step()
    return torch.cat([p.detach().flatten() for p in params])


def test_dp_adam_is_independent_of_a_small_clip_norm() -> None:
    """Schwabedal et al. 2020, section 3.2.1: when C is below every per-record gradient norm, each
    clipped gradient is C times a unit vector and the noise is C times a fixed
    draw, so the release scales with C and Adam's update does not change."""
    start = _dp_adam_params(1e-3, steps=0)
    small, smaller = _dp_adam_params(1e-3), _dp_adam_params(1e-4)
    moved = (small - start).norm()
    assert moved > 0
    assert (small - smaller).norm() < 1e-3 * moved


@pytest.mark.parametrize(("image_size", "capacity"), [(8, 16), (16, 16), (32, 32), (64, 32)])
def test_the_default_capacity_follows_the_declared_image_size(image_size: int,
                                                               capacity: int) -> None:
    """16 up to 16x16 (the digits' sweep), 32 above (the small-images paper's MNIST
    sweep); the data's image size or a --set image_size decides, a --set capacity wins."""
    method = get_method("dpwgan")
    data = DataInfo(num_records=60_000, image_size=image_size, channels=1, num_classes=10)
    assert method.make_config({}, data).capacity == capacity
    assert method.make_config({"capacity": 8}, data).capacity == 8
    other = DataInfo(num_records=60_000, image_size=16 if image_size > 16 else 32, channels=1,
                     num_classes=10)
    assert method.make_config({"image_size": image_size}, other).capacity == capacity
    assert method.make_config({"image_size": str(image_size)}, other).capacity == capacity  # --set


def test_the_capacity_leaves_the_plan_unchanged() -> None:
    """The critic's step has sensitivity C whatever its size: the default plans (pinned
    in tests/privacy/test_default_plans.py) do not move with the capacity rule."""
    method = get_method("dpwgan")
    data = DataInfo(num_records=60_000, image_size=32, channels=1, num_classes=10)
    adaptive = method.make_config({}, data)
    constant = method.make_config({"capacity": 16}, data)
    assert (adaptive.capacity, constant.capacity) == (32, 16)
    assert method.schedule(adaptive, data) == method.schedule(constant, data)


@pytest.mark.parametrize("image_size", [16, 32])
def test_the_packaged_space_holds_the_default_capacity(image_size: int) -> None:
    """A study's first (compose) or anchored trial is the default: its capacity must be
    one of the packaged space's choices at either image size, or the sampler would draw it."""
    method = get_method("dpwgan")
    data = DataInfo(num_records=60_000, image_size=image_size, channels=1, num_classes=10)
    default = method.make_config({}, data)
    point = load_search_space(None, "dpwgan", data).default_point(config_to_dict(default))
    assert point["capacity"] == default.capacity
