"""Sensitive records are selected by secret randomness only (design.md 3.2 and 4)."""

from __future__ import annotations

import numpy as np
import torch

from raydp_synth.data import ImageDataset
from raydp_synth.methods import DataInfo, get_method
from raydp_synth.methods.dpaf.loop import _DPAFRun
from raydp_synth.train.context import WorkerContext

INFO = DataInfo(num_records=200, image_size=16, channels=1, num_classes=10)


def _context(public_seed: int, dp_seed: int) -> WorkerContext:
    method = get_method("dpaf")
    config = method.make_config({"seed": public_seed, "base_width": 4, "epochs": 2, "batch_size": 32, "classifier_epochs": 1}, INFO)
    plan = method.plan(config, epsilon=5.0, delta=1e-5, data=INFO)
    data = ImageDataset(images=np.zeros((200, 1, 16, 16), np.float32), labels=np.arange(200) % 10,
                        num_classes=10, name="zeros")
    return WorkerContext(config=config, plan=plan, data=INFO, train=data, rank=0, world_size=1,
                         device=torch.device("cpu"), noise_generator=torch.Generator(),
                         report=lambda m, s: None, log=lambda line: None, dp_seed=dp_seed)


def _batches(ctx: WorkerContext) -> list[torch.Tensor]:
    sampler = _DPAFRun(ctx)._sampler("dpagg")
    return [sampler.sample() for _ in range(5)]


def test_batches_depend_on_the_secret_seed_not_on_the_public_one() -> None:
    base = _batches(_context(public_seed=0, dp_seed=11))
    same_secret = _batches(_context(public_seed=99, dp_seed=11))
    other_secret = _batches(_context(public_seed=0, dp_seed=12))
    assert all(torch.equal(a, b) for a, b in zip(base, same_secret, strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(base, other_secret, strict=True))
