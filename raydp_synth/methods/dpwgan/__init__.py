"""DP-WGAN-GP with DP-Adam, the small-images paper's method (003_5382d78230ce1590.txt).

One mechanism: the critic's DP-SGD step (Poisson rate q = B/n, ``ceil(epochs / q)``
releases, sensitivity C). The generator, Adam's moments and the synthetic term of
the critic loss are post-processing. The paper's section 3.1 lists accounting errors
of earlier code (a stray 1/sqrt(B) on the noise, sampling that does not match the
accountant); here the plan's event is the one the loop runs, and tests check the
noise scale of the released update.
"""

from __future__ import annotations

import math

import torch

from raydp_synth.errors import ConfigError
from raydp_synth.methods.base import DataInfo, Method, PreNoiseRelease
from raydp_synth.methods.dpwgan.config import DPWGANConfig
from raydp_synth.methods.dpwgan.loop import CRITIC, METRIC_ALLOWLIST, build_networks, run_dpwgan
from raydp_synth.methods.dpwgan.mechanisms import critic_record_grads
from raydp_synth.methods.registry import register_method
from raydp_synth.privacy.calibration import MechanismSpec
from raydp_synth.privacy.dp_sgd import clipped_sum
from raydp_synth.train.context import WorkerContext, derived_seed

__all__ = ["DPWGAN", "DPWGANConfig"]


class DPWGAN(Method):
    """DP-WGAN-GP with DP-Adam (conditional variant)."""

    name = "dpwgan"
    config_class = DPWGANConfig
    metric_allowlist = METRIC_ALLOWLIST

    def schedule(self, config: DPWGANConfig, data: DataInfo) -> list[MechanismSpec]:
        q = config.batch_size / data.num_records
        if q > 1:
            raise ConfigError(f"batch_size={config.batch_size} exceeds the {data.num_records} "
                              "training records; use a smaller batch_size")
        return [MechanismSpec(name=CRITIC, sample_rate=q, num_steps=math.ceil(config.epochs / q),
                              sensitivity=config.clip, share=1.0)]

    def train(self, ctx: WorkerContext) -> None:
        run_dpwgan(ctx)

    def build_generator(self, config: DPWGANConfig, data: DataInfo) -> torch.nn.Module:
        return build_networks(config, data.channels, data.num_classes)[1]

    def pre_noise_releases(
        self, config: DPWGANConfig, data: DataInfo, *, seed: int
    ) -> list[PreNoiseRelease]:
        torch.manual_seed(seed)
        critic, _ = build_networks(config, data.channels, data.num_classes)

        def critic_sum(images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
            # Each record's synthetic partner and mixing coefficient are drawn from
            # a seed tied to the record (public randomness, fixed per record).
            partners, mix = [], []
            for x in images:
                gen = torch.Generator().manual_seed(derived_seed(seed, x.numpy().tobytes()))
                partners.append(torch.rand(x.shape, generator=gen) * 2 - 1)
                mix.append(torch.rand(1, 1, 1, generator=gen))
            shape = (0, *images.shape[1:])
            grads = critic_record_grads(
                critic, images, labels,
                torch.stack(partners) if partners else torch.zeros(shape),
                torch.stack(mix) if mix else torch.zeros(0, 1, 1, 1),
                gp_weight=config.gp_weight)
            return clipped_sum(grads, max_grad_norm=config.clip,
                               shapes=[p.shape for p in critic.parameters()])

        return [PreNoiseRelease(mechanism=CRITIC, compute=critic_sum, sensitivity=config.clip)]


register_method(DPWGAN())
