"""The hyperparameters every WGAN-GP method here shares (dpwgan, dpgan, PrivImage+G):
the small-images networks of Schwabedal, Michel and Riontino 2020, trained with Adam.
A method's config extends :class:`WGANGPConfig` with its own fields."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from raydp_synth.config import (
    ARCHITECTURE,
    CLIP_NORM,
    EPOCHS,
    LEARNING_RATE,
    SCHEDULE,
    SENSITIVE_BATCH,
    MethodConfig,
    require_betas,
    require_positive,
)
from raydp_synth.errors import ConfigError

__all__ = ["WGANGPConfig"]


@dataclass(frozen=True, kw_only=True)
class WGANGPConfig(MethodConfig):
    """A WGAN-GP whose critic is trained by DP-SGD (search-space keys).

    Attributes:
        image_size: side of the images (a power of two >= 8: three strided convs).
        capacity: filters of the critic's first conv (doubling per layer; the
            small-images paper's "capacity" c); G mirrors it.
        latent_dim: G's Gaussian latent dimension (paper: 128).
        batch_size: expected batch size B of the critic's DP steps (q = B / n).
        epochs: length of training, in expected passes over the data.
        n_critic: critic steps per G step (G's steps are post-processing).
        clip: per-record clip norm C of the critic's gradient.
        gp_weight: the gradient-penalty weight lambda (WGAN-GP: 10).
        lr_d, lr_g: Adam learning rates of the critic and of G.
        beta1, beta2: Adam's betas (WGAN-GP's (0.5, 0.9)).
        seed: public seed of initialisation and synthetic draws.
    """

    KINDS: ClassVar[Mapping[str, str]] = {
        "capacity": ARCHITECTURE, "latent_dim": ARCHITECTURE, "gp_weight": ARCHITECTURE,
        "batch_size": SENSITIVE_BATCH, "epochs": EPOCHS, "n_critic": SCHEDULE,
        "clip": CLIP_NORM, "lr_d": LEARNING_RATE, "lr_g": LEARNING_RATE,
        "beta1": LEARNING_RATE, "beta2": LEARNING_RATE}

    capacity: int = 16
    latent_dim: int = 128
    batch_size: int = 64
    epochs: float = 20.0
    n_critic: int = 1
    clip: float = 1.0
    gp_weight: float = 10.0
    lr_d: float = 1e-3
    lr_g: float = 2e-3
    beta1: float = 0.5
    beta2: float = 0.9

    def __post_init__(self) -> None:
        if self.image_size < 8 or self.image_size & (self.image_size - 1):
            raise ConfigError(
                f"image_size={self.image_size} must be a power of two >= 8 (the critic's three "
                "strided convolutions halve it three times); use e.g. image_size=16"
            )
        require_positive(self, integers=("capacity", "latent_dim", "batch_size", "n_critic"),
                         floats=("epochs", "clip", "lr_d", "lr_g"))
        if not (math.isfinite(self.gp_weight) and self.gp_weight >= 0):
            raise ConfigError(f"Expected gp_weight={self.gp_weight} >= 0.")
        require_betas(self)
