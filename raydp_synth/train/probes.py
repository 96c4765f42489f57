"""Diagnostic worker loops, run under Ray Train by the tests and benchmarks.

They exercise the production release functions on real Ray Train worker groups
(gloo process groups), without any sensitive data.
"""

from __future__ import annotations

import tempfile
from typing import Any

import torch

from raydp_synth.privacy.dp_sgd import private_gradient

__all__ = ["noise_release_probe"]


def noise_release_probe(config: dict[str, Any]) -> None:
    """Release ``repeats`` DP-SGD gradients of an empty batch and report their noise.

    Every worker holds no records, so each release is noise only; the released
    tensor must be identical on all ranks and have standard deviation
    ``sigma * C / expected_batch_size`` whatever the number of workers.
    """
    import ray.train

    rank = ray.train.get_context().get_world_rank()
    shapes = [torch.Size([config["dim"]])]
    generator = torch.Generator().manual_seed(config["seed"] + 1000 * rank)
    released = torch.cat([
        private_gradient(
            [torch.zeros(0, config["dim"])],
            max_grad_norm=config["max_grad_norm"],
            noise_multiplier=config["noise_multiplier"],
            expected_batch_size=config["expected_batch_size"],
            generator=generator,
            shapes=shapes,
        )[0]
        for _ in range(config["repeats"])
    ])
    # max - min over ranks of a digest of the release: 0 iff all ranks agree.
    digest = released.double().sum()
    bounds = torch.stack([digest, -digest])
    if torch.distributed.is_initialized():
        torch.distributed.all_reduce(bounds, op=torch.distributed.ReduceOp.MAX)
    metrics = {
        "second_moment": float((released.double() ** 2).mean()),
        "count": released.numel(),
        "digest_spread": float(bounds[0] + bounds[1]),
    }
    # Train V2 keeps a run's metrics only with a checkpoint: rank 0 attaches one.
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = ray.train.Checkpoint.from_directory(tmp) if rank == 0 else None
        ray.train.report(metrics, checkpoint=checkpoint)
