"""PrivImage (004_620720e614b6f1cb.txt): DP semantic query, semantic-aware public
pre-training, DP-SGD fine-tuning. ``privimage-g`` is the GAN variant; the diffusion
variant ``privimage-d`` is not built yet (asking for it says so).

Plan (Theorem F.2): the one-shot Gaussian ``semantic_query`` (sensitivity sqrt(k1),
no subsampling) composed with the fine-tuning mechanism ``critic`` (T
Poisson-subsampled Gaussian steps), plus the selection score; the budget split
between them is ``query_share``. The query's noise in the loop is read from the same
plan mechanism that the accountant charges (a public implementation accounted a
different sigma than it used). Pre-training reads only public data and the noisy
histogram (post-processing).

Public data: ``--public``; on the embedded ``digits`` without ``--public`` the method
uses the documented default declaration ``digits:fraction=0.3`` (scikit-learn's
digits are public data; 30% of them, with their labels as semantics, play the
public dataset, and are taken out of the private training split).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from raydp_synth.errors import ConfigError
from raydp_synth.methods.base import DataInfo, Method, PreNoiseRelease, config_from_mapping
from raydp_synth.methods.dpgan import DPGAN
from raydp_synth.methods.dpgan.loop import METRIC_ALLOWLIST, build_networks, model_labels, run_dpgan
from raydp_synth.methods.privimage.config import PrivImageGConfig
from raydp_synth.methods.privimage.semantics import (
    SemanticQuery,
    release_semantic_distribution,
    select_public,
    semantic_histogram,
)
from raydp_synth.methods.registry import register_method
from raydp_synth.privacy.calibration import MechanismSpec
from raydp_synth.privacy.sampling import shard_indices
from raydp_synth.train.context import WorkerContext

__all__ = ["DEFAULT_PUBLIC", "SEMANTIC_QUERY", "PrivImageG", "PrivImageGConfig", "release_semantics"]

SEMANTIC_QUERY = "semantic_query"
DEFAULT_PUBLIC = {"digits": "digits:fraction=0.3"}
_DPGAN = DPGAN()


def release_semantics(ctx: WorkerContext, query: SemanticQuery) -> torch.Tensor:
    """The DP semantic distribution of the training split (every record once, each
    rank its shard), noised with the plan's ``semantic_query`` mechanism: the noise
    std is that mechanism's multiplier times its sensitivity sqrt(k1), the same
    numbers the accountant charged."""
    cfg: PrivImageGConfig = ctx.config
    shard = shard_indices(len(ctx.train), rank=ctx.rank, world_size=ctx.world_size)
    top = query.top_k(ctx.train.images[shard], cfg.k1)
    local = semantic_histogram(top, ctx.train.labels[shard], num_semantics=query.num_semantics,
                               num_classes=ctx.data.num_classes, conditional=cfg.conditional)
    mech = ctx.plan.mechanism(SEMANTIC_QUERY)
    return release_semantic_distribution(local, noise_multiplier=mech.noise_multiplier,
                                         sensitivity=mech.sensitivity,
                                         generator=ctx.noise_generator)


class PrivImageG(Method):
    """PrivImage+G: the GAN variant."""

    name = "privimage-g"
    config_class = PrivImageGConfig
    #: dpGAN's keys (the fine-tuning loop is dpGAN's); ``clip_bound`` is the fixed clip.
    metric_allowlist = METRIC_ALLOWLIST
    default_public = DEFAULT_PUBLIC

    def make_config(self, values: Mapping[str, Any], data: DataInfo) -> PrivImageGConfig:
        if data.public_records == 0:
            raise ConfigError("privimage-g pre-trains on public data; declare it with --public "
                              "(e.g. --public folder:DIR, or digits:fraction=0.3 on the digits)")
        values = dict(values)
        values.setdefault("image_size", data.image_size)
        return config_from_mapping(self.config_class, values)

    def schedule(self, config: PrivImageGConfig, data: DataInfo) -> list[MechanismSpec]:
        (critic,) = _DPGAN.schedule(config.fine_tuning(), data)
        query = MechanismSpec(name=SEMANTIC_QUERY, sample_rate=None, num_steps=1,
                              sensitivity=math.sqrt(config.k1), share=config.query_share)
        return [query, dataclasses.replace(critic, share=1.0 - config.query_share)]

    def train(self, ctx: WorkerContext) -> None:
        cfg: PrivImageGConfig = ctx.config
        if ctx.public is None:
            raise ConfigError("privimage-g needs the declared public data on every worker")
        query = SemanticQuery(ctx.public, seed=cfg.seed)
        noisy = release_semantics(ctx, query)
        selected, chosen = select_public(noisy, ctx.public, query.public_semantics, k2=cfg.k2,
                                         conditional=cfg.conditional,
                                         num_classes=ctx.data.num_classes)
        ctx.log(f"[privimage-g] semantic query released; {len(selected)} public images selected "
                f"(semantics per class: {query.semantics[chosen].tolist()})")
        fine = dataclasses.replace(ctx, config=cfg.fine_tuning(), public=selected)
        run_dpgan(fine, spent_before={SEMANTIC_QUERY: 1})

    def build_generator(self, config: PrivImageGConfig, data: DataInfo) -> torch.nn.Module:
        return build_networks(config.fine_tuning(), data.channels, data.num_classes)[1]

    def sample(self, generator: torch.nn.Module, config: PrivImageGConfig, labels: torch.Tensor, *,
               rng: torch.Generator) -> torch.Tensor:
        return super().sample(generator, config, model_labels(config.fine_tuning(), labels), rng=rng)

    def pre_noise_releases(
        self, config: PrivImageGConfig, data: DataInfo, *, seed: int
    ) -> list[PreNoiseRelease]:
        from raydp_synth.data import ImageDataset

        gen = np.random.default_rng(seed)  # a stand-in public set (noise images, 5 semantics)
        stand_in = ImageDataset(
            images=gen.uniform(-1, 1, (50, data.channels, data.image_size, data.image_size))
            .astype(np.float32),
            labels=np.arange(50) % 5, num_classes=data.num_classes, name="stand-in", public=True)
        query = SemanticQuery(stand_in, seed=seed)

        def histogram(images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
            return semantic_histogram(query.top_k(images.numpy(), config.k1), labels.numpy(),
                                      num_semantics=query.num_semantics,
                                      num_classes=data.num_classes,
                                      conditional=config.conditional).flatten()

        (critic,) = _DPGAN.pre_noise_releases(config.fine_tuning(), data, seed=seed)
        return [PreNoiseRelease(mechanism=SEMANTIC_QUERY, compute=histogram,
                                sensitivity=math.sqrt(config.k1)),
                critic]


register_method(PrivImageG())
