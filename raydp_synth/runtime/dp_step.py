"""One DP-SGD step of a plan mechanism: the pattern every loop's private update shares.

Privacy: the records are read once, by ``ctx.pre_noise_sum(mechanism, pre_noise,
batch)`` on the mechanism's own Poisson sample (``ctx.sampler``); the sum is noised
once across workers with std ``noise_multiplier * sensitivity`` of that plan
mechanism, the numbers the accountant charged, and divided by the expected batch
size. Everything after the noise (a rescaling, adding a gradient of synthetic data,
the optimiser and its moments) is post-processing of the release.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from raydp_synth.privacy.dp_sgd import noised_release, split_by_shapes
from raydp_synth.runtime.context import PreNoiseFunction, WorkerContext

__all__ = ["dp_sgd_step", "step_with_gradient"]


def dp_sgd_step(
    ctx: WorkerContext,
    mechanism: str,
    pre_noise: PreNoiseFunction,
    params: Sequence[torch.Tensor],
    optimizer: torch.optim.Optimizer,
    *,
    expected_batch_size: float | None = None,
    post: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> None:
    """Release one noisy gradient of ``mechanism`` and step ``optimizer`` on it.

    Args:
        ctx: the worker's context (sampler, the door to the records, noise).
        mechanism: the plan mechanism this release is one step of.
        pre_noise: the mechanism's pre-noise function: a batch -> this worker's
            ``sum_i clip(g_i)``, flattened in the order of ``params``.
        params: the parameters the release is the gradient of.
        optimizer: steps ``params`` (its gradients are cleared afterwards).
        expected_batch_size: the divisor of the release (default: the plan's q
            times the number of training records, qN).
        post: post-processing of the flat release before the step (e.g. dpGAN's
            per-group rescaling, DPAF's synthetic-side gradient).
    """
    mech = ctx.plan.mechanism(mechanism)
    if expected_batch_size is None:
        if mech.sample_rate is None:
            raise ValueError(f"{mechanism} has no sample rate: give the expected batch size")
        expected_batch_size = mech.sample_rate * ctx.data.num_records
    summed = ctx.pre_noise_sum(mechanism, pre_noise, ctx.sampler(mechanism).sample())
    released = noised_release(summed, noise_std=mech.noise_std,
                              expected_batch_size=expected_batch_size,
                              generator=ctx.noise_generator)
    step_with_gradient(params, post(released) if post is not None else released, optimizer)


def step_with_gradient(params: Sequence[torch.Tensor], flat_grad: torch.Tensor,
                       optimizer: torch.optim.Optimizer) -> None:
    """One optimiser step with ``flat_grad`` (every parameter's gradient, flattened
    and concatenated in order) as the gradient; the gradients are cleared after."""
    for p, g in zip(params, split_by_shapes(flat_grad, [p.shape for p in params]), strict=True):
        p.grad = g.to(p)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
