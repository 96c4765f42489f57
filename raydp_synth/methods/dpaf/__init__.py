"""DPAF, privacy-corrected (000_7d0ded9903bce7e2.txt; design.md 4; docs/privacy.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from opacus import GradSampleModule

from raydp_synth.methods.base import DataInfo, Method, PreNoiseRelease
from raydp_synth.methods.dpaf.config import DPAFConfig
from raydp_synth.methods.dpaf.loop import METRIC_ALLOWLIST, run_dpaf
from raydp_synth.methods.dpaf.mechanisms import (
    classifier_record_grads,
    conv2_record_grads,
    feature_sum,
)
from raydp_synth.methods.dpaf.networks import Classifier, DiscriminatorParts, Generator
from raydp_synth.methods.dpaf.plan import CLASSIFIER, CONV2, DPAGG, dpaf_schedule
from raydp_synth.methods.registry import register_method
from raydp_synth.privacy.calibration import MechanismSpec
from raydp_synth.privacy.dp_sgd import clipped_sum
from raydp_synth.train.context import WorkerContext

__all__ = ["DPAF", "DPAFConfig"]


class DPAF(Method):
    """The flagship method: DP feature aggregation in the forward phase."""

    name = "dpaf"
    config_class = DPAFConfig
    metric_allowlist = METRIC_ALLOWLIST

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

    def pre_noise_releases(self, config: DPAFConfig, data: DataInfo, *, seed: int) -> list[PreNoiseRelease]:
        arch = config.architecture(channels=data.channels, num_classes=data.num_classes)
        torch.manual_seed(seed)
        classifier = GradSampleModule(Classifier(arch), loss_reduction="sum")
        parts = DiscriminatorParts(arch)
        for p in parts.conv1.parameters():
            p.requires_grad_(False)
        conv2 = GradSampleModule(parts.conv2, loss_reduction="sum")
        p = arch.agg_map_size
        # A fixed "released" loss direction, as the loop takes from DPAGG's output.
        by_class = config.aggregation == "class"
        shape = (arch.num_classes, arch.agg_maps, p, p) if by_class else (arch.agg_maps, p, p)
        direction = torch.randn(shape, generator=torch.Generator().manual_seed(seed))

        def classifier_sum(images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
            return clipped_sum(classifier_record_grads(classifier, images, labels),
                               max_grad_norm=config.clip_classifier,
                               topk_fraction=config.topk_fraction)

        def conv2_sum(images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
            return clipped_sum(conv2_record_grads(conv2, parts, images, labels, direction),
                               max_grad_norm=config.clip_conv2,
                               topk_fraction=config.topk_fraction)

        def agg_sum(images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
            conv2.disable_hooks()
            try:
                with torch.no_grad():
                    return feature_sum(parts, images, labels, by_class=by_class)
            finally:
                conv2.enable_hooks()

        return [
            PreNoiseRelease(mechanism=CLASSIFIER, compute=classifier_sum,
                            sensitivity=config.clip_classifier),
            PreNoiseRelease(mechanism=CONV2, compute=conv2_sum, sensitivity=config.clip_conv2),
            PreNoiseRelease(mechanism=DPAGG, compute=agg_sum, sensitivity=arch.agg_sensitivity),
        ]


register_method(DPAF())
