"""A Ray Train worker loop that releases DP-SGD gradients of a batch with no
contribution through :func:`~raydp_synth.runtime.dp_step.dp_sgd_step`, the step every
loop runs (its sampler, its fixed shapes, its noise source on rank 0 only, its
all-reduce), and reports the noise it saw. No sensitive data: the records' pre-noise
terms are all zero, so each release is noise alone."""

from __future__ import annotations

import tempfile
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from raydp_synth.data import DataInfo, ImageDataset
from raydp_synth.privacy.dp_sgd import clipped_sum
from raydp_synth.privacy.plan import Mechanism, PrivacyPlan
from raydp_synth.privacy.secret_rng import derive_secret, secret_generator
from raydp_synth.runtime.context import WorkerContext
from raydp_synth.runtime.dp_step import dp_sgd_step

RECORDS = 48


def noise_release_probe(config: dict[str, Any]) -> None:
    """``repeats`` releases of a ``dim``-parameter gradient on this worker group;
    reports the releases' second moment, their count and the spread over ranks of a
    digest of them (0 iff every rank holds the same release)."""
    import ray.train

    context = ray.train.get_context()
    rank, world = context.get_world_rank(), context.get_world_size()
    q = config["expected_batch_size"] / RECORDS
    plan = PrivacyPlan(mechanisms=(Mechanism(
        name="critic", noise_multiplier=config["noise_multiplier"], sample_rate=q,
        num_steps=config["repeats"], sensitivity=config["max_grad_norm"]),),
        delta=1e-5, target_epsilon=10.0)
    images = np.zeros((RECORDS, 1, 4, 4), dtype=np.float32)  # every term is zero
    ctx = WorkerContext(
        config=SimpleNamespace(seed=0), plan=plan,
        data=DataInfo(num_records=RECORDS, image_size=4, channels=1, num_classes=2),
        train=ImageDataset(images=images, labels=np.arange(RECORDS) % 2, num_classes=2,
                           name="zeros"),
        rank=rank, world_size=world, device=torch.device("cpu"),
        noise_generator=secret_generator(derive_secret(config["seed"], "noise", rank)),
        report=lambda metrics, state: None, log=lambda line: None, dp_seed=config["seed"])
    dim = config["dim"]
    param = torch.nn.Parameter(torch.zeros(dim))
    opt = torch.optim.SGD([param], lr=1.0)
    released: list[torch.Tensor] = []

    def pre_noise(batch: Any) -> torch.Tensor:
        rows = batch.images.flatten(1).repeat(1, dim // batch.images[0].numel() + 1)[:, :dim]
        return clipped_sum([rows], max_grad_norm=config["max_grad_norm"], weights=batch.weights)

    def keep(flat: torch.Tensor) -> torch.Tensor:
        released.append(flat.clone())
        return flat

    for _ in range(config["repeats"]):
        dp_sgd_step(ctx, "critic", pre_noise, [param], opt, post=keep)
    out = torch.cat(released).double()
    digest = out.sum()
    bounds = torch.stack([digest, -digest])
    if torch.distributed.is_initialized():
        torch.distributed.all_reduce(bounds, op=torch.distributed.ReduceOp.MAX)
    metrics = {"second_moment": float((out ** 2).mean()), "count": out.numel(),
               "digest_spread": float(bounds[0] + bounds[1])}
    # Train V2 keeps a run's metrics only with a checkpoint: rank 0 attaches one.
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = ray.train.Checkpoint.from_directory(tmp) if rank == 0 else None
        ray.train.report(metrics, checkpoint=checkpoint)
