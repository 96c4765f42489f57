"""DPAF's DP training loop on one Ray Train worker (privacy-corrected Algorithm 1).

Phase 1 trains the classifier C with DP-SGD (mechanism ``classifier``) and
transfers conv1 to D, frozen. Phase 2 iterates, with independent Poisson samples
for each mechanism:

1. DPAGG (``dpagg``): the noisy sum of the SIN features of a real batch, and the
   same noise distribution on a synthetic batch's sum (no privacy cost; it keeps
   the head from telling real from fake by the noise level).
2. conv3*, FC*: SGD on the BCE of the two released aggregates (post-processing).
3. every mu iterations (the cadence the plan gives ``conv2``), conv2*: DP-SGD on
   its own sample of rate mu*q3, with per-record gradients ``J_i^T v`` at the
   released aggregate, plus the (non-private) gradient of the synthetic side.
4. every n_critic iterations, G: SGD through D-hat on synthetic records only.

See docs/privacy.md for the argument and each deviation from the paper.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import torch
from opacus import GradSampleModule
from torch.nn import functional as F

from raydp_synth.errors import PrivacyInvariantError
from raydp_synth.methods.dpaf.config import DPAFConfig
from raydp_synth.methods.dpaf.mechanisms import (
    classifier_pre_noise,
    conv2_pre_noise,
    dpagg,
    dpagg_pre_noise,
    feature_sum,
)
from raydp_synth.methods.dpaf.networks import Classifier, DiscriminatorParts, Generator, sin
from raydp_synth.methods.dpaf.plan import CLASSIFIER, CONV2, DPAGG
from raydp_synth.privacy.noise import gaussian_noise, noisy_sum
from raydp_synth.privacy.records import RecordBatch
from raydp_synth.runtime.context import WorkerContext
from raydp_synth.runtime.distributed import all_reduce_mean_, all_reduce_sum_, data_parallel_step
from raydp_synth.runtime.dp_step import dp_sgd_step
from raydp_synth.runtime.reporting import EpochReporter
from raydp_synth.runtime.seeding import seeded

__all__ = ["METRIC_ALLOWLIST", "run_dpaf", "total_variation"]

#: Every key DPAF reports. Safe because: epoch/step counters and epsilon_spent
#: are public (plan arithmetic); d_loss_noisy and the d_*_noisy scores are
#: functions of DPAGG's released (noisy) aggregates and of parameters that are
#: themselves DP releases; g_loss is computed on synthetic records only. No wall
#: time: it grows with the realised (secret) batch sizes.
METRIC_ALLOWLIST = frozenset(
    {
        "phase",
        "epoch",
        "step",
        "epsilon_spent",
        "d_loss_noisy",
        "d_real_prob_noisy",
        "d_fake_prob_noisy",
        "g_loss",
    }
)


def _plus(synthetic: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """Post-processing of a release: add the gradient of the synthetic term."""

    def add(released: torch.Tensor) -> torch.Tensor:
        return released.to(synthetic) + synthetic

    return add



class _DPAFRun:
    def __init__(self, ctx: WorkerContext) -> None:
        self.ctx = ctx
        self.config: DPAFConfig = ctx.config
        data = ctx.data
        self.arch = self.config.architecture(channels=data.channels, num_classes=data.num_classes)
        self.device = ctx.device
        self.n = data.num_records
        # Identical initial parameters on every rank: one rank-independent generator.
        self.init = ctx.shared_generator("init")
        self.parts = seeded(lambda: DiscriminatorParts(self.arch), self.init).to(self.device)
        self.G = seeded(lambda: Generator(self.arch), self.init).to(self.device)
        self.reporter = EpochReporter(ctx, tag="dpaf",
                                      networks={"generator": self.G, "discriminator": self.parts})

    # ---------------------------------------------------------------- helpers
    def _generate(self, labels: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        z = torch.randn(len(labels), self.arch.latent_dim, generator=gen).to(self.device)
        return self.G(z, labels.to(self.device))

    def _fakes(
        self, count: int, gen: torch.Generator, *, balanced: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Synthetic records; labels uniform (or exactly balanced), data-independent."""
        if balanced:
            labels = torch.arange(count) % self.arch.num_classes
        else:
            labels = torch.randint(self.arch.num_classes, (count,), generator=gen)
        labels = labels.to(self.device)
        return self._generate(labels, gen), labels

    def _fakes_like_a_release(
        self, expected_local: float, gen: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A synthetic batch drawn like a real DPAGG batch: a Poisson number of
        records with uniform labels (per-class Poisson counts), so that real and
        synthetic aggregates have the same count noise and the same divisor."""
        k = self.arch.num_classes
        counts = torch.poisson(torch.full((k,), expected_local / k), generator=gen).long()
        labels = torch.repeat_interleave(torch.arange(k), counts).to(self.device)
        # G's BatchNorm needs two records: pad with label 0, keep what was drawn.
        padded = torch.cat([labels, labels.new_zeros(max(0, 2 - len(labels)))])
        return self._generate(padded, gen)[: len(labels)], labels

    # ---------------------------------------------------------------- phase 1
    def classifier_phase(self) -> None:
        cfg, mech = self.config, self.ctx.plan.mechanism(CLASSIFIER)
        classifier = seeded(lambda: Classifier(self.arch), self.init).to(self.device)
        gsm = GradSampleModule(classifier, loss_reduction="sum")
        params = [p for p in classifier.parameters() if p.requires_grad]
        opt = torch.optim.Adam(params, lr=cfg.lr_classifier)

        def pre_noise(batch: RecordBatch) -> torch.Tensor:
            return classifier_pre_noise(gsm, batch, clip=cfg.clip_classifier,
                                        topk_fraction=cfg.topk_fraction)

        for _ in range(mech.num_steps):
            dp_sgd_step(self.ctx, CLASSIFIER, pre_noise, params, opt)
            self.reporter.released(CLASSIFIER)
            self.reporter.after_release(CLASSIFIER, checkpoint=False, phase=1)
        # Transfer: conv1 of D is C's conv1, frozen for phase 2.
        self.parts.conv1.load_state_dict(classifier.conv1.state_dict())
        for p in self.parts.conv1.parameters():
            p.requires_grad_(False)

    # ---------------------------------------------------------------- phase 2
    def gan_phase(self) -> None:
        cfg, plan, ctx, reporter = self.config, self.ctx.plan, self.ctx, self.reporter
        agg, conv2 = plan.mechanism(DPAGG), plan.mechanism(CONV2)
        if agg.sample_rate is None:  # priced as one-shot, sampled here: unaccounted
            raise PrivacyInvariantError(f"the plan's {agg.name!r} mechanism has no Poisson sample rate")
        if conv2.sample_rate is None:  # priced as one-shot, sampled here: unaccounted
            raise PrivacyInvariantError(f"the plan's {conv2.name!r} mechanism has no Poisson sample rate")
        by_class = cfg.aggregation == "class"
        groups = self.arch.num_classes if by_class else 1
        # Divisors turning released sums into means: expected counts (public).
        real_divisor = agg.sample_rate * self.n / groups
        conv2_divisor = conv2.sample_rate * self.n / groups
        # G's own synthetic batch: balanced labels, about the expected batch size.
        fakes_local = groups * max(1, math.ceil(agg.sample_rate * self.n / ctx.world_size / groups))
        agg_labels = torch.arange(groups, device=self.device) if by_class else None
        parts, G = self.parts, self.G
        conv2_gsm = GradSampleModule(parts.conv2, loss_reduction="sum")
        conv2_params = list(parts.conv2.parameters())
        head_params = list(parts.conv3.parameters()) + list(parts.fc.parameters())
        betas = (0.5, 0.999)
        opt_head = torch.optim.Adam(head_params, lr=cfg.lr_d, betas=betas)
        opt_conv2 = torch.optim.Adam(conv2_params, lr=cfg.lr_conv2 or cfg.lr_d, betas=betas)
        opt_g = torch.optim.Adam(G.parameters(), lr=cfg.lr_g, betas=betas)
        agg_sampler = ctx.sampler(DPAGG)
        fake_gen = ctx.generator("fakes")
        ones = torch.ones(groups, device=self.device)
        zeros = torch.zeros(groups, device=self.device)

        def agg_pre_noise(batch: RecordBatch) -> torch.Tensor:
            return dpagg_pre_noise(parts, batch, by_class=by_class)

        def blocks(released: torch.Tensor) -> torch.Tensor:
            return released if by_class else released[None]

        conv2_gsm.disable_hooks()
        for it in range(1, agg.num_steps + 1):
            # 1. DPAGG on a real Poisson sample; same noise law on a synthetic batch.
            real_sum = ctx.pre_noise_sum(DPAGG, agg_pre_noise, agg_sampler.sample())
            real_mean = blocks(noisy_sum(real_sum, noise_std=agg.noise_std,
                                         generator=ctx.noise_generator)) / real_divisor
            with torch.no_grad():
                fake_images, fake_labels = self._fakes_like_a_release(
                    agg.sample_rate * self.n / ctx.world_size, fake_gen)
            fake_mean = blocks(dpagg(parts, fake_images, fake_labels, noise_std=agg.noise_std,
                                     generator=ctx.noise_generator, by_class=by_class)) / real_divisor
            reporter.released(DPAGG)
            # 2. conv3*, FC*: post-processing of the two releases.
            real_logit = parts.head(real_mean, agg_labels)
            fake_logit = parts.head(fake_mean, agg_labels)
            d_loss = (F.binary_cross_entropy_with_logits(real_logit, ones)
                      + F.binary_cross_entropy_with_logits(fake_logit, zeros))
            opt_head.zero_grad(set_to_none=True)
            d_loss.backward()
            all_reduce_mean_(p.grad for p in head_params if p.grad is not None)
            opt_head.step()
            reporter.track("d_loss_noisy", d_loss)
            reporter.track("d_real_prob_noisy", torch.sigmoid(real_logit).mean())
            reporter.track("d_fake_prob_noisy", torch.sigmoid(fake_logit).mean())

            # 3. conv2*: DP-SGD at the plan's cadence (every mu iterations), on its own
            # Poisson sample.
            if it % conv2.every == 0 and reporter.steps.get(CONV2, 0) < conv2.num_steps:
                v_real = self._loss_direction(real_mean, agg_labels, ones)
                v_fake = self._loss_direction(fake_mean, agg_labels, zeros)
                if not by_class:
                    v_real, v_fake = v_real[0], v_fake[0]

                def conv2_noise_free(batch: RecordBatch, v: torch.Tensor = v_real) -> torch.Tensor:
                    return conv2_pre_noise(conv2_gsm, parts, v, batch, clip=cfg.clip_conv2,
                                           topk_fraction=cfg.topk_fraction)

                # Synthetic side (no privacy cost): the same chain rule, exactly.
                with torch.no_grad():
                    h_fake = parts.conv1(fake_images)
                v_fake_records = v_fake[fake_labels] if by_class else v_fake
                fake_term = (sin(parts.conv2(h_fake, fake_labels)) * v_fake_records).sum() / real_divisor
                synthetic = list(torch.autograd.grad(fake_term, conv2_params))
                all_reduce_sum_(synthetic)
                synthetic_flat = torch.cat([g.flatten() for g in synthetic])
                dp_sgd_step(ctx, CONV2, conv2_noise_free, conv2_params, opt_conv2,
                            expected_batch_size=conv2_divisor,
                            post=_plus(synthetic_flat))
                reporter.released(CONV2)

            # 4. G every n_critic iterations, on synthetic records only.
            for _ in range(cfg.g_steps if it % cfg.n_critic == 0 else 0):
                g_loss = self._generator_loss(fakes_local, fake_gen, by_class,
                                              agg.noise_std / real_divisor, agg_labels)
                data_parallel_step(g_loss, G, opt_g)
                reporter.track("g_loss", g_loss)

            # Metrics every epoch (tracked as tensors: no GPU synchronisation per
            # iteration); a checkpoint about ten times a run, and at the end.
            reporter.after_release(DPAGG, phase=2)

    def _generator_loss(
        self,
        count: int,
        gen: torch.Generator,
        by_class: bool,
        mean_noise_std: float,
        agg_labels: torch.Tensor | None,
    ) -> torch.Tensor:
        images, labels = self._fakes(count, gen, balanced=by_class)
        if self.config.generator_loss == "d_hat":
            logits = self.parts.d_hat(images, labels, class_head=by_class)
        else:
            # Through the head on this worker's synthetic mean aggregate(s), with the
            # noise law of a released mean (DPAGG's noise std / expected count).
            sums = feature_sum(self.parts, images, labels, by_class=by_class)
            means = sums / (count / self.arch.num_classes) if by_class else sums[None] / count
            noise = gaussian_noise(means.shape, std=mean_noise_std, generator=gen).to(means)
            logits = self.parts.head(means + noise, agg_labels)
        loss = F.binary_cross_entropy_with_logits(logits, torch.ones_like(logits))
        if self.config.g_smoothness:  # the smoothness prior: a function of G's images only
            loss = loss + self.config.g_smoothness * total_variation(images)
        return loss

    def _loss_direction(
        self, released_mean: torch.Tensor, labels: torch.Tensor | None, target: torch.Tensor
    ) -> torch.Tensor:
        """dL/dS at released aggregates: a function of released values only."""
        point = released_mean.detach().clone().requires_grad_(True)
        loss = F.binary_cross_entropy_with_logits(self.parts.head(point, labels), target)
        (direction,) = torch.autograd.grad(loss, point)
        return direction.detach()


def total_variation(images: torch.Tensor) -> torch.Tensor:
    """Mean absolute difference of vertically and horizontally neighbouring pixels."""
    return ((images[..., 1:, :] - images[..., :-1, :]).abs().mean()
            + (images[..., :, 1:] - images[..., :, :-1]).abs().mean())


def run_dpaf(ctx: WorkerContext) -> None:
    """Train DPAF on this worker (rank 0 checkpoints the state as it goes)."""
    # Opacus' hooks fire on conv2* even where its input needs no gradient: expected.
    warnings.filterwarnings("ignore", message="Full backward hook is firing")
    run = _DPAFRun(ctx)
    run.classifier_phase()
    run.gan_phase()
