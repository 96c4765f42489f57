"""PrivImage (Li et al. 2024, PrivImage): DP semantic query, semantic-aware public
pre-training, DP-SGD fine-tuning: ``privimage-g`` (the GAN variant, fine-tuned as a
dpGAN run) and ``privimage-d`` (the diffusion variant: a compact U-Net, DDPM, DDIM).

Plan (Theorem F.2): the one-shot Gaussian ``semantic_query`` (sensitivity sqrt(k1),
no subsampling) composed with the fine-tuning mechanism ``critic`` (T
Poisson-subsampled Gaussian steps of ``critic`` or ``denoiser``), plus the selection score; the budget split
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
import warnings
from collections.abc import Mapping
from typing import Any

import torch

from raydp_synth.data import DataInfo, ImageDataset
from raydp_synth.errors import ConfigError
from raydp_synth.methods.base import Method
from raydp_synth.methods.dpgan.loop import (
    METRIC_ALLOWLIST,
    build_networks,
    critic_schedule,
    model_labels,
    run_dpgan,
)
from raydp_synth.methods.privimage.config import PrivImageDConfig, PrivImageGConfig
from raydp_synth.methods.privimage.diffusion import DDPMSchedule, ddim_sample
from raydp_synth.methods.privimage.diffusion_loop import DENOISER, build_denoiser, run_privimage_d
from raydp_synth.methods.privimage.diffusion_loop import METRIC_ALLOWLIST as DIFFUSION_METRICS
from raydp_synth.methods.privimage.semantics import (
    SelectionCollapsed,
    SemanticQuery,
    collapsed_classes,
    describe_selection,
    release_semantic_distribution,
    select_public,
    semantic_histogram,
)
from raydp_synth.privacy.calibration import MechanismSpec
from raydp_synth.privacy.records import RecordBatch
from raydp_synth.runtime.context import WorkerContext

__all__ = ["DEFAULT_PUBLIC", "SEMANTIC_QUERY", "PrivImageD", "PrivImageDConfig", "PrivImageG",
           "PrivImageGConfig", "pretraining_set", "release_semantics",
           "semantic_query_pre_noise"]

SEMANTIC_QUERY = "semantic_query"
DEFAULT_PUBLIC = {"digits": "digits:fraction=0.3"}


def semantic_query_pre_noise(query: SemanticQuery, config: Any, num_classes: int,
                             batch: RecordBatch) -> torch.Tensor:
    """The semantic query's pre-noise sum: the histogram (flattened, every class
    row) of the records' top-k1 semantics. Record i adds k1 ones to its own class's
    row, computed from record i and the public query alone: sensitivity sqrt(k1)."""
    n = batch.num_records  # the records (a padded batch's padding rows are left out)
    top = query.top_k(batch.images[:n].cpu().numpy(), config.k1)
    return semantic_histogram(top, batch.labels[:n].cpu().numpy(), num_semantics=query.num_semantics,
                              num_classes=num_classes, conditional=config.conditional).flatten()


def release_semantics(ctx: WorkerContext, query: SemanticQuery) -> torch.Tensor:
    """The DP semantic distribution of the training split (every record once, each
    rank its shard), noised with the plan's ``semantic_query`` mechanism: the noise
    std is that mechanism's multiplier times its sensitivity sqrt(k1), the same
    numbers the accountant charged."""
    cfg: PrivImageGConfig = ctx.config
    k = ctx.data.num_classes

    def pre_noise(batch: RecordBatch) -> torch.Tensor:
        return semantic_query_pre_noise(query, cfg, k, batch)

    local = ctx.pre_noise_sum(SEMANTIC_QUERY, pre_noise, ctx.sampler(SEMANTIC_QUERY).sample())
    mech = ctx.plan.mechanism(SEMANTIC_QUERY)
    rows = k if cfg.conditional else 1
    return release_semantic_distribution(local.view(rows, query.num_semantics),
                                         noise_multiplier=mech.noise_multiplier,
                                         sensitivity=mech.sensitivity,
                                         generator=ctx.noise_generator)


def pretraining_set(ctx: WorkerContext, method: str) -> ImageDataset:
    """Release the semantic query and select the public pre-training set (each
    class's top-k2 semantics, relabelled): the first step of both variants."""
    cfg = ctx.config
    if ctx.public is None:
        raise ConfigError(f"{method} needs the declared public data on every worker")
    query = SemanticQuery(ctx.public, seed=cfg.seed)
    noisy = release_semantics(ctx, query)
    selected, chosen = select_public(noisy, ctx.public, query.public_semantics, k2=cfg.k2,
                                     conditional=cfg.conditional, num_classes=ctx.data.num_classes)
    ctx.log(f"[{method}] semantic query released; {len(selected)} public images selected; "
            "the released semantic distribution:")
    for line in describe_selection(noisy, query.semantics, chosen):
        ctx.log(f"[{method}]   {line}")
    collapsed = collapsed_classes(chosen) if cfg.conditional else []
    if collapsed:
        message = (f"{method}: classes {collapsed} selected the same public semantics, so they "
                   "pre-train on the same images; the public data (or its semantic query) may "
                   "not fit this dataset. Declare public data closer to it, raise k2, or set "
                   "strict_selection=true to stop on this")
        if cfg.strict_selection:
            raise SelectionCollapsed(message)
        warnings.warn(message, stacklevel=2)
        ctx.log(f"[{method}] WARNING: {message}")
    return selected


def _query_spec(config: Any) -> MechanismSpec:
    return MechanismSpec(name=SEMANTIC_QUERY, sample_rate=None, num_steps=1,
                         sensitivity=math.sqrt(config.k1), share=config.query_share)


class _PrivImage(Method):
    """What both variants share: public data is required (or the documented default)."""

    default_public = DEFAULT_PUBLIC
    requires_public = True

    def make_config(self, values: Mapping[str, Any], data: DataInfo) -> Any:
        if data.public_records == 0:
            raise ConfigError(f"{self.name} pre-trains on public data; declare public data "
                              "(e.g. folder:DIR, or digits:fraction=0.3 on the digits)")
        return super().make_config(values, data)


class PrivImageG(_PrivImage):
    """PrivImage+G: the GAN variant."""

    name = "privimage-g"
    config_class = PrivImageGConfig
    #: dpGAN's keys (the fine-tuning loop is dpGAN's); ``clip_bound`` is the fixed clip.
    metric_allowlist = METRIC_ALLOWLIST
    smoke_settings = {"epochs": 1, "capacity": 4, "batch_size": 24, "k1": 2, "pretrain_iters": 2}
    search_space_resource = "search_space_g.yaml"

    def schedule(self, config: PrivImageGConfig, data: DataInfo) -> list[MechanismSpec]:
        return [_query_spec(config),
                critic_schedule(config.fine_tuning(), data, share=1.0 - config.query_share)]

    def train(self, ctx: WorkerContext) -> None:
        cfg: PrivImageGConfig = ctx.config
        selected = pretraining_set(ctx, self.name)
        fine = dataclasses.replace(ctx, config=cfg.fine_tuning(), public=selected)
        run_dpgan(fine, spent_before={SEMANTIC_QUERY: 1}, tag=self.name)

    def build_generator(self, config: PrivImageGConfig, data: DataInfo) -> torch.nn.Module:
        return build_networks(config.fine_tuning(), data.channels, data.num_classes)[1]

    def sample(self, generator: torch.nn.Module, config: PrivImageGConfig, labels: torch.Tensor, *,
               rng: torch.Generator) -> torch.Tensor:
        return super().sample(generator, config, model_labels(config.fine_tuning(), labels), rng=rng)


class PrivImageD(_PrivImage):
    """PrivImage+D: the diffusion variant (compact U-Net, DDPM, DDIM sampling)."""

    name = "privimage-d"
    config_class = PrivImageDConfig
    metric_allowlist = DIFFUSION_METRICS
    # 50-step DDIM: 10,000 samples took ~20 min of a study's evaluation on 2 cores.
    evaluation_samples = (2_000, 500)
    smoke_settings = {"epochs": 0.3, "width": 8, "multiplicity": 2, "k1": 2, "batch_size": 24,
                      "pretrain_iters": 2}
    search_space_resource = "search_space_d.yaml"

    def schedule(self, config: PrivImageDConfig, data: DataInfo) -> list[MechanismSpec]:
        return [_query_spec(config),
                MechanismSpec.for_epochs(DENOISER, batch_size=config.batch_size,
                                         epochs=config.epochs, num_records=data.num_records,
                                         sensitivity=config.clip, share=1.0 - config.query_share)]

    def train(self, ctx: WorkerContext) -> None:
        selected = pretraining_set(ctx, self.name)
        run_privimage_d(ctx, selected, spent_before={SEMANTIC_QUERY: 1})

    def build_generator(self, config: PrivImageDConfig, data: DataInfo) -> torch.nn.Module:
        return build_denoiser(config, data.channels, data.num_classes)

    def sample(self, generator: torch.nn.Module, config: PrivImageDConfig, labels: torch.Tensor, *,
               rng: torch.Generator) -> torch.Tensor:
        """DDIM with ``sample_steps`` steps (the release's generator is the denoiser)."""
        labels = labels if config.conditional else torch.zeros_like(labels)
        inp = generator.get_submodule("inp")
        if not isinstance(inp, torch.nn.Conv2d):
            raise TypeError(f"the denoiser's input layer is {type(inp).__name__}, not a Conv2d")
        shape = (inp.in_channels, config.image_size, config.image_size)
        return ddim_sample(generator, DDPMSchedule(config.diffusion_steps), labels, shape=shape,
                           steps=config.sample_steps, rng=rng)
