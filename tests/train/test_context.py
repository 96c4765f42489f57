"""Sensitive records are selected, and their per-record draws made, by secret
randomness only; a record's draws follow the record, not its batch position."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from raydp_synth.data import DataInfo, ImageDataset
from raydp_synth.methods import get_method
from raydp_synth.privacy.records import RecordBatch
from raydp_synth.runtime.context import WorkerContext

# Every test here plans DPAF several times (seconds each).
pytestmark = pytest.mark.slow

INFO = DataInfo(num_records=200, image_size=16, channels=1, num_classes=10)
IMAGES = np.random.default_rng(0).uniform(-1, 1, (200, 1, 16, 16)).astype(np.float32)


def _context(public_seed: int, dp_seed: int, *, drop: int | None = None) -> WorkerContext:
    method = get_method("dpaf")
    config = method.make_config({"seed": public_seed, "base_width": 4, "epochs": 2, "batch_size": 32,
                                 "classifier_epochs": 1}, INFO)
    plan = method.plan(config, target_epsilon=5.0, delta=1e-5, data=INFO)
    keep = np.arange(200) != drop
    data = ImageDataset(images=IMAGES[keep], labels=(np.arange(200) % 10)[keep], num_classes=10,
                        name="noise")
    return WorkerContext(config=config, plan=plan, data=INFO, train=data, rank=0, world_size=1,
                         device=torch.device("cpu"), noise_generator=torch.Generator(),
                         report=lambda m, s: None, log=lambda line: None, dp_seed=dp_seed)


def _batches(ctx: WorkerContext) -> list[RecordBatch]:
    sampler = ctx.sampler("dpagg")
    return [sampler.sample() for _ in range(5)]


def test_batches_depend_on_the_secret_seed_not_on_the_public_one() -> None:
    base = _batches(_context(public_seed=0, dp_seed=11))
    same_secret = _batches(_context(public_seed=99, dp_seed=11))
    other_secret = _batches(_context(public_seed=0, dp_seed=12))
    assert all(torch.equal(a.keys, b.keys) for a, b in zip(base, same_secret, strict=True))
    assert not all(torch.equal(a.keys, b.keys) for a, b in zip(base, other_secret, strict=True))


def test_per_record_draws_follow_the_record_and_the_secret_seed() -> None:
    batch = _batches(_context(public_seed=0, dp_seed=11))[0]
    assert len(batch) > 3
    draws = batch.normal("partner", 8)
    # Without record 0, every other record keeps its draws (no shift by position).
    assert torch.equal(batch.without(0).normal("partner", 8), draws[1:])
    # The public seed does not enter; the secret seed, the purpose and the release do.
    same = _batches(_context(public_seed=99, dp_seed=11))[0]
    assert torch.equal(same.normal("partner", 8), draws)
    other = _batches(_context(public_seed=0, dp_seed=12))[0]
    common = np.intersect1d(other.keys.numpy(), batch.keys.numpy())
    assert len(common) > 0
    row = {int(k): i for i, k in enumerate(batch.keys)}
    orow = {int(k): i for i, k in enumerate(other.keys)}
    for k in common:
        assert not torch.equal(other.normal("partner", 8)[orow[int(k)]], draws[row[int(k)]])
    assert not torch.equal(batch.normal("mix", 8), draws)
    # Draws are independent standard normals (seeded; 5 sigma on 8 * |B| values).
    values = torch.cat([b.normal("partner", 64).flatten() for b in _batches(_context(0, 11))])
    assert abs(values.mean().item()) < 5 / values.numel() ** 0.5
    assert abs(values.std().item() - 1) < 5 * (0.5 / values.numel()) ** 0.5


def test_record_keys_ignore_the_rest_of_the_dataset() -> None:
    full = _context(public_seed=0, dp_seed=11)
    dropped = _context(public_seed=0, dp_seed=11, drop=3)
    keys = full.sampler("dpagg")._keys
    assert torch.equal(dropped.sampler("dpagg")._keys, torch.cat([keys[:3], keys[4:]]))
    assert len(set(keys.tolist())) == 200
