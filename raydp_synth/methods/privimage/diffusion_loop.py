"""PrivImage+D on one Ray Train worker, after the semantic query (Algorithm 1).

1. Pre-training (no privacy cost): DDPM training of the U-Net on the selected public
   images (relabelled per class), public randomness identical on every rank.
2. DP-SGD fine-tuning, mechanism ``denoiser``: Poisson sample of rate q (secret
   seed); :func:`denoiser_pre_noise`, the one function that reads the records:
   per-record gradients of the record's loss averaged over its m (timestep, noise)
   draws, which are the record's own secret draws, clipped to C and summed; then
   noised once with N(0, sigma^2 C^2), divided by qN; Adam
   (:func:`~raydp_synth.runtime.dp_step.dp_sgd_step`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

import torch

from raydp_synth.data import ImageDataset
from raydp_synth.errors import PrivacyInvariantError
from raydp_synth.methods.privimage.config import PrivImageDConfig
from raydp_synth.methods.privimage.diffusion import (
    DDPMSchedule,
    UNet,
    denoiser_record_grads,
    denoising_loss,
)
from raydp_synth.privacy.dp_sgd import clipped_sum
from raydp_synth.privacy.records import RecordBatch, derived_seed
from raydp_synth.runtime.context import WorkerContext
from raydp_synth.runtime.distributed import broadcast_parameters_
from raydp_synth.runtime.dp_step import dp_sgd_step
from raydp_synth.runtime.reporting import EpochReporter
from raydp_synth.runtime.seeding import seeded

__all__ = ["DENOISER", "METRIC_ALLOWLIST", "build_denoiser", "denoiser_pre_noise", "run_privimage_d"]

DENOISER = "denoiser"

#: Safe because: counters and epsilon_spent are public arithmetic; pretrain_loss is
#: the denoising loss on the selected *public* images. No loss on private records.
METRIC_ALLOWLIST = frozenset({"epoch", "step", "epsilon_spent", "pretrain_loss"})


def build_denoiser(config: PrivImageDConfig, channels: int, num_classes: int, *,
                   init: torch.Generator | None = None) -> UNet:
    """The U-Net of ``config``; with ``init``, its parameters are drawn from it alone."""
    def unet() -> UNet:
        return UNet(channels=channels, num_classes=num_classes if config.conditional else 1,
                    width=config.width)

    return unet() if init is None else seeded(unet, init)


def _labels(config: PrivImageDConfig, labels: torch.Tensor) -> torch.Tensor:
    return labels if config.conditional else torch.zeros_like(labels)


def denoiser_pre_noise(model: UNet, schedule: DDPMSchedule, config: PrivImageDConfig,
                       batch: RecordBatch, *, compile_backend: str | None = None) -> torch.Tensor:
    """The denoiser mechanism's pre-noise sum: ``sum_i clip_C(g_i)``, ``g_i`` the
    gradient of record i's denoising loss averaged over its m (timestep, noise)
    draws. The draws are record i's own (:meth:`RecordBatch.randint`,
    :meth:`RecordBatch.normal`: the mechanism's secret seed, the release, record i's
    key), and the U-Net has no batch statistics (GroupNorm), so record i's term
    depends on record i alone: sensitivity C."""
    m = config.multiplicity
    t = batch.randint("timestep", config.diffusion_steps, m)
    noise = batch.normal("noise", m, *batch.images.shape[1:])
    grads = denoiser_record_grads(model, schedule, batch.images, _labels(config, batch.labels),
                                  t, noise, compile_backend=compile_backend)
    return clipped_sum(grads, max_grad_norm=config.clip,
                       shapes=[p.shape for p in model.parameters()], weights=batch.weights)


def pretrain(model: UNet, opt: torch.optim.Optimizer, schedule: DDPMSchedule,
             selected: ImageDataset, config: PrivImageDConfig, device: torch.device) -> float:
    """Non-private DDPM training on the selected public images; the last 50 losses' mean."""
    rng = torch.Generator().manual_seed(derived_seed(config.seed, "privimage-d-pretrain"))
    # The public images live on the device: each batch is gathered there.
    images = torch.as_tensor(selected.images).to(device)
    labels = torch.as_tensor(selected.labels).to(device)
    # Detached scalar tensors, read at the end (no GPU synchronisation per iteration).
    losses: deque[torch.Tensor] = deque(maxlen=50)
    for _ in range(config.pretrain_iters):
        idx = torch.randint(len(images), (min(config.public_batch_size, len(images)),), generator=rng)
        idx = idx.to(device)
        x, y = images[idx], _labels(config, labels[idx])
        t = torch.randint(config.diffusion_steps, (len(x),), generator=rng).to(device)
        noise = torch.randn(x.shape, generator=rng).to(device)
        loss = denoising_loss(model, schedule, x, y, t, noise).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return sum(loss.item() for loss in losses) / max(1, len(losses))


def run_privimage_d(ctx: WorkerContext, selected: ImageDataset, *,
                    spent_before: Mapping[str, int]) -> None:
    cfg: PrivImageDConfig = ctx.config
    mech = ctx.plan.mechanism(DENOISER)
    if abs(mech.sensitivity - cfg.clip) > 1e-12:
        raise PrivacyInvariantError(
            f"the plan's denoiser sensitivity {mech.sensitivity} is not clip={cfg.clip}")
    model = build_denoiser(cfg, ctx.data.channels, ctx.data.num_classes,
                           init=ctx.shared_generator("init")).to(ctx.device)
    schedule = DDPMSchedule(cfg.diffusion_steps)
    params = list(model.parameters())
    pretrain_loss = pretrain(model, torch.optim.Adam(params, lr=cfg.pretrain_lr), schedule,
                             selected, cfg, ctx.device)
    broadcast_parameters_(model)
    opt = torch.optim.Adam(params, lr=cfg.lr)
    ctx.log(f"[privimage-d] pre-trained {cfg.pretrain_iters} iterations on {len(selected)} "
            f"selected public images (loss {pretrain_loss:.4f})")
    reporter = EpochReporter(ctx, tag="privimage-d", networks={"generator": model},
                             steps=spent_before)

    def pre_noise(batch: RecordBatch) -> torch.Tensor:
        return denoiser_pre_noise(model, schedule, cfg, batch, compile_backend=ctx.compile_backend)

    for _ in range(mech.num_steps):
        dp_sgd_step(ctx, DENOISER, pre_noise, params, opt)
        reporter.released(DENOISER)
        reporter.after_release(DENOISER, pretrain_loss=pretrain_loss)
