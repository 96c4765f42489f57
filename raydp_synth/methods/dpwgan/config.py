"""DP-WGAN-GP's typed configuration (Schwabedal, Michel and Riontino 2020; search-space keys)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from raydp_synth.config import require_betas, require_positive
from raydp_synth.errors import ConfigError

__all__ = ["DPWGANConfig"]


@dataclass(frozen=True, kw_only=True)
class DPWGANConfig:
    """Hyperparameters of one DP-WGAN-GP run with DP-Adam.

    Attributes:
        image_size: side of the images (a power of two >= 8: three strided convs).
        capacity: filters of the critic's first conv (doubling per layer; the
            paper's "capacity" c); G mirrors it.
        latent_dim: G's Gaussian latent dimension (paper: 128).
        batch_size: expected batch size B of the critic's DP-SGD steps (q = B / n).
        epochs: length of training, in expected passes over the data.
        n_critic: critic steps per G step (G's steps are post-processing).
        clip: per-record clip norm C of the critic's gradient. With Adam, the run is
            nearly independent of C once C is below the per-record gradient norms
            (the paper's section 3.2.1): C = 1 is the paper's choice.
        gp_weight: the gradient-penalty weight lambda (WGAN-GP: 10).
        lr_d, lr_g: Adam learning rates of the critic and of G.
        beta1, beta2: Adam's betas (WGAN-GP's (0.5, 0.9)).
        seed: public seed of initialisation and synthetic draws.

    Defaults: the best of a small sweep on digits at epsilon 10 (CAS 0.60, FID
    1217 with batch 64, 20 epochs; n_critic 5 and
    50 epochs, the paper's WGAN-GP habits, left G ~60 steps and mode-collapsed;
    one critic step per G step and G's learning rate above the critic's did best).
    """

    image_size: int
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
    seed: int = 0

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
