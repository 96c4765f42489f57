"""DP-WGAN-GP with DP-Adam, the small-images paper's method (Schwabedal, Michel and Riontino 2020).

One mechanism: the critic's DP-SGD step (Poisson rate q = B/n, ``ceil(epochs / q)``
releases, sensitivity C). The generator, Adam's moments and the synthetic term of
the critic loss are post-processing. The paper's section 3.1 lists accounting errors
of earlier code (a stray 1/sqrt(B) on the noise, sampling that does not match the
accountant); here the plan's event is the one the loop runs, and tests check the
noise scale of the released update.
"""

from __future__ import annotations

import torch

from raydp_synth.data import DataInfo
from raydp_synth.methods.base import Method
from raydp_synth.methods.components.wgan_gp import wgan_gp_networks
from raydp_synth.methods.dpwgan.config import DPWGANConfig
from raydp_synth.methods.dpwgan.loop import CRITIC, METRIC_ALLOWLIST, run_dpwgan
from raydp_synth.privacy.calibration import MechanismSpec
from raydp_synth.runtime.context import WorkerContext

__all__ = ["DPWGAN", "DPWGANConfig"]


class DPWGAN(Method):
    """DP-WGAN-GP with DP-Adam (conditional variant)."""

    name = "dpwgan"
    config_class = DPWGANConfig
    metric_allowlist = METRIC_ALLOWLIST
    smoke_settings = {"epochs": 1, "capacity": 4, "batch_size": 24}

    def schedule(self, config: DPWGANConfig, data: DataInfo) -> list[MechanismSpec]:
        return [MechanismSpec.for_epochs(CRITIC, batch_size=config.batch_size, epochs=config.epochs,
                                         num_records=data.num_records, sensitivity=config.clip,
                                         share=1.0)]

    def train(self, ctx: WorkerContext) -> None:
        run_dpwgan(ctx)

    def build_generator(self, config: DPWGANConfig, data: DataInfo) -> torch.nn.Module:
        return wgan_gp_networks(config, data.channels, data.num_classes)[1]
