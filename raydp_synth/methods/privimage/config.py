"""PrivImage+G's typed configuration (004_620720e614b6f1cb.txt; search-space keys)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from raydp_synth.errors import ConfigError
from raydp_synth.methods.base import require_positive
from raydp_synth.methods.dpgan.config import DPGANConfig

__all__ = ["PrivImageGConfig"]


@dataclass(frozen=True, kw_only=True)
class PrivImageGConfig:
    """Hyperparameters of one PrivImage+G run.

    Attributes:
        image_size: side of the images (a power of two >= 8).
        k1: top-k1 semantics each sensitive image adds to the histogram (App. B:
            k1 = k2 in every experiment).
        k2: semantics each class selects; the selection ratio is k2 / #semantics.
        query_share: budget weight of the semantic query against the fine-tuning
            (App. D.3: a tiny share suffices; the paper fixes sigma_2 so that the
            query costs ~0.01).
        pretrain_iters: non-private WGAN-GP iterations on the selected public data.
        capacity, latent_dim: the GAN's size (the WGAN-GP critic/generator shared
            with dpgan and dpwgan; the paper's small GAN is a DCGAN of the Opacus
            example, see docs/privacy.md).
        batch_size, epochs: expected batch B (q = B/n) and length of the DP
            fine-tuning of the critic.
        n_critic: critic steps per G step.
        clip: per-record clip norm of the critic's fine-tuning gradient.
        gp_weight: WGAN-GP's lambda.
        public_batch_size: batch size of the pre-training.
        conditional: one histogram and one pre-training set per class.
        lr_d, lr_g, beta1, beta2: Adam's settings.
        seed: public seed.
    """

    image_size: int
    k1: int = 1
    k2: int = 1
    query_share: float = 0.01
    pretrain_iters: int = 300
    capacity: int = 16
    latent_dim: int = 128
    batch_size: int = 128
    epochs: float = 20.0
    n_critic: int = 1
    clip: float = 1.0
    gp_weight: float = 10.0
    public_batch_size: int = 64
    conditional: bool = True
    lr_d: float = 1e-3
    lr_g: float = 2e-3
    beta1: float = 0.5
    beta2: float = 0.9
    seed: int = 0

    def __post_init__(self) -> None:
        require_positive(self, integers=("k1", "k2", "capacity", "latent_dim", "batch_size",
                                         "n_critic", "public_batch_size"),
                         floats=("epochs", "clip", "lr_d", "lr_g"))
        if not (math.isfinite(self.query_share) and 0 < self.query_share < 1):
            raise ConfigError(f"Expected 0 < query_share={self.query_share} < 1.")
        if self.pretrain_iters < 0:
            raise ConfigError(f"Expected pretrain_iters={self.pretrain_iters} >= 0.")
        self.fine_tuning()  # validates the GAN part (image size, betas, ...)

    def fine_tuning(self) -> DPGANConfig:
        """The DP fine-tuning as a dpGAN run: one clip group at ``clip``, the
        pre-training as its warm start on the selected public data."""
        return DPGANConfig(
            image_size=self.image_size, capacity=self.capacity, latent_dim=self.latent_dim,
            batch_size=self.batch_size, epochs=self.epochs, n_critic=self.n_critic,
            gp_weight=self.gp_weight, groups=1, clip=self.clip, adaptive_clip=False,
            warm_start_iters=self.pretrain_iters, public_batch_size=self.public_batch_size,
            conditional=self.conditional, lr_d=self.lr_d, lr_g=self.lr_g, beta1=self.beta1,
            beta2=self.beta2, seed=self.seed)
