"""PrivImage+D's denoiser: a compact class-conditional U-Net, DDPM's per-record loss,
and DDIM sampling (Li et al. 2024, PrivImage App. D.2: DDIM with 50 steps).

Privacy: the U-Net has GroupNorm only (statistics of one image, never of the batch),
so record i's loss ``mean_m |e_im - eps_theta(x_t, t_im, y_i)|^2`` over its own
noise draws (multiplicity m, as in DPDM, which PrivImage builds on) depends on
record i alone (docs/architecture.md, invariant 8), and its gradient can be clipped
per record.
Per-record gradients come from ``torch.func``
(:func:`~raydp_synth.privacy.dp_sgd.functional_record_grads`).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.func import functional_call
from torch.nn import functional as F

from raydp_synth.privacy.dp_sgd import functional_record_grads

__all__ = ["DDPMSchedule", "UNet", "ddim_sample", "denoiser_record_grads", "denoising_loss"]


class DDPMSchedule:
    """Linear betas (1e-4 .. 0.02) over ``steps`` diffusion steps (DDPM)."""

    def __init__(self, steps: int = 1000) -> None:
        self.steps = steps
        betas = torch.linspace(1e-4, 0.02, steps, dtype=torch.float64)
        self.alpha_bar = torch.cumprod(1 - betas, dim=0).float()

    def noised(self, x: torch.Tensor, t: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        a = self.alpha_bar.to(x.device)[t].view(-1, *([1] * (x.dim() - 1)))
        return a.sqrt() * x + (1 - a).sqrt() * noise


def _timestep_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    half = dim // 2
    freqs = torch.exp(-math.log(10_000.0) * torch.arange(half, device=t.device) / half)
    args = t.float()[:, None] * freqs[None]
    return torch.cat([torch.sin(args), torch.cos(args)], dim=1)


class _ResBlock(nn.Module):
    def __init__(self, cin: int, cout: int, emb: int) -> None:
        super().__init__()
        self.norm1 = nn.GroupNorm(min(8, cin), cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.emb = nn.Linear(emb, cout)
        self.norm2 = nn.GroupNorm(min(8, cout), cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x))) + self.emb(e)[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return h + self.skip(x)


class UNet(nn.Module):
    """A two-level U-Net (widths c, 2c; GroupNorm; SiLU), timestep and label embeddings."""

    def __init__(self, *, channels: int, num_classes: int, width: int) -> None:
        super().__init__()
        c, emb = width, 4 * width
        self.num_classes, self.width = num_classes, width
        self.time = nn.Sequential(nn.Linear(c, emb), nn.SiLU(), nn.Linear(emb, emb))
        self.label = nn.Embedding(num_classes, emb)
        self.inp = nn.Conv2d(channels, c, 3, padding=1)
        self.down1 = _ResBlock(c, c, emb)
        self.pool1 = nn.Conv2d(c, c, 3, stride=2, padding=1)
        self.down2 = _ResBlock(c, 2 * c, emb)
        self.pool2 = nn.Conv2d(2 * c, 2 * c, 3, stride=2, padding=1)
        self.mid = _ResBlock(2 * c, 2 * c, emb)
        self.up2 = _ResBlock(4 * c, 2 * c, emb)
        self.up1 = _ResBlock(3 * c, c, emb)
        self.out_norm = nn.GroupNorm(min(8, c), c)
        self.out = nn.Conv2d(c, channels, 3, padding=1)

    def forward(self, x: torch.Tensor, t: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        e = self.time(_timestep_embedding(t, self.width)) + self.label(labels)
        h0 = self.down1(self.inp(x), e)
        h1 = self.down2(self.pool1(h0), e)
        h = self.mid(self.pool2(h1), e)
        h = self.up2(torch.cat([F.interpolate(h, scale_factor=2.0), h1], dim=1), e)
        h = self.up1(torch.cat([F.interpolate(h, scale_factor=2.0), h0], dim=1), e)
        return self.out(F.silu(self.out_norm(h)))


def denoising_loss(model: nn.Module, schedule: DDPMSchedule, x: torch.Tensor, y: torch.Tensor,
                   t: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """Per-row losses ``mean |noise - eps(x_t, t, y)|^2`` (rows: image and draw)."""
    pred = model(schedule.noised(x, t, noise), t, y)
    return ((pred - noise) ** 2).flatten(1).mean(dim=1)


def denoiser_record_grads(model: nn.Module, schedule: DDPMSchedule, images: torch.Tensor,
                          labels: torch.Tensor, t: torch.Tensor, noise: torch.Tensor, *,
                          compile_backend: str | None = None) -> list[torch.Tensor]:
    """Per-record gradients ``[B, *p.shape]`` of record i's loss averaged over its own
    m draws (``t [B, m]``, ``noise [B, m, C, H, W]``, drawn independently of the data)."""

    def record_loss(p: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor,
                    ts: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
        m = ts.shape[0]
        xs, ys = x[None].expand(m, *x.shape), y.expand(m)
        pred = functional_call(model, p, (schedule.noised(xs, ts, eps), ts, ys))
        return ((pred - eps) ** 2).mean()

    return functional_record_grads(model, record_loss, images, labels, t, noise,
                                   compile_backend=compile_backend)


@torch.no_grad()
def ddim_sample(model: nn.Module, schedule: DDPMSchedule, labels: torch.Tensor, *,
                shape: tuple[int, int, int], steps: int, rng: torch.Generator) -> torch.Tensor:
    """Deterministic DDIM (eta = 0) with ``steps`` steps from x_T ~ N(0, I) drawn from ``rng``."""
    device = next(model.parameters()).device
    x = torch.randn(len(labels), *shape, generator=rng).to(device)
    times = torch.linspace(schedule.steps - 1, 0, steps).round().long()
    alpha_bar = schedule.alpha_bar.to(device)
    labels = labels.to(device)
    for i, t in enumerate(times):
        a_t = alpha_bar[t]
        a_prev = alpha_bar[times[i + 1]] if i + 1 < len(times) else torch.tensor(1.0, device=device)
        eps = model(x, t.expand(len(x)).to(device), labels)
        x0 = ((x - (1 - a_t).sqrt() * eps) / a_t.sqrt()).clamp(-1, 1)
        x = a_prev.sqrt() * x0 + (1 - a_prev).sqrt() * eps
    return x.clamp(-1, 1)
