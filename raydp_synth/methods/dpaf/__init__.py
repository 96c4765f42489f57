"""DPAF, privacy-corrected (Lin et al. 2023, DPAF; docs/privacy.md, section 2)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from raydp_synth.data import DataInfo
from raydp_synth.methods.base import Method
from raydp_synth.methods.dpaf.config import DPAFConfig
from raydp_synth.methods.dpaf.loop import METRIC_ALLOWLIST, run_dpaf
from raydp_synth.methods.dpaf.networks import Generator
from raydp_synth.methods.dpaf.plan import dpaf_schedule
from raydp_synth.privacy.calibration import MechanismSpec
from raydp_synth.runtime.context import WorkerContext

__all__ = ["DPAF", "DPAFConfig"]


class DPAF(Method):
    """The flagship method: DP feature aggregation in the forward phase."""

    name = "dpaf"
    config_class = DPAFConfig
    metric_allowlist = METRIC_ALLOWLIST
    # clip_conv2 below conv2*'s per-record gradients J_i^T v (0.2-0.7 on the digits,
    # ~1e-3 on 32x32 images: a few hundred records give noisy released aggregates):
    # every record sits at the bound, which the contract's audit checks is attained.
    # Adam's steps do not depend on the clip's scale.
    smoke_settings = {"epochs": 2, "classifier_epochs": 1, "base_width": 8, "batch_size": 24,
                      "classifier_batch_size": 24, "clip_conv2": 1e-4}

    def make_config(self, values: Mapping[str, Any], data: DataInfo) -> DPAFConfig:
        config: DPAFConfig = super().make_config(values, data)
        config.architecture(channels=data.channels, num_classes=data.num_classes)  # validates
        return config

    def schedule(self, config: DPAFConfig, data: DataInfo) -> list[MechanismSpec]:
        return dpaf_schedule(config, data)

    def train(self, ctx: WorkerContext) -> None:
        run_dpaf(ctx)

    def build_generator(self, config: DPAFConfig, data: DataInfo) -> torch.nn.Module:
        return Generator(config.architecture(channels=data.channels, num_classes=data.num_classes))
