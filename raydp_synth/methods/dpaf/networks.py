"""DPAF's networks (Lin et al. 2023, DPAF 5.2, Fig. 4), cDCGAN style.

Every convolution has kernel 4, stride 2, padding 1: each halves the resolution,
so the layer split ``Cx1-Cx2-Cx3`` must leave maps of at least 2x2 after its
``x1 + x2 + x3`` layers. Layer k has ``base_width * 2**k`` channels (capped).

The discriminator D is split into the parts that the privacy argument treats
differently::

    x --conv1 (frozen after phase 1)--> [+ label planes] --conv2*--> SIN --+--> AGG/DPAGG --> conv3* --> FC*
                                                                          (per record: D-hat)

No part of D uses batch statistics (no BatchNorm): each record's features depend
on that record alone (docs/architecture.md, invariant 8). The generator G, which
only sees synthetic data, may use BatchNorm.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from raydp_synth.errors import ConfigError

__all__ = [
    "Architecture",
    "Classifier",
    "DiscriminatorParts",
    "Generator",
    "LayerSplit",
    "label_planes",
    "sin",
]

_MAX_WIDTH = 256


def sin(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Simplified instance normalisation: per record and map, zero mean, unit variance.

    No affine parameters. A p x p map ends with L2 norm at most p (exactly p unless
    the map is constant), so a record's m maps have norm at most sqrt(m) * p: the
    L2 sensitivity of their sum over a batch (Lin et al. 2023, DPAF eq. 3).
    """
    mean = x.mean(dim=(-2, -1), keepdim=True)
    var = x.var(dim=(-2, -1), keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(var + eps)


def label_planes(labels: torch.Tensor, num_classes: int, size: int) -> torch.Tensor:
    """One-hot label maps of shape [B, num_classes, size, size] (cDCGAN conditioning)."""
    onehot = F.one_hot(labels, num_classes).to(torch.float32)
    return onehot[:, :, None, None].expand(-1, -1, size, size)


@dataclass(frozen=True)
class LayerSplit:
    """``Cx1-Cx2-Cx3``: conv layers in conv1, conv2* and conv3* (x3 may be 0)."""

    conv1: int
    conv2: int
    conv3: int

    @classmethod
    def parse(cls, text: str) -> LayerSplit:
        """Parse ``"C2-C1-C0"``, ``"C2-C1-x"`` or ``"2-1-0"``."""
        parts = text.strip().upper().replace("×", "X").split("-")
        try:
            if len(parts) != 3:
                raise ValueError
            values = [0 if p in ("X", "C0", "CX") else int(p.removeprefix("C")) for p in parts]
        except ValueError:
            raise ConfigError(
                f"layer_split={text!r} is not of the form Cx1-Cx2-Cx3 (e.g. C2-C1-x)"
            ) from None
        split = cls(*values)
        if split.conv1 < 1 or split.conv2 < 1 or split.conv3 < 0:
            raise ConfigError(
                f"layer_split={text!r}: conv1 and conv2* need at least one layer each, "
                "conv3* zero or more"
            )
        return split

    @property
    def total(self) -> int:
        return self.conv1 + self.conv2 + self.conv3

    def __str__(self) -> str:
        return f"C{self.conv1}-C{self.conv2}-{'C' + str(self.conv3) if self.conv3 else 'x'}"


@dataclass(frozen=True, kw_only=True)
class Architecture:
    """Everything that fixes the shapes of DPAF's networks."""

    image_size: int
    channels: int
    num_classes: int
    split: LayerSplit
    base_width: int
    latent_dim: int
    fc_hidden: int = 128
    generator_width: int | None = None

    def __post_init__(self) -> None:
        max_layers = int(math.log2(self.image_size)) - 1
        if self.image_size < 4 or 2**int(math.log2(self.image_size)) != self.image_size:
            raise ConfigError(f"image_size={self.image_size} must be a power of two >= 4")
        if self.split.total > max_layers:
            raise ConfigError(
                f"layer_split={self.split} has {self.split.total} conv layers but a "
                f"{self.image_size}x{self.image_size} image allows at most {max_layers} "
                "(each layer halves the resolution, down to 2x2); use fewer layers or a "
                "larger image_size"
            )
        if self.base_width < 1 or self.latent_dim < 1:
            raise ConfigError("base_width and latent_dim must be >= 1")

    def width(self, layer: int) -> int:
        """Channels of D's conv layer ``layer``."""
        return min(self.base_width * 2**layer, _MAX_WIDTH)

    def g_width(self, layer: int) -> int:
        """Channels of G's layer mirroring D's ``layer`` (G's width costs no privacy)."""
        return min((self.generator_width or self.base_width) * 2**layer, _MAX_WIDTH)

    def resolution_after(self, layers: int) -> int:
        return self.image_size // 2**layers

    @property
    def agg_maps(self) -> int:
        """m: the number of feature maps that DPAGG aggregates."""
        return self.width(self.split.conv1 + self.split.conv2 - 1)

    @property
    def agg_map_size(self) -> int:
        """p: the side of each aggregated map."""
        return self.resolution_after(self.split.conv1 + self.split.conv2)

    @property
    def agg_sensitivity(self) -> float:
        """sqrt(m) * p: L2 sensitivity of the sum of SIN features over a batch."""
        return math.sqrt(self.agg_maps) * self.agg_map_size


def _conv_stack(arch: Architecture, first: int, count: int, in_channels: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    for k in range(first, first + count):
        layers += [nn.Conv2d(in_channels, arch.width(k), 4, 2, 1), nn.LeakyReLU(0.2)]
        in_channels = arch.width(k)
    return nn.Sequential(*layers)


def _fc_head(arch: Architecture, outputs: int, in_features: int | None = None) -> nn.Sequential:
    n = arch.split.total
    features = in_features or arch.width(n - 1) * arch.resolution_after(n) ** 2
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(features, arch.fc_hidden),
        nn.LeakyReLU(0.2),
        nn.Linear(arch.fc_hidden, outputs),
    )


class Classifier(nn.Module):
    """Phase-1 classifier C: conv1 | conv2 | SIN | conv3 | FC, one prediction per record.

    The privacy-corrected DPAF trains all of C with DP-SGD on a per-record
    cross-entropy (no aggregation, no label input): conv1 is then transferred.
    """

    def __init__(self, arch: Architecture) -> None:
        super().__init__()
        s = arch.split
        self.conv1 = _conv_stack(arch, 0, s.conv1, arch.channels)
        self.conv2 = _conv_stack(arch, s.conv1, s.conv2, arch.width(s.conv1 - 1))
        self.conv3 = _conv_stack(arch, s.conv1 + s.conv2, s.conv3, arch.agg_maps)
        self.fc = _fc_head(arch, arch.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.conv3(sin(self.conv2(self.conv1(x)))))


class Conv2Star(nn.Module):
    """conv2*: takes conv1's maps and the label planes; ends before SIN."""

    def __init__(self, arch: Architecture) -> None:
        super().__init__()
        s = arch.split
        self.num_classes = arch.num_classes
        self.size = arch.resolution_after(s.conv1)
        self.body = _conv_stack(arch, s.conv1, s.conv2, arch.width(s.conv1 - 1) + arch.num_classes)

    def forward(self, h: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        planes = label_planes(labels, self.num_classes, self.size).to(h)
        return self.body(torch.cat([h, planes], dim=1))


class DiscriminatorParts(nn.Module):
    """D's parts, kept separate because each is trained by a different rule.

    The head (conv3*, FC*) takes (mean-)aggregated features and, for class-wise
    aggregation, the class of the aggregate as label planes (all-zero planes for a
    whole-batch aggregate, which has no single class).
    """

    def __init__(self, arch: Architecture) -> None:
        super().__init__()
        self.arch = arch
        self.conv1 = _conv_stack(arch, 0, arch.split.conv1, arch.channels)
        self.conv2 = Conv2Star(arch)
        s = arch.split
        head_in = arch.agg_maps + arch.num_classes
        self.conv3 = _conv_stack(arch, s.conv1 + s.conv2, s.conv3, head_in)
        flat = None if s.conv3 else head_in * arch.agg_map_size**2
        self.fc = _fc_head(arch, 1, flat)

    def features(self, x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Per-record SIN features (the input of AGG): [B, m, p, p]."""
        return sin(self.conv2(self.conv1(x), labels))

    def head(self, aggregated: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        """conv3* and FC* on aggregated features [A, m, p, p]: one logit each.

        Args:
            aggregated: A aggregates (or single records' features, for D-hat).
            labels: the class of each aggregate, or None for class-free inputs.
        """
        arch = self.arch
        if labels is None:
            planes = aggregated.new_zeros(len(aggregated), arch.num_classes, *aggregated.shape[-2:])
        else:
            planes = label_planes(labels, arch.num_classes, aggregated.shape[-1]).to(aggregated)
        return self.fc(self.conv3(torch.cat([aggregated, planes], dim=1))).squeeze(-1)

    def d_hat(self, x: torch.Tensor, labels: torch.Tensor, *, class_head: bool = False) -> torch.Tensor:
        """D without aggregation: one logit per record (used to train G)."""
        return self.head(self.features(x, labels), labels if class_head else None)


class Generator(nn.Module):
    """G: the reverse of D without DPAGG; (z, label) -> image in [-1, 1]."""

    def __init__(self, arch: Architecture) -> None:
        super().__init__()
        self.arch = arch
        n = arch.split.total
        self.start = arch.resolution_after(n)
        self.start_channels = arch.g_width(n - 1)
        self.fc = nn.Sequential(
            nn.Linear(arch.latent_dim + arch.num_classes, self.start_channels * self.start**2),
            nn.BatchNorm1d(self.start_channels * self.start**2),
            nn.ReLU(),
        )
        layers: list[nn.Module] = []
        for k in range(n - 1, 0, -1):
            layers += [
                nn.ConvTranspose2d(arch.g_width(k), arch.g_width(k - 1), 4, 2, 1),
                nn.BatchNorm2d(arch.g_width(k - 1)),
                nn.ReLU(),
            ]
        layers += [nn.ConvTranspose2d(arch.g_width(0), arch.channels, 4, 2, 1), nn.Tanh()]
        self.body = nn.Sequential(*layers)

    def forward(self, z: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        onehot = F.one_hot(labels, self.arch.num_classes).to(z)
        h = self.fc(torch.cat([z, onehot], dim=1))
        return self.body(h.view(-1, self.start_channels, self.start, self.start))
