"""DP-WGAN-GP's typed configuration (Schwabedal, Michel and Riontino 2020; search-space keys)."""

from __future__ import annotations

from dataclasses import dataclass

from raydp_synth.methods.components.wgan_config import WGANGPConfig

__all__ = ["DPWGANConfig"]


@dataclass(frozen=True, kw_only=True)
class DPWGANConfig(WGANGPConfig):
    """Hyperparameters of one DP-WGAN-GP run with DP-Adam: exactly the shared
    WGAN-GP fields (:class:`~raydp_synth.methods.components.wgan_config.WGANGPConfig`).

    ``clip``: with Adam, the run is nearly independent of C once C is below the
    per-record gradient norms (the paper's section 3.2.1): C = 1 is the paper's choice.

    Defaults: the best of a small sweep on digits at epsilon 10 (CAS 0.60, FID
    1217 with batch 64, 20 epochs; n_critic 5 and
    50 epochs, the paper's WGAN-GP habits, left G ~60 steps and mode-collapsed;
    one critic step per G step and G's learning rate above the critic's did best).
    The capacity's class default, 16, is the one at 16x16; :meth:`DPWGAN.make_config
    <raydp_synth.methods.dpwgan.DPWGAN.make_config>` sets it from the image size
    (32 above 16x16, :func:`~raydp_synth.methods.dpwgan.default_capacity`).
    """
