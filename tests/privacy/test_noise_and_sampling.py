"""Noise scales (statistical tests that also reject wrong scales) and Poisson sampling."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from raydp_synth.privacy.dp_sgd import (
    clip_per_record,
    clipped_sum,
    noised_release,
    topk_per_record,
)
from raydp_synth.privacy.noise import noisy_sum
from raydp_synth.privacy.sampling import PoissonSampler, shard_indices
from tests.stats import assert_gaussian_std


def test_noisy_sum_adds_noise_of_the_given_std() -> None:
    gen = torch.Generator().manual_seed(0)
    zero = torch.zeros(20_000)
    assert_gaussian_std(noisy_sum(zero, noise_std=3.7, generator=gen).numpy(), 3.7)


def test_noise_test_rejects_wrong_scales() -> None:
    gen = torch.Generator().manual_seed(1)
    samples = noisy_sum(torch.zeros(20_000), noise_std=3.7, generator=gen).numpy()
    for wrong in (3.7 * 1.05, 3.7 / 1.05, 3.7 / math.sqrt(64)):
        with pytest.raises(AssertionError):
            assert_gaussian_std(samples, wrong)


def test_noisy_sum_keeps_the_signal() -> None:
    gen = torch.Generator().manual_seed(2)
    signal = torch.linspace(-5, 5, 20_000)
    assert_gaussian_std((noisy_sum(signal, noise_std=0.5, generator=gen) - signal).numpy(), 0.5)


def test_noise_is_drawn_on_the_generators_device() -> None:
    # CPU: the same draws as before noise followed the generator's device (bit for bit).
    draws = noisy_sum(torch.zeros(50), noise_std=2.0, generator=torch.Generator().manual_seed(4))
    assert torch.equal(draws, torch.normal(0.0, 2.0, size=(50,), generator=torch.Generator().manual_seed(4)))
    if torch.cuda.is_available():
        gen = torch.Generator(device="cuda").manual_seed(4)
        assert noisy_sum(torch.zeros(50, device="cuda"), noise_std=2.0, generator=gen).is_cuda


def test_clipping_bounds_each_record() -> None:
    g = torch.randn(64, 1000) * torch.logspace(-3, 2, 64)[:, None]
    clipped = clip_per_record(g, max_norm=1.5)
    norms = clipped.norm(dim=1)
    assert torch.all(norms <= 1.5 * (1 + 1e-6))
    small = g.norm(dim=1) < 1.5
    assert torch.allclose(clipped[small], g[small])  # small records untouched
    assert torch.allclose(norms[~small], torch.full_like(norms[~small], 1.5), rtol=1e-5)


@pytest.mark.parametrize("d", [100, 2048, 5000, 200_000])
def test_topk_keeps_the_largest_fraction_of_each_record(d: int) -> None:
    g = torch.randn(8, d, generator=torch.Generator().manual_seed(d))
    kept = topk_per_record(g, fraction=0.9)
    frac = (kept != 0).float().mean(dim=1)
    # Exact selection up to 2048 entries; beyond, a quantile estimated on >= 1024 of
    # the row's entries: std sqrt(0.9 * 0.1 / 1024) = 0.0094, so 0.04 is > 4 std.
    tolerance = 1 / d if d <= 2048 else 0.04
    assert torch.all((frac - 0.9).abs() <= tolerance + 1e-9)
    # What is kept is larger in magnitude than what is dropped (per record).
    for row, k in zip(g, kept, strict=True):
        assert row[k == 0].abs().max() <= row[k != 0].abs().min()


def _release(grads: list[torch.Tensor], *, clip: float, sigma: float, expected_batch: float,
             generator: torch.Generator, shapes: list[torch.Size]) -> torch.Tensor:
    """A DP-SGD release as the step makes it: the clipped sum a method's pre-noise
    function returns, then ``noised_release`` with the plan's std sigma*C (dp_step.py)."""
    summed = clipped_sum(grads, max_grad_norm=clip, shapes=shapes)
    return noised_release(summed, noise_std=sigma * clip, expected_batch_size=expected_batch,
                          generator=generator)


def test_a_release_with_no_records_is_noise_of_std_sigma_c_over_qn() -> None:
    sigma, clip, expected_batch = 1.3, 0.7, 37.5
    shapes = [torch.Size([100, 50]), torch.Size([200])]
    grads = [torch.zeros(0, *s) for s in shapes]
    gen = torch.Generator().manual_seed(3)
    samples = np.concatenate([
        _release(grads, clip=clip, sigma=sigma, expected_batch=expected_batch, generator=gen,
                 shapes=shapes).numpy()
        for _ in range(4)
    ])
    # Exactly sigma * C / (q N): no stray 1/sqrt(B) (Schwabedal, Michel and Riontino 2020 3.1).
    assert_gaussian_std(samples, sigma * clip / expected_batch)


def test_a_release_divides_by_expected_not_realised_batch() -> None:
    shapes = [torch.Size([3])]
    grads = [torch.ones(5, 3) * 0.1]  # 5 records, norms below the clip norm
    out = _release(grads, clip=1.0, sigma=1e-9, expected_batch=10.0,
                   generator=torch.Generator().manual_seed(0), shapes=shapes)
    assert torch.allclose(out, torch.full((3,), 0.05), atol=1e-6)


def test_clipped_sum_is_zero_for_an_empty_batch() -> None:
    out = clipped_sum([torch.zeros(0, 4, 2)], max_grad_norm=1.0, shapes=[torch.Size([4, 2])])
    assert out.shape == (8,) and torch.count_nonzero(out) == 0


@pytest.mark.parametrize("topk", [1.0, 0.9])
@pytest.mark.parametrize("sizes", [[(3, 4), (5,), (2, 2, 2)], [(40, 30), (1,), (77, 13), (500,)]])
def test_clipped_sum_equals_clipping_the_concatenated_records(topk: float, sizes: list[tuple[int, ...]]) -> None:
    gen = torch.Generator().manual_seed(len(sizes))
    # Norms from well below to well above C: some records clipped, some not.
    scale = torch.logspace(-2, 2, 16)
    grads = [torch.randn(16, *s, generator=gen) * scale.view(-1, *[1] * len(s)) for s in sizes]
    flat = torch.cat([g.flatten(1) for g in grads], dim=1)
    reference = clip_per_record(topk_per_record(flat, fraction=topk), max_norm=1.3).sum(dim=0)
    out = clipped_sum(grads, max_grad_norm=1.3, topk_fraction=topk)
    assert out.shape == reference.shape
    assert torch.allclose(out, reference, rtol=1e-5, atol=1e-6)


def test_shards_partition_the_dataset() -> None:
    shards = [shard_indices(101, rank=r, world_size=3) for r in range(3)]
    joined = torch.cat(shards).sort().values
    assert torch.equal(joined, torch.arange(101))


def test_poisson_sampler_rate_and_empty_batches() -> None:
    n, q, draws = 400, 0.05, 2000
    sampler = PoissonSampler(torch.arange(n), sample_rate=q, generator=torch.Generator().manual_seed(0))
    sizes = np.array([len(sampler.sample()) for _ in range(draws)])
    # Binomial(n, q): mean within 6 standard errors.
    se = math.sqrt(n * q * (1 - q) / draws)
    assert abs(sizes.mean() - n * q) < 6 * se
    assert sizes.var() == pytest.approx(n * q * (1 - q), rel=0.15)
    tiny = PoissonSampler(torch.arange(5), sample_rate=0.01, generator=torch.Generator().manual_seed(0))
    assert any(len(tiny.sample()) == 0 for _ in range(50))  # empty batches are kept


def test_sampling_is_seeded() -> None:
    a = PoissonSampler(torch.arange(100), sample_rate=0.1, generator=torch.Generator().manual_seed(5))
    b = PoissonSampler(torch.arange(100), sample_rate=0.1, generator=torch.Generator().manual_seed(5))
    c = PoissonSampler(torch.arange(100), sample_rate=0.1, generator=torch.Generator().manual_seed(6))
    first = [a.sample() for _ in range(5)]
    assert all(torch.equal(x, b.sample()) for x in first)
    assert not all(torch.equal(x, c.sample()) for x in first)
