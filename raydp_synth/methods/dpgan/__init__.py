"""dpGAN (Zhang, Ji and Wang 2018, dpGAN): DP WGAN-GP with noise on the critic only, clip
groups, adaptive clip bounds and warm start on declared public data.

One mechanism: the critic's DP step (Poisson rate q = B/n, ``ceil(epochs / q)``
releases). With k clip groups it is one Gaussian mechanism of sensitivity sqrt(k)
(each group rescaled by its bound), so the plan's noise multiplier z is the
paper's per-group sigma divided by sqrt(k) (docs/architecture.md, invariant 5), never a parallel
composition of k mechanisms. The generator, Adam, the clip bounds (public data and
the released critic) and the warm start (public data) are post-processing or
public. Public options are refused without data declared public (``--public``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from raydp_synth.config import config_from_mapping
from raydp_synth.data import DataInfo
from raydp_synth.errors import ConfigError
from raydp_synth.methods.base import Method
from raydp_synth.methods.dpgan.config import DPGANConfig
from raydp_synth.methods.dpgan.loop import (
    METRIC_ALLOWLIST,
    build_networks,
    critic_schedule,
    model_labels,
    run_dpgan,
)
from raydp_synth.privacy.calibration import MechanismSpec
from raydp_synth.runtime.context import WorkerContext

__all__ = ["DPGAN", "DPGANConfig"]

_PUBLIC_FIX = "declare public data (e.g. digits:fraction=0.02, 2% of the digits)"


class DPGAN(Method):
    """dpGAN (conditional by default)."""

    name = "dpgan"
    config_class = DPGANConfig
    metric_allowlist = METRIC_ALLOWLIST
    smoke_settings = {"epochs": 1, "capacity": 4, "batch_size": 24}

    def make_config(self, values: Mapping[str, Any], data: DataInfo) -> DPGANConfig:
        """Defaults plus user values; ``adaptive_clip`` follows the public data unless
        set, and public-data options without public data are refused."""
        values = dict(values)
        values.setdefault("image_size", data.image_size)
        config: DPGANConfig = config_from_mapping(self.config_class, values)
        has_public = data.public_records > 0
        if config.adaptive_clip is None:
            config = config_from_mapping(self.config_class, values, adaptive_clip=has_public)
        if not has_public:
            if config.adaptive_clip:
                raise ConfigError(f"adaptive_clip estimates clip bounds on public data; {_PUBLIC_FIX} "
                                  "or set adaptive_clip=false")
            if config.warm_start_iters:
                raise ConfigError(f"warm_start_iters={config.warm_start_iters} trains on public "
                                  f"data; {_PUBLIC_FIX} or set warm_start_iters=0")
        return config

    def schedule(self, config: DPGANConfig, data: DataInfo) -> list[MechanismSpec]:
        return [critic_schedule(config, data)]

    def train(self, ctx: WorkerContext) -> None:
        run_dpgan(ctx)

    def build_generator(self, config: DPGANConfig, data: DataInfo) -> torch.nn.Module:
        return build_networks(config, data.channels, data.num_classes)[1]

    def sample(self, generator: torch.nn.Module, config: DPGANConfig, labels: torch.Tensor, *,
               rng: torch.Generator) -> torch.Tensor:
        return super().sample(generator, config, model_labels(config, labels), rng=rng)
