"""The WGAN-GP training pieces that dpwgan and the dpGAN loop share: the networks of a
config, initialised from an explicit generator, their Adam optimisers, and G's step.

G only ever sees synthetic records and the critic (a DP release), so its step is
post-processing and is averaged over workers like any public gradient.
"""

from __future__ import annotations

import torch

from raydp_synth.methods.components.gan_networks import Critic, Generator
from raydp_synth.methods.components.wgan_config import WGANGPConfig
from raydp_synth.runtime.distributed import data_parallel_step
from raydp_synth.runtime.seeding import seeded

__all__ = ["adam_optimisers", "generator_step", "wgan_gp_networks"]


def wgan_gp_networks(config: WGANGPConfig, channels: int, labels: int, *,
                     init: torch.Generator | None = None) -> tuple[Critic, Generator]:
    """The critic and the generator of ``config`` for ``labels`` classes (1 for an
    unconditional model). With ``init``, their parameters are drawn from it alone
    (the same on every rank that passes the same generator state); without, they
    are left as built (a checkpoint's state is loaded next)."""
    def critic() -> Critic:
        return Critic(image_size=config.image_size, channels=channels, num_classes=labels,
                      capacity=config.capacity)

    def generator() -> Generator:
        return Generator(image_size=config.image_size, channels=channels, num_classes=labels,
                         capacity=config.capacity, latent_dim=config.latent_dim)

    if init is None:
        return critic(), generator()
    return seeded(critic, init), seeded(generator, init)


def adam_optimisers(config: WGANGPConfig, critic: Critic, generator: Generator
                    ) -> tuple[torch.optim.Optimizer, torch.optim.Optimizer]:
    """Adam for the critic (``lr_d``) and for G (``lr_g``), both with the config's betas."""
    betas = (config.beta1, config.beta2)
    return (torch.optim.Adam(critic.parameters(), lr=config.lr_d, betas=betas),
            torch.optim.Adam(generator.parameters(), lr=config.lr_g, betas=betas))


def generator_step(critic: Critic, generator: Generator, optimizer: torch.optim.Optimizer, *,
                   count: int, rng: torch.Generator, device: torch.device) -> torch.Tensor:
    """One step of G on its WGAN loss ``-mean D(G(z, y))`` over ``count`` synthetic
    records (uniform labels, then latents, from ``rng``); returns the loss, a detached
    scalar tensor on ``device`` (read it once per epoch: ``.item()`` at every step
    would wait for the GPU) (the critic's mean score of the synthetic records is its
    negative)."""
    labels = torch.randint(generator.num_classes, (count,), generator=rng).to(device)
    latents = torch.randn(count, generator.latent_dim, generator=rng).to(device)
    loss = -critic(generator(latents, labels), labels).mean()
    data_parallel_step(loss, generator, optimizer)
    critic.zero_grad(set_to_none=True)
    return loss.detach()
