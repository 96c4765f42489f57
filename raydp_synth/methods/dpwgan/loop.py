"""DP-WGAN-GP with DP-Adam on one Ray Train worker (Schwabedal, Michel and Riontino 2020).

Each critic step is one release of the mechanism ``critic``: a Poisson sample of
rate q (from the run's secret seed), and :func:`critic_pre_noise`, the one function
that reads the records: per-record gradients of the pair (record, synthetic
partner) ``D(f_i) - D(x_i) + lambda GP_i`` (see :mod:`.mechanisms`), clipped to C and
summed; then noised once with N(0, sigma^2 C^2) and divided by the expected batch qN. Adam steps on that release (post-processing: Adam's moments are
functions of released gradients). G steps every ``n_critic`` critic steps through the
critic on synthetic records only. No stray 1/sqrt(B): the noise is added to the sum,
and the sum is divided by qN, as in every DP-SGD release here.
"""

from __future__ import annotations

import math

import torch

from raydp_synth.errors import PrivacyInvariantError
from raydp_synth.methods.dpwgan.config import DPWGANConfig
from raydp_synth.methods.dpwgan.mechanisms import pair_record_grads
from raydp_synth.methods.dpwgan.networks import Critic, Generator, refresh_batchnorm
from raydp_synth.privacy.dp_sgd import clipped_sum, noised_gradient
from raydp_synth.privacy.records import RecordBatch
from raydp_synth.runtime.context import WorkerContext
from raydp_synth.runtime.distributed import data_parallel_step

__all__ = ["CRITIC", "METRIC_ALLOWLIST", "build_networks", "critic_pre_noise", "run_dpwgan"]

CRITIC = "critic"

#: Safe because: counters and epsilon_spent are public arithmetic; g_loss and
#: d_fake are the critic's scores of synthetic records (the critic is a DP release).
#: No loss on real records (not noised), no wall time (it grows with the secret
#: realised batch sizes).
METRIC_ALLOWLIST = frozenset({"epoch", "step", "epsilon_spent", "g_loss", "d_fake"})


def build_networks(config: DPWGANConfig, channels: int, num_classes: int) -> tuple[Critic, Generator]:
    critic = Critic(image_size=config.image_size, channels=channels, num_classes=num_classes,
                    capacity=config.capacity)
    generator = Generator(image_size=config.image_size, channels=channels,
                          num_classes=num_classes, capacity=config.capacity,
                          latent_dim=config.latent_dim)
    return critic, generator


def critic_pre_noise(critic: Critic, gen: Generator, config: DPWGANConfig,
                     batch: RecordBatch) -> torch.Tensor:
    """The critic mechanism's pre-noise sum: ``sum_i clip_C(grad of pair i)``.

    Record i's pair uses its own secret draws and G in eval mode
    (:func:`~raydp_synth.methods.dpwgan.mechanisms.pair_record_grads`), so record i's
    clipped term depends on record i alone: sensitivity C.
    """
    grads = pair_record_grads(critic, gen, batch, batch.labels, latent_dim=config.latent_dim,
                              gp_weight=config.gp_weight)
    return clipped_sum(grads, max_grad_norm=config.clip,
                       shapes=[p.shape for p in critic.parameters()])


def run_dpwgan(ctx: WorkerContext) -> None:
    cfg: DPWGANConfig = ctx.config
    data, device, plan = ctx.data, ctx.device, ctx.plan
    mech = plan.mechanism(CRITIC)
    if mech.sample_rate is None:  # priced as one-shot, sampled here: unaccounted
        raise PrivacyInvariantError(
            f"the plan's {mech.name!r} mechanism has no Poisson sample rate")
    if abs(mech.sensitivity - cfg.clip) > 1e-12:
        raise PrivacyInvariantError(
            f"the plan's critic sensitivity {mech.sensitivity} is not clip={cfg.clip}")
    torch.manual_seed(cfg.seed)  # identical initial parameters on every rank
    critic, gen = build_networks(cfg, data.channels, data.num_classes)
    critic, gen = critic.to(device), gen.to(device)
    params = list(critic.parameters())
    shapes = [p.shape for p in params]
    betas = (cfg.beta1, cfg.beta2)
    opt_d = torch.optim.Adam(params, lr=cfg.lr_d, betas=betas)
    opt_g = torch.optim.Adam(gen.parameters(), lr=cfg.lr_g, betas=betas)
    sampler = ctx.sampler(CRITIC)
    fake_gen = ctx.generator("fakes")
    expected = mech.sample_rate * data.num_records
    fakes_local = max(2, math.ceil(expected / ctx.world_size))
    k = data.num_classes

    def synthetic(count: int) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.randint(k, (count,), generator=fake_gen).to(device)
        z = torch.randn(count, cfg.latent_dim, generator=fake_gen).to(device)
        return gen(z, y), y

    def pre_noise(batch: RecordBatch) -> torch.Tensor:
        return critic_pre_noise(critic, gen, cfg, batch)

    steps_per_epoch = max(1, math.ceil(1 / mech.sample_rate))
    checkpoint_every = max(1, math.ceil(mech.num_steps / steps_per_epoch / 10))
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for step in range(1, mech.num_steps + 1):
        # G's BatchNorm statistics for the partners: a synthetic batch (public draws).
        refresh_batchnorm(gen, latent_dim=cfg.latent_dim, num_classes=k, rng=fake_gen,
                          device=device, batch_size=fakes_local)
        summed = ctx.pre_noise_sum(CRITIC, pre_noise, sampler.sample())
        released = noised_gradient(summed, noise_std=mech.noise_multiplier * mech.sensitivity,
                                   expected_batch_size=expected, generator=ctx.noise_generator,
                                   shapes=shapes)
        for p, g in zip(params, released, strict=True):
            p.grad = g.to(p)
        opt_d.step()
        opt_d.zero_grad(set_to_none=True)

        if step % cfg.n_critic == 0:  # G: synthetic records only
            fakes, y_fake = synthetic(fakes_local)
            g_loss = -critic(fakes, y_fake).mean()
            sums["d_fake"] = sums.get("d_fake", 0.0) - g_loss.item()
            counts["d_fake"] = counts.get("d_fake", 0) + 1
            data_parallel_step(g_loss, gen, opt_g)
            critic.zero_grad(set_to_none=True)
            sums["g_loss"] = sums.get("g_loss", 0.0) + g_loss.item()
            counts["g_loss"] = counts.get("g_loss", 0) + 1

        if step % steps_per_epoch == 0 or step == mech.num_steps:
            epoch = math.ceil(step / steps_per_epoch)
            metrics = {key: sums[key] / counts[key] for key in sums}
            metrics.update(epoch=epoch, step=step,
                           epsilon_spent=plan.spent_epsilon({CRITIC: step}) if plan.private else 0.0)
            if not plan.private:
                metrics.pop("epsilon_spent")
            sums.clear()
            counts.clear()
            state = None
            if ctx.rank == 0 and (epoch % checkpoint_every == 0 or step == mech.num_steps):
                state = {"generator": gen.state_dict(), "critic": critic.state_dict(),
                         "steps": {CRITIC: step}}
            ctx.report(metrics, state)
            ctx.log(f"[dpwgan] epoch {epoch}: " + ", ".join(
                f"{key}={v:.4g}" for key, v in sorted(metrics.items()) if key != "epoch"))
