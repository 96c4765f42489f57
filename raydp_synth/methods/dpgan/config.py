"""dpGAN's typed configuration (Zhang, Ji and Wang 2018, dpGAN, Table 1; search-space
keys). PrivImage+G's fine-tuning is a dpGAN run of this config
(:meth:`~raydp_synth.methods.privimage.config.PrivImageGConfig.fine_tuning`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from raydp_synth.config import ARCHITECTURE, CLIP_NORM, PUBLIC_DATA, require_positive
from raydp_synth.errors import ConfigError
from raydp_synth.methods.components.wgan_config import WGANGPConfig

__all__ = ["DPGANConfig"]


@dataclass(frozen=True, kw_only=True)
class DPGANConfig(WGANGPConfig):
    """Hyperparameters of one dpGAN run: the shared WGAN-GP fields
    (:class:`~raydp_synth.methods.components.wgan_config.WGANGPConfig`; ``n_critic``
    is the paper's 5, ``gp_weight`` its 10) and:

    Attributes:
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
        seed: public seed of initialisation, synthetic draws and public batches.

    Defaults follow dpwgan's sweep on digits (the same critic step): one critic step
    per G step, G's learning rate above the critic's, batch 64, 20 epochs.
    """

    KINDS: ClassVar[Mapping[str, str]] = {
        "groups": CLIP_NORM, "bias_clip": CLIP_NORM, "adaptive_clip": CLIP_NORM,
        "warm_start_iters": PUBLIC_DATA, "public_batch_size": PUBLIC_DATA,
        "conditional": ARCHITECTURE}

    groups: int = 2
    bias_clip: float = 0.25
    adaptive_clip: bool | None = None
    warm_start_iters: int = 0
    public_batch_size: int = 64
    conditional: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        require_positive(self, integers=("groups", "public_batch_size"), floats=("bias_clip",))
        if self.warm_start_iters < 0:
            raise ConfigError(f"Expected warm_start_iters={self.warm_start_iters} >= 0.")
        if self.groups >= 3 and self.adaptive_clip is False:
            raise ConfigError(
                f"groups={self.groups} clusters the weights by bounds estimated on public data; "
                "use groups=1 or 2 without adaptive clipping, or declare public data")
        units = 7 * self.capacity + 1  # output filters/neurons of the critic's weights
        if self.groups > units + 1:
            raise ConfigError(f"groups={self.groups} exceeds the critic's {units} weight units "
                              f"plus the bias group; use groups <= {units + 1}")
