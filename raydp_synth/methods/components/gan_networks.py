"""The small-images paper's networks (Schwabedal, Michel and Riontino 2020 section 2.6), made
class-conditional so that the release has labels (CAS needs them); the WGAN-GP of
dpwgan, dpgan and PrivImage+G.

Critic: three strided 5x5 convolutions with capacity c, 2c, 4c filters and leaky
ReLU 0.2, then a linear score; the label enters as one-hot planes at the input. No
normalisation layer: a per-record gradient must depend on its record alone
(docs/architecture.md, invariant 8). Generator: the transpose (latent + one-hot
label, a linear layer, three transposed convolutions, tanh), with BatchNorm. G runs
in train mode only on synthetic batches; where its images meet real records (the
critic's pairs) it runs in eval mode, so that no batch statistic couples records and
its running statistics come from synthetic batches alone (:func:`refresh_batchnorm`).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["Critic", "Generator", "refresh_batchnorm"]


class Critic(nn.Module):
    def __init__(self, *, image_size: int, channels: int, num_classes: int, capacity: int) -> None:
        super().__init__()
        self.num_classes = num_classes
        c = capacity
        self.convs = nn.ModuleList([
            nn.Conv2d(channels + num_classes, c, 5, stride=2, padding=2),
            nn.Conv2d(c, 2 * c, 5, stride=2, padding=2),
            nn.Conv2d(2 * c, 4 * c, 5, stride=2, padding=2),
        ])
        self.fc = nn.Linear(4 * c * (image_size // 8) ** 2, 1)

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Scores of images ``x`` with integer ``labels`` (or their one-hot rows)."""
        onehot = labels.to(x.dtype) if labels.is_floating_point() else (
            F.one_hot(labels, self.num_classes).to(x.dtype))
        planes = onehot[:, :, None, None]
        h = torch.cat([x, planes.expand(-1, -1, x.shape[2], x.shape[3])], dim=1)
        for conv in self.convs:
            h = F.leaky_relu(conv(h), 0.2)
        return self.fc(h.flatten(1)).squeeze(1)


class Generator(nn.Module):
    def __init__(self, *, image_size: int, channels: int, num_classes: int, capacity: int,
                 latent_dim: int) -> None:
        super().__init__()
        self.num_classes, self.side, c = num_classes, image_size // 8, capacity
        self.latent_dim = latent_dim
        self.fc = nn.Linear(latent_dim + num_classes, 4 * c * self.side**2)
        self.bn0 = nn.BatchNorm1d(4 * c * self.side**2)
        self.up = nn.ModuleList([
            nn.ConvTranspose2d(4 * c, 2 * c, 5, stride=2, padding=2, output_padding=1),
            nn.ConvTranspose2d(2 * c, c, 5, stride=2, padding=2, output_padding=1),
            nn.ConvTranspose2d(c, channels, 5, stride=2, padding=2, output_padding=1),
        ])
        self.bns = nn.ModuleList([nn.BatchNorm2d(2 * c), nn.BatchNorm2d(c)])
        self.capacity = c

    def forward(self, z: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        onehot = F.one_hot(labels, self.num_classes).to(z.dtype)
        h = F.relu(self.bn0(self.fc(torch.cat([z, onehot], dim=1))))
        h = h.view(-1, 4 * self.capacity, self.side, self.side)
        for up, bn in zip(self.up[:2], self.bns, strict=True):
            h = F.relu(bn(up(h)))
        return torch.tanh(self.up[2](h))


def refresh_batchnorm(generator: nn.Module, *, latent_dim: int, num_classes: int,
                      rng: torch.Generator, device: torch.device, batch_size: int) -> None:
    """Set G's BatchNorm running statistics to those of one synthetic batch of the
    current G (uniform labels, latents from ``rng``; no gradient).

    G in eval mode then normalises the critic's partners exactly as G in train mode
    normalises a synthetic batch of that size (reference batch normalisation,
    Salimans et al. 2016, "Improved techniques for training GANs"), so the critic
    sees the generator G trains, while each partner depends only on its own inputs.
    Called before each critic step, outside the mechanism's pre-noise function; the
    statistics released with G are those of a synthetic batch.
    """
    norms = [m for m in generator.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    momenta = [m.momentum for m in norms]
    was_training = generator.training
    for m in norms:
        m.momentum = 1.0  # running statistics := this batch's
    generator.train()
    try:
        with torch.no_grad():
            size = max(2, batch_size)
            labels = torch.randint(num_classes, (size,), generator=rng).to(device)
            generator(torch.randn(size, latent_dim, generator=rng).to(device), labels)
    finally:
        for m, momentum in zip(norms, momenta, strict=True):
            m.momentum = momentum
        generator.train(was_training)
