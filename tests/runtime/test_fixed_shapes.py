"""Fixed batch shapes: the ladder, chunking that never truncates, padding that adds
exactly zero, per-record draws that padding leaves alone, and a DP step whose release
is the same padded or not (the loops' own pre-noise functions are checked padded
against unpadded at every audited release of the method contract suite)."""

from __future__ import annotations

import math

import pytest
import torch

from raydp_synth.privacy.dp_sgd import clipped_sum
from raydp_synth.privacy.plan import Mechanism
from raydp_synth.privacy.records import RecordBatch
from raydp_synth.runtime.dp_step import dp_sgd_step
from raydp_synth.runtime.fixed_shapes import MIN_GRANULE, BatchShapes, batch_shapes
from tests.runtime.conftest import plan_of


def _batch(n: int, *, seed: int = 11) -> RecordBatch:
    g = torch.Generator().manual_seed(n)
    return RecordBatch(images=torch.randn(n, 1, 4, 4, generator=g),
                       labels=torch.randint(3, (n,), generator=g),
                       keys=torch.randint(1, 2**62, (n,), generator=g), release=2, seed=seed)


@pytest.mark.parametrize(("expected", "q"), [(1.0, 0.01), (24.0, 0.1), (64.0, 0.002),
                                             (512.0, 0.0085), (5000.0, 0.5), (40.0, 1.0)])
def test_the_ladder_is_short_public_and_covers_four_sigmas(expected: float, q: float) -> None:
    shapes = batch_shapes(expected, q)
    granule = shapes.granule
    assert granule >= MIN_GRANULE and granule & (granule - 1) == 0
    assert shapes.capacities[-1] == shapes.top
    assert all(c % granule == 0 for c in shapes.capacities)
    assert shapes.top >= expected + 4 * math.sqrt(expected * (1 - q))
    # The shapes a run meets: those within 4 sigma of the expected batch, a handful.
    sigma = math.sqrt(expected * (1 - q))
    likely = {shapes.capacity(n) for n in range(max(0, int(expected - 4 * sigma)),
                                                 int(expected + 4 * sigma) + 1)}
    assert len(likely) <= 12
    # Padding adds at most one granule, about an eighth of a batch beyond the smallest.
    assert shapes.capacity(int(expected)) - int(expected) < max(granule, MIN_GRANULE)


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 16, 17, 40, 41])
def test_chunks_hold_every_record_once_in_order_at_ladder_shapes(n: int) -> None:
    shapes = BatchShapes(granule=8, top=16)
    batch = _batch(n)
    chunks = shapes.chunks(batch)
    assert all(len(c) in shapes.capacities for c in chunks)
    real = [c.images[: c.num_records] for c in chunks]
    assert torch.equal(torch.cat(real), batch.images)
    assert torch.equal(torch.cat([c.keys[: c.num_records] for c in chunks]), batch.keys)
    assert sum(c.num_records for c in chunks) == n
    for c in chunks:
        assert c.padding == len(c) - c.num_records
        if c.padding:
            weights = c.weights
            assert weights is not None
            assert weights.tolist() == [1.0] * c.num_records + [0.0] * c.padding
            assert torch.count_nonzero(c.images[c.num_records:]) == 0
        else:
            assert c.weights is None


def test_a_padded_batch_refuses_to_lose_a_record_or_be_padded_again() -> None:
    padded = _batch(5).padded(8)
    for call in (lambda: padded.without(0), lambda: padded.rows(0, 2), lambda: padded.padded(16),
                 lambda: _batch(9).padded(8)):
        with pytest.raises(ValueError):
            call()


def test_padding_leaves_each_records_draws_as_they_were() -> None:
    """Row i's draws are a function of record i's key: padding and chunking move no
    record's partner latent, mixing coefficient or timestep."""
    batch = _batch(13)
    for chunks in ([batch.padded(16)], BatchShapes(granule=4, top=4).chunks(batch)):
        for draw in (lambda b: b.normal("partner", 3), lambda b: b.uniform("mix", 1, 1, 1),
                     lambda b: b.randint("timestep", 1000, 2)):
            got = torch.cat([draw(c)[: c.num_records] for c in chunks])
            assert torch.equal(got, draw(batch))


def test_padding_rows_add_exactly_zero_to_a_clipped_sum() -> None:
    g = torch.Generator().manual_seed(0)
    grads = [torch.randn(5, 3, 2, generator=g), torch.randn(5, 4, generator=g)]
    padded = [torch.cat([x, 100 * torch.randn(3, *x.shape[1:], generator=g)]) for x in grads]
    weights = torch.tensor([1.0] * 5 + [0.0] * 3)
    plain = clipped_sum(grads, max_grad_norm=0.5)
    masked = clipped_sum(padded, max_grad_norm=0.5, weights=weights)
    assert torch.allclose(masked, plain, atol=1e-6)
    all_padding = clipped_sum(padded, max_grad_norm=0.5, weights=torch.zeros(8))
    assert torch.count_nonzero(all_padding) == 0


def test_a_pre_noise_function_that_ignores_the_weights_is_caught() -> None:
    """What the contract suite's padded-against-unpadded check sees when a method
    forgets its weights: its padding rows would add (and move with the batch size)."""
    def honest(batch: RecordBatch) -> torch.Tensor:
        per_record = [batch.images.flatten(1) + 1.0]
        return clipped_sum(per_record, max_grad_norm=1.0, weights=batch.weights)

    def forgetful(batch: RecordBatch) -> torch.Tensor:
        return clipped_sum([batch.images.flatten(1) + 1.0], max_grad_norm=1.0)

    batch, shapes = _batch(5), BatchShapes(granule=8, top=8)
    assert torch.allclose(shapes.wrap(honest)(batch), honest(batch), atol=1e-6)
    assert not torch.allclose(shapes.wrap(forgetful)(batch), forgetful(batch), atol=1e-3)


@pytest.mark.parametrize("fixed", [True, False])
def test_the_step_releases_the_same_padded_or_not(make_context, fixed: bool) -> None:
    """The same seeds, the same sampled batches and noise: the parameters after three
    DP steps agree to float rounding whether the context pads or not, and the
    function the auditor sees is the padded one exactly when the context pads."""
    mech = Mechanism(name="critic", noise_multiplier=1.0, sample_rate=0.3, num_steps=3,
                     sensitivity=1.0)
    seen: list[object] = []

    def pre_noise(batch: RecordBatch) -> torch.Tensor:
        return clipped_sum([batch.images.flatten(1)], max_grad_norm=1.0, weights=batch.weights)

    def run(fixed_shapes: bool) -> torch.Tensor:
        ctx = make_context(plan_of(mech), auditor=lambda name, fn, batch: seen.append(fn))
        ctx.fixed_shapes = fixed_shapes
        param = torch.nn.Parameter(torch.zeros(64))
        opt = torch.optim.SGD([param], lr=1.0)
        for _ in range(3):
            dp_sgd_step(ctx, "critic", pre_noise, [param], opt)
        return param.detach()

    other = run(not fixed)
    seen.clear()
    mine = run(fixed)
    assert torch.allclose(mine, other, atol=1e-6)
    assert all(hasattr(fn, "__wrapped__") == fixed for fn in seen) and len(seen) == 3
