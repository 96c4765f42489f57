"""Data-parallel helpers for the non-private parts of a model.

Only parameters whose gradients are post-processing of DP releases or of synthetic
data are averaged here; private gradients go through
:func:`raydp_synth.runtime.dp_step.dp_sgd_step`, which noises their sum once.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.distributed as dist

from raydp_synth.privacy.noise import world_info

__all__ = ["all_reduce_mean_", "all_reduce_sum_", "broadcast_parameters_", "data_parallel_step"]


def all_reduce_sum_(tensors: Iterable[torch.Tensor]) -> None:
    """In-place sum over workers (no-op with one worker)."""
    if world_info()[1] > 1:
        for t in tensors:
            dist.all_reduce(t, op=dist.ReduceOp.SUM)


def all_reduce_mean_(tensors: Iterable[torch.Tensor]) -> None:
    """In-place mean over workers (no-op with one worker)."""
    _, world_size = world_info()
    if world_size > 1:
        for t in tensors:
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
            t /= world_size


def broadcast_parameters_(module: torch.nn.Module) -> None:
    """Make every worker start from rank 0's parameters and buffers."""
    if world_info()[1] > 1:
        for t in list(module.parameters()) + list(module.buffers()):
            dist.broadcast(t.data, src=0)


def data_parallel_step(
    loss: torch.Tensor, module: torch.nn.Module, optimizer: torch.optim.Optimizer
) -> None:
    """One optimiser step of ``module`` on the gradient of ``loss`` averaged over
    workers. Only for losses of synthetic data or of released values (e.g. G's)."""
    params = list(module.parameters())
    grads = list(torch.autograd.grad(loss, params))
    all_reduce_mean_(grads)
    for p, g in zip(params, grads, strict=True):
        p.grad = g
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
