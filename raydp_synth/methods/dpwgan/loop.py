"""DP-WGAN-GP with DP-Adam on one Ray Train worker (Schwabedal, Michel and Riontino 2020).

Each critic step is one release of the mechanism ``critic``
(:func:`~raydp_synth.runtime.dp_step.dp_sgd_step`): a Poisson sample of rate q (from
the run's secret seed), and :func:`critic_pre_noise`, the one function that reads the
records: per-record gradients of the pair (record, synthetic partner)
``D(f_i) - D(x_i) + lambda GP_i`` (see :mod:`raydp_synth.methods.components.pairs`),
clipped to C and summed; then noised once with N(0, sigma^2 C^2) and divided by the
expected batch qN. Adam steps on that release (post-processing: Adam's moments are
functions of released gradients). G steps every ``n_critic`` critic steps through the
critic on synthetic records only. No stray 1/sqrt(B): the noise is added to the sum,
and the sum is divided by qN, as in every DP-SGD release here.
"""

from __future__ import annotations

import math

import torch

from raydp_synth.errors import PrivacyInvariantError
from raydp_synth.methods.components.gan_networks import Critic, Generator, refresh_batchnorm
from raydp_synth.methods.components.pairs import pair_record_grads
from raydp_synth.methods.components.wgan_gp import (
    adam_optimisers,
    generator_step,
    wgan_gp_networks,
)
from raydp_synth.methods.dpwgan.config import DPWGANConfig
from raydp_synth.privacy.dp_sgd import clipped_sum
from raydp_synth.privacy.records import RecordBatch
from raydp_synth.runtime.context import WorkerContext
from raydp_synth.runtime.dp_step import dp_sgd_step
from raydp_synth.runtime.reporting import EpochReporter

__all__ = ["CRITIC", "METRIC_ALLOWLIST", "critic_pre_noise", "run_dpwgan"]

CRITIC = "critic"

#: Safe because: counters and epsilon_spent are public arithmetic; g_loss and
#: d_fake are the critic's scores of synthetic records (the critic is a DP release).
#: No loss on real records (not noised), no wall time (it grows with the secret
#: realised batch sizes).
METRIC_ALLOWLIST = frozenset({"epoch", "step", "epsilon_spent", "g_loss", "d_fake"})


def critic_pre_noise(critic: Critic, gen: Generator, config: DPWGANConfig,
                     batch: RecordBatch, *, compile_backend: str | None = None) -> torch.Tensor:
    """The critic mechanism's pre-noise sum: ``sum_i clip_C(grad of pair i)``.

    Record i's pair uses its own secret draws and G in eval mode
    (:func:`~raydp_synth.methods.components.pairs.pair_record_grads`), so record i's
    clipped term depends on record i alone: sensitivity C.
    """
    grads = pair_record_grads(critic, gen, batch, batch.labels, latent_dim=config.latent_dim,
                              gp_weight=config.gp_weight, compile_backend=compile_backend)
    return clipped_sum(grads, max_grad_norm=config.clip,
                       shapes=[p.shape for p in critic.parameters()], weights=batch.weights)


def run_dpwgan(ctx: WorkerContext) -> None:
    cfg: DPWGANConfig = ctx.config
    mech = ctx.plan.mechanism(CRITIC)
    if mech.sample_rate is None:  # priced as one-shot, sampled here: unaccounted
        raise PrivacyInvariantError(f"the plan's {mech.name!r} mechanism has no Poisson sample rate")
    if abs(mech.sensitivity - cfg.clip) > 1e-12:
        raise PrivacyInvariantError(
            f"the plan's critic sensitivity {mech.sensitivity} is not clip={cfg.clip}")
    critic, gen = wgan_gp_networks(cfg, ctx.data.channels, ctx.data.num_classes,
                                   init=ctx.shared_generator("init"))
    critic, gen = critic.to(ctx.device), gen.to(ctx.device)
    opt_d, opt_g = adam_optimisers(cfg, critic, gen)
    fake_gen = ctx.generator("fakes")
    fakes_local = max(2, math.ceil(mech.sample_rate * ctx.data.num_records / ctx.world_size))
    reporter = EpochReporter(ctx, tag="dpwgan", networks={"generator": gen, "critic": critic})

    def pre_noise(batch: RecordBatch) -> torch.Tensor:
        return critic_pre_noise(critic, gen, cfg, batch, compile_backend=ctx.compile_backend)

    for step in range(1, mech.num_steps + 1):
        # G's BatchNorm statistics for the partners: a synthetic batch (public draws).
        refresh_batchnorm(gen, latent_dim=cfg.latent_dim, num_classes=gen.num_classes,
                          rng=fake_gen, device=ctx.device, batch_size=fakes_local)
        dp_sgd_step(ctx, CRITIC, pre_noise, list(critic.parameters()), opt_d)
        reporter.released(CRITIC)
        if step % cfg.n_critic == 0:  # G: synthetic records only
            g_loss = generator_step(critic, gen, opt_g, count=fakes_local, rng=fake_gen,
                                    device=ctx.device)
            reporter.track("d_fake", -g_loss)
            reporter.track("g_loss", g_loss)
        reporter.after_release(CRITIC)
