"""dpGAN on one Ray Train worker (Zhang, Ji and Wang 2018, dpGAN, Algorithm 3); also
PrivImage+G's fine-tuning.

1. Warm start (optional, public data only): ``warm_start_iters`` non-private
   WGAN-GP iterations on batches of the declared public records.
2. Each critic step is one release of the mechanism ``critic``: the clip groups of
   this step (fixed, or estimated on a public batch); a Poisson sample of rate q
   (secret seed); :func:`critic_pre_noise`, the one function that reads the records:
   per-record gradients of the pair (record, synthetic partner),
   ``D(f_i) - D(x_i) + lambda GP_i`` (:mod:`raydp_synth.methods.components.pairs`: the
   unit is the pair, the partner's draws are the record's own, G in eval mode), each
   group clipped and rescaled by 1/C_j, summed; then noised once with the plan's
   N(0, (z sqrt(k))^2) (:func:`~raydp_synth.runtime.dp_step.dp_sgd_step`), rescaled
   by C_j on group j (:meth:`~raydp_synth.methods.components.clip_groups.ClipGroups.rescale`:
   noise z*sqrt(k)*C_j on group j) and divided by qN; an Adam step.
3. G steps every ``n_critic`` critic steps through the critic, synthetic only.

Privacy: the private records enter through step 2 only. Warm start and the clip
bounds read the public records, the current critic and G (functions of earlier
releases) and public randomness; every rank draws the same public batches, so the
bounds agree across workers. A test runs warm start and the bounds with a sentinel
private split and checks they never see it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import torch

from raydp_synth.data import DataInfo, ImageDataset
from raydp_synth.errors import PrivacyInvariantError
from raydp_synth.methods.components.clip_groups import (
    ClipGroups,
    adaptive_groups,
    fixed_groups,
    grouped_clipped_sum,
    parameter_units,
)
from raydp_synth.methods.components.gan_networks import Critic, Generator, refresh_batchnorm
from raydp_synth.methods.components.pairs import (
    critic_record_grads,
    pair_record_grads,
    synthetic_partners,
)
from raydp_synth.methods.components.wgan_gp import (
    adam_optimisers,
    generator_step,
    wgan_gp_networks,
)
from raydp_synth.methods.dpgan.config import DPGANConfig
from raydp_synth.privacy.calibration import MechanismSpec
from raydp_synth.privacy.records import RecordBatch, derived_seed
from raydp_synth.runtime.context import WorkerContext
from raydp_synth.runtime.distributed import broadcast_parameters_
from raydp_synth.runtime.dp_step import dp_sgd_step, step_with_gradient
from raydp_synth.runtime.reporting import EpochReporter

__all__ = ["CRITIC", "METRIC_ALLOWLIST", "DPGANModels", "PublicSide", "build_networks",
           "critic_pre_noise", "critic_schedule", "model_labels", "prepare", "run_dpgan"]

CRITIC = "critic"

#: Safe because: counters and epsilon_spent are public arithmetic; g_loss and
#: d_fake are the critic's scores of synthetic records (the critic is a DP
#: release); clip_bound is the mean of this epoch's group bounds, computed from
#: public data and the critic. No loss on real records, no wall time.
METRIC_ALLOWLIST = frozenset({"epoch", "step", "epsilon_spent", "g_loss", "d_fake", "clip_bound"})


def critic_schedule(config: DPGANConfig, data: DataInfo, *, share: float = 1.0) -> MechanismSpec:
    """The critic's mechanism: Poisson rate q = B/n, ``ceil(epochs / q)`` releases,
    sensitivity sqrt(k) (k groups, each rescaled by 1/C_j; docs/architecture.md,
    invariant 5)."""
    return MechanismSpec.for_epochs(CRITIC, batch_size=config.batch_size, epochs=config.epochs,
                                    num_records=data.num_records,
                                    sensitivity=math.sqrt(config.groups), share=share)


def build_networks(config: DPGANConfig, channels: int, num_classes: int, *,
                   init: torch.Generator | None = None) -> tuple[Critic, Generator]:
    """The WGAN-GP critic and generator (the small-images architecture, shared with
    dpwgan); the unconditional variant sees one constant label."""
    return wgan_gp_networks(config, channels, num_classes if config.conditional else 1,
                            init=init)


def model_labels(config: DPGANConfig, labels: torch.Tensor) -> torch.Tensor:
    """The labels the networks see: the real ones, or 0 for the unconditional variant."""
    return labels if config.conditional else torch.zeros_like(labels)


class PublicSide:
    """Everything dpGAN does with the declared public records: warm start and the
    adaptive clip groups. It holds the public records and a rank-independent public
    generator, and no reference to the private data.
    """

    def __init__(self, config: DPGANConfig, public: ImageDataset | None, *,
                 critic: Critic, generator: Generator, device: torch.device) -> None:
        self.config, self.critic, self.gen, self.device = config, critic, generator, device
        self.rng = torch.Generator().manual_seed(derived_seed(config.seed, "dpgan-public"))
        # Public records live on the loop's device: a batch is gathered there.
        self.images = torch.as_tensor(public.images).to(device) if public is not None else None
        self.labels = torch.as_tensor(public.labels).to(device) if public is not None else None
        names = [(n, p.shape) for n, p in critic.named_parameters()]
        self.unit_of, self.weight_units = parameter_units(names)
        # Fixed bounds do not change between steps: build their groups once.
        self.fixed = None if config.adaptive_clip else fixed_groups(
            names, groups=config.groups, clip=config.clip, bias_clip=config.bias_clip)
        if self.fixed is not None:  # on the device once, not copied at every step
            self.fixed = replace(self.fixed, group_of=self.fixed.group_of.to(device))

    def _batch(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """A public batch with synthetic partners (of the same labels) and mixes."""
        if self.images is None or self.labels is None:  # no noise is added: public data only
            raise PrivacyInvariantError("a public batch was asked for, but no public data was declared")
        size = min(self.config.public_batch_size, len(self.images))
        idx = torch.randperm(len(self.images), generator=self.rng)[:size]
        idx = idx.to(self.device)
        x, y = self.images[idx], model_labels(self.config, self.labels[idx])
        # Partners as the private step makes them (G in eval mode), public draws.
        refresh_batchnorm(self.gen, latent_dim=self.config.latent_dim,
                          num_classes=self.gen.num_classes, rng=self.rng, device=self.device,
                          batch_size=size)
        z = torch.randn(size, self.config.latent_dim, generator=self.rng)
        partners = synthetic_partners(self.gen, z.to(self.device), y.to(self.device))
        mix = torch.rand(size, 1, 1, 1, generator=self.rng).to(self.device)
        return x, y.to(self.device), partners, mix

    def _record_grads(self) -> torch.Tensor:
        x, y, partners, mix = self._batch()
        grads = critic_record_grads(self.critic, x, y, partners, mix,
                                    gp_weight=self.config.gp_weight)
        return torch.cat([g.flatten(1) for g in grads], dim=1)

    def clip_groups(self) -> ClipGroups:
        """This step's groups: fixed bounds, or estimated on a public batch."""
        if self.fixed is not None:
            return self.fixed
        return adaptive_groups(self._record_grads(), self.unit_of, self.weight_units,
                               groups=self.config.groups)

    def warm_start(self, opt_d: torch.optim.Optimizer, opt_g: torch.optim.Optimizer) -> None:
        """``warm_start_iters`` non-private WGAN-GP iterations on public batches
        (the same on every rank: the public generator is rank-independent)."""
        cfg = self.config
        params = list(self.critic.parameters())
        for it in range(1, cfg.warm_start_iters + 1):
            step_with_gradient(params, self._record_grads().mean(dim=0), opt_d)
            if it % cfg.n_critic == 0:
                generator_step(self.critic, self.gen, opt_g, count=cfg.public_batch_size,
                               rng=self.rng, device=self.device)


@dataclass
class DPGANModels:
    """The networks, their optimisers and the public side, ready for the DP steps."""

    critic: Critic
    gen: Generator
    opt_d: torch.optim.Optimizer
    opt_g: torch.optim.Optimizer
    public: PublicSide


def prepare(ctx: WorkerContext) -> DPGANModels:
    """Build the networks (the same initial parameters on every rank) and run the
    warm start. Reads no private record (a test runs it with a training split that
    fails on any read)."""
    cfg: DPGANConfig = ctx.config
    critic, gen = build_networks(cfg, ctx.data.channels, ctx.data.num_classes,
                                 init=ctx.shared_generator("init"))
    critic, gen = critic.to(ctx.device), gen.to(ctx.device)
    opt_d, opt_g = adam_optimisers(cfg, critic, gen)
    public = PublicSide(cfg, ctx.public, critic=critic, generator=gen, device=ctx.device)
    if cfg.warm_start_iters:
        public.warm_start(opt_d, opt_g)
        broadcast_parameters_(critic)  # every rank ran the same public iterations
        broadcast_parameters_(gen)
        ctx.log(f"[dpgan] warm start: {cfg.warm_start_iters} iterations on "
                f"{len(ctx.public) if ctx.public is not None else 0} public records")
    return DPGANModels(critic=critic, gen=gen, opt_d=opt_d, opt_g=opt_g, public=public)


def critic_pre_noise(models: DPGANModels, config: DPGANConfig, groups: ClipGroups,
                     batch: RecordBatch, *, compile_backend: str | None = None) -> torch.Tensor:
    """The critic mechanism's pre-noise sum: ``sum_i concat_j clip_{C_j}(g_ij) / C_j``.

    ``g_i`` is the gradient of record i's pair (its own secret draws, G in eval
    mode), so record i's rescaled term depends on record i alone and has norm at
    most sqrt(k): the plan's sensitivity. ``groups`` come from public data and the
    critic (post-processing), fixed before the batch is read.
    """
    grads = pair_record_grads(models.critic, models.gen, batch, model_labels(config, batch.labels),
                              latent_dim=config.latent_dim, gp_weight=config.gp_weight,
                              compile_backend=compile_backend)
    return grouped_clipped_sum(torch.cat([g.flatten(1) for g in grads], dim=1), groups,
                               weights=batch.weights)


def run_dpgan(ctx: WorkerContext, *, spent_before: Mapping[str, int] | None = None,
              tag: str = "dpgan") -> None:
    """The dpGAN loop; ``spent_before``: steps of other plan mechanisms already
    released (a method that runs this loop after its own releases, e.g.
    PrivImage's semantic query), so that ``epsilon_spent`` counts them."""
    cfg: DPGANConfig = ctx.config
    mech = ctx.plan.mechanism(CRITIC)
    if mech.sample_rate is None:  # priced as one-shot, sampled here: unaccounted
        raise PrivacyInvariantError(f"the plan's {mech.name!r} mechanism has no Poisson sample rate")
    models = prepare(ctx)
    critic, gen, public = models.critic, models.gen, models.public
    fake_gen = ctx.generator("fakes")
    fakes_local = max(2, math.ceil(mech.sample_rate * ctx.data.num_records / ctx.world_size))
    reporter = EpochReporter(ctx, tag=tag, networks={"generator": gen, "critic": critic},
                             steps=spent_before)

    for step in range(1, mech.num_steps + 1):
        groups = public.clip_groups()
        if abs(math.sqrt(groups.k) - mech.sensitivity) > 1e-9:
            raise PrivacyInvariantError(f"{groups.k} clip groups but the plan's sensitivity "
                                        f"is {mech.sensitivity} (sqrt(k) expected)")
        reporter.track("clip_bound", float(groups.bounds.mean()))
        # G's BatchNorm statistics for the partners: a synthetic batch (public draws).
        refresh_batchnorm(gen, latent_dim=cfg.latent_dim, num_classes=gen.num_classes,
                          rng=fake_gen, device=ctx.device, batch_size=fakes_local)

        def pre_noise(batch: RecordBatch, groups: ClipGroups = groups) -> torch.Tensor:
            return critic_pre_noise(models, cfg, groups, batch,
                                    compile_backend=ctx.compile_backend)

        dp_sgd_step(ctx, CRITIC, pre_noise, list(critic.parameters()), models.opt_d,
                    post=groups.rescale)
        reporter.released(CRITIC)
        if step % cfg.n_critic == 0:  # G: synthetic records only
            g_loss = generator_step(critic, gen, models.opt_g, count=fakes_local, rng=fake_gen,
                                    device=ctx.device)
            reporter.track("d_fake", -g_loss)
            reporter.track("g_loss", g_loss)
        reporter.after_release(CRITIC)
