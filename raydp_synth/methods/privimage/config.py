"""PrivImage+G's typed configuration (Li et al. 2024, PrivImage; search-space keys)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from raydp_synth.config import (
    ARCHITECTURE,
    BUDGET_WEIGHTS,
    CLIP_NORM,
    EPOCHS,
    LEARNING_RATE,
    PUBLIC_DATA,
    SCHEDULE,
    SENSITIVE_BATCH,
    MethodConfig,
    require_positive,
)
from raydp_synth.errors import ConfigError
from raydp_synth.methods.components.wgan_config import WGANGPConfig
from raydp_synth.methods.dpgan.config import DPGANConfig

__all__ = ["PrivImageDConfig", "PrivImageGConfig", "SemanticQueryConfig"]


@dataclass(frozen=True, kw_only=True)
class SemanticQueryConfig(MethodConfig):
    """What both PrivImage variants share: the semantic query and the selection of
    the public pre-training set.

    Attributes:
        k1: top-k1 semantics each sensitive image adds to the histogram (App. B:
            k1 = k2 in every experiment).
        k2: semantics each class selects; the selection ratio is k2 / #semantics.
        query_share: budget weight of the semantic query against the fine-tuning
            (App. D.3: a tiny share suffices on CIFAR-10's 5000 images a class). On
            digits (~100 images a class, a trial epsilon of 7) a weight of 0.013
            left the query's noise std at 66 and most classes chose a wrong digit;
            0.1 gives std 9 for +1% noise on the fine-tuning.
        pretrain_iters: non-private iterations on the selected public data.
        strict_selection: stop the run when classes collapse onto the same public
            semantics (otherwise a warning).
        public_batch_size: batch size of the pre-training.
        conditional: one histogram and one pre-training set per class.
    """

    KINDS: ClassVar[Mapping[str, str]] = {
        "k1": SCHEDULE, "k2": SCHEDULE, "query_share": BUDGET_WEIGHTS,
        "pretrain_iters": PUBLIC_DATA, "strict_selection": PUBLIC_DATA,
        "public_batch_size": PUBLIC_DATA, "conditional": ARCHITECTURE}

    k1: int = 1
    k2: int = 1
    query_share: float = 0.1
    pretrain_iters: int = 300
    strict_selection: bool = False
    public_batch_size: int = 64
    conditional: bool = True

    def check_semantic_query(self) -> None:
        """The range checks of these fields (each variant's ``__post_init__`` calls it)."""
        require_positive(self, integers=("k1", "k2", "public_batch_size"))
        if not (math.isfinite(self.query_share) and 0 < self.query_share < 1):
            raise ConfigError(f"Expected 0 < query_share={self.query_share} < 1.")
        if self.pretrain_iters < 0:
            raise ConfigError(f"Expected pretrain_iters={self.pretrain_iters} >= 0.")


@dataclass(frozen=True, kw_only=True)
class PrivImageGConfig(WGANGPConfig, SemanticQueryConfig):
    """Hyperparameters of one PrivImage+G run: the semantic query's
    (:class:`SemanticQueryConfig`, ``pretrain_iters`` being WGAN-GP iterations) and
    the GAN's (:class:`~raydp_synth.methods.components.wgan_config.WGANGPConfig`: the
    WGAN-GP critic/generator shared with dpgan and dpwgan; the paper's small GAN is
    a DCGAN of the Opacus example, see docs/privacy.md). ``batch_size`` and
    ``epochs`` are those of the critic's DP fine-tuning, ``clip`` its clip norm.
    """

    batch_size: int = 128

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check_semantic_query()

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


@dataclass(frozen=True, kw_only=True)
class PrivImageDConfig(SemanticQueryConfig):
    """Hyperparameters of one PrivImage+D run (the diffusion variant): the semantic
    query's (:class:`SemanticQueryConfig`, ``pretrain_iters`` being DDPM iterations) and:

    Attributes:
        image_size: side of the images (a multiple of 4: two downsamplings).
        width: channels of the U-Net's first level (the second has 2x).
        batch_size, epochs: expected batch B (q = B/n) and length of the DP-SGD
            fine-tuning of the denoiser.
        clip: per-record clip norm of the denoiser's gradient.
        multiplicity: noise draws (t, e) per record, averaged inside the record's
            loss before clipping (DPDM's noise multiplicity; per record, free).
        pretrain_lr: Adam's learning rate of the pre-training (3000 iterations at
            1e-3 give clear digits of every class on the public 30% of digits).
        lr: Adam's learning rate of the DP fine-tuning (a fresh Adam).
        diffusion_steps: DDPM steps T of the forward process.
        sample_steps: DDIM steps at sampling (App. D.2: 50).
        seed: public seed.
    """

    KINDS: ClassVar[Mapping[str, str]] = {
        "pretrain_lr": PUBLIC_DATA, "width": ARCHITECTURE, "batch_size": SENSITIVE_BATCH,
        "epochs": EPOCHS, "clip": CLIP_NORM, "multiplicity": SCHEDULE, "lr": LEARNING_RATE,
        "diffusion_steps": ARCHITECTURE, "sample_steps": ARCHITECTURE}

    pretrain_iters: int = 3000
    pretrain_lr: float = 1e-3
    width: int = 16
    batch_size: int = 128
    epochs: float = 10.0
    clip: float = 1.0
    multiplicity: int = 4
    lr: float = 5e-4
    diffusion_steps: int = 1000
    sample_steps: int = 50

    def __post_init__(self) -> None:
        if self.image_size < 8 or self.image_size % 4:
            raise ConfigError(f"image_size={self.image_size} must be a multiple of 4 and >= 8 "
                              "(the U-Net halves it twice); use e.g. image_size=16")
        self.check_semantic_query()
        require_positive(self, integers=("width", "batch_size", "multiplicity", "diffusion_steps",
                                         "sample_steps"),
                         floats=("epochs", "clip", "lr", "pretrain_lr"))
        if self.sample_steps > self.diffusion_steps:
            raise ConfigError(f"sample_steps={self.sample_steps} exceeds diffusion_steps="
                              f"{self.diffusion_steps}")
