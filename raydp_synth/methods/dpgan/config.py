"""dpGAN's typed configuration (Zhang, Ji and Wang 2018, dpGAN, Table 1; search-space keys)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from raydp_synth.config import require_betas, require_positive
from raydp_synth.errors import ConfigError

__all__ = ["DPGANConfig"]


@dataclass(frozen=True, kw_only=True)
class DPGANConfig:
    """Hyperparameters of one dpGAN run.

    Attributes:
        image_size: side of the images (a power of two >= 8: three strided convs).
        capacity: filters of the critic's first conv (doubling); G mirrors it.
        latent_dim: G's Gaussian latent dimension.
        batch_size: expected batch size B of the critic's DP steps (q = B / n).
        epochs: length of training, in expected passes over the data.
        n_critic: critic steps per G step (001: 5; G's steps are free).
        gp_weight: the gradient-penalty weight lambda (001: 10).
        groups: k, the number of clip groups (dpGAN paper, section 4.1). 1: one global
            bound. 2: weight/bias separation. With adaptive clipping, biases form
            one group and the weight units (one per output filter or neuron) are
            clustered into k - 1 groups by their estimated bounds (Algorithm 2);
            k >= 3 needs adaptive clipping. Accounting: one Gaussian mechanism of
            noise multiplier sigma / sqrt(k) whatever the bounds
            (docs/architecture.md, invariant 5).
        clip: fixed clip bound of the weights (of everything when ``groups`` = 1);
            unused with adaptive clipping.
        bias_clip: fixed clip bound of the biases when ``groups`` = 2.
        adaptive_clip: estimate every bound each step as the mean per-record
            gradient norm on a batch of *public* data (dpGAN paper, section 4.2). ``None``
            (the default) turns it on exactly when the run has data declared
            public (``--public``); ``True`` without public data is refused.
        warm_start_iters: non-private WGAN-GP iterations on the public data before
            the DP steps (dpGAN paper, section 4.3; Table 1: 300 on MNIST); needs ``--public``.
        public_batch_size: batch size of the public data (bounds and warm start).
        conditional: label-conditional critic and generator (the release has
            labels); ``False`` is the paper's unconditional dpGAN, whose release
            labels carry no meaning (CAS does not apply, FID/IS do).
        lr_d, lr_g, beta1, beta2: Adam's settings of the critic and of G.
        seed: public seed of initialisation, synthetic draws and public batches.

    Defaults follow dpwgan's sweep on digits (the same critic step): one critic step
    per G step, G's learning rate above the critic's, batch 64, 20 epochs.
    """

    image_size: int
    capacity: int = 16
    latent_dim: int = 128
    batch_size: int = 64
    epochs: float = 20.0
    n_critic: int = 1
    gp_weight: float = 10.0
    groups: int = 2
    clip: float = 1.0
    bias_clip: float = 0.25
    adaptive_clip: bool | None = None
    warm_start_iters: int = 0
    public_batch_size: int = 64
    conditional: bool = True
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
        require_positive(self, integers=("capacity", "latent_dim", "batch_size", "n_critic",
                                         "groups", "public_batch_size"),
                         floats=("epochs", "clip", "bias_clip", "lr_d", "lr_g"))
        if not (math.isfinite(self.gp_weight) and self.gp_weight >= 0):
            raise ConfigError(f"Expected gp_weight={self.gp_weight} >= 0.")
        if self.warm_start_iters < 0:
            raise ConfigError(f"Expected warm_start_iters={self.warm_start_iters} >= 0.")
        require_betas(self)
        if self.groups >= 3 and self.adaptive_clip is False:
            raise ConfigError(
                f"groups={self.groups} clusters the weights by bounds estimated on public data; "
                "use groups=1 or 2 without adaptive clipping, or declare public data")
        units = 7 * self.capacity + 1  # output filters/neurons of the critic's weights
        if self.groups > units + 1:
            raise ConfigError(f"groups={self.groups} exceeds the critic's {units} weight units "
                              f"plus the bias group; use groups <= {units + 1}")
