"""The WGAN-GP critic's per-record gradient: the pair (record, synthetic partner),
shared by dpwgan, dpgan and PrivImage+G.

WGAN-GP's critic loss is ``mean D(fake) - mean D(real) + lambda * mean GP``, with
``GP_i = (|grad_x D(xhat_i)| - 1)^2`` at ``xhat_i = a_i x_i + (1 - a_i) f_i``. The
gradient penalty interpolates a real record with a synthetic one, so the unit that
DP-SGD clips is the **pair**: record i's term is
``D(f_i, y_i) - D(x_i, y_i) + lambda * GP_i``, where the synthetic partner ``f_i``
(generated for the record's label) and the coefficient ``a_i`` are drawn for
record i alone (:func:`pair_record_grads`). Record i's term then depends on record
i, on the current networks (DP releases and their post-processing) and on its own
secret draws, so clipping it to C bounds one record's contribution by C.

The partner comes from G in **eval mode** (:func:`synthetic_partners`): in train
mode G's BatchNorm would normalise every partner with statistics of the whole batch
of partners, generated for the batch's real labels, so one record's removal would
move every other record's term, and G's running statistics (released with G) would
record the real label histogram. The synthetic term is
clipped with its pair, not added un-noised: real and synthetic sides then have the
same scale (an unclipped synthetic side next to a clipped real side lets the
critic's scores run away, seen on digits: scores of -1.5e4 within 30 epochs).

Per-record gradients with a gradient penalty need a double backward, which Opacus'
hooks do not support; they are computed with ``torch.func``
(:func:`~raydp_synth.privacy.dp_sgd.functional_record_grads`).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call, grad

from raydp_synth.privacy.dp_sgd import functional_record_grads
from raydp_synth.privacy.records import RecordBatch

__all__ = ["critic_record_grads", "pair_record_grads", "synthetic_partners"]


def critic_record_grads(
    critic: nn.Module,
    real: torch.Tensor,
    labels: torch.Tensor,
    partners: torch.Tensor,
    mix: torch.Tensor,
    *,
    gp_weight: float,
    compile_backend: str | None = None,
) -> list[torch.Tensor]:
    """Per-record gradients ``[B, *p.shape]`` of ``D(f_i) - D(x_i) + lambda * GP_i``.

    Args:
        critic: the critic (parameters read, not modified).
        real, labels: the sampled records.
        partners: one synthetic image per record (of the record's label).
        mix: one interpolation coefficient in [0, 1] per record (data-independent).
        gp_weight: lambda.
        compile_backend: run the per-record gradients compiled with this
            ``torch.compile`` backend (:func:`~raydp_synth.privacy.dp_sgd.functional_record_grads`).
    """

    def record_loss(p: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor,
                    f: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        x, y, f = x[None], y[None], f[None]
        score = functional_call(critic, p, (x, y)).sum() - functional_call(critic, p, (f, y)).sum()
        xhat = a * x + (1 - a) * f

        def critic_at(inp: torch.Tensor) -> torch.Tensor:
            return functional_call(critic, p, (inp, y)).sum()

        slope = grad(critic_at)(xhat)
        penalty = (torch.sqrt((slope**2).sum() + 1e-12) - 1) ** 2
        return -score + gp_weight * penalty

    num_classes = getattr(critic, "num_classes", None)
    if not isinstance(num_classes, int):
        raise TypeError(f"the critic {type(critic).__name__} declares no integer num_classes")
    onehot = torch.nn.functional.one_hot(labels, num_classes).to(real.dtype)
    return functional_record_grads(critic, record_loss, real, onehot, partners, mix,
                                   compile_backend=compile_backend)


def synthetic_partners(generator: nn.Module, latents: torch.Tensor, labels: torch.Tensor
                       ) -> torch.Tensor:
    """``G(z_i, y_i)`` for each row, each row a function of its own inputs alone:
    G in eval mode (BatchNorm with its running statistics, set from a synthetic
    batch by :func:`~raydp_synth.methods.components.gan_networks.refresh_batchnorm` before the
    step), no gradient, G's mode restored afterwards."""
    was_training = generator.training
    generator.eval()
    try:
        with torch.no_grad():
            return generator(latents, labels)
    finally:
        generator.train(was_training)


def pair_record_grads(critic: nn.Module, generator: nn.Module, batch: RecordBatch,
                      labels: torch.Tensor, *, latent_dim: int, gp_weight: float,
                      compile_backend: str | None = None) -> list[torch.Tensor]:
    """Per-record gradients of the pairs (record, synthetic partner) of ``batch``.

    Record i's partner latent and mixing coefficient are its own secret draws
    (:meth:`RecordBatch.normal`, :meth:`RecordBatch.uniform`: a function of the
    mechanism's secret seed, the release and record i's key), never rows of a
    stream handed out by batch position; its partner is G's image for ``labels[i]``
    (the label the networks see for record i).
    """
    partners = synthetic_partners(generator, batch.normal("partner", latent_dim), labels)
    return critic_record_grads(critic, batch.images, labels, partners,
                               batch.uniform("mix", 1, 1, 1), gp_weight=gp_weight,
                               compile_backend=compile_backend)
