"""DP-SGD gradient release: per-record gradients -> (top-k) -> clip -> sum -> noise.

Per-record gradients come from Opacus' ``GradSampleModule`` (``p.grad_sample``,
:func:`per_record_gradients`). The release is
``(sum_i clip_C(g_i) + N(0, sigma^2 C^2 I)) / (q N)``: each record's gradient is
clipped jointly over all parameters of the group (one mechanism, sensitivity C
under add/remove-one), noise is added once across workers
(:func:`~raydp_synth.privacy.noise.noisy_sum`), and the sum is divided by the
*expected* batch size q*N, not the realised one (docs/architecture.md, invariant 6).

Top-k compression (Lin et al. 2023, DPAF 6.2.8) keeps the largest
``topk_fraction`` of each record's gradient entries by magnitude before
clipping; it is per-record processing, so the sensitivity stays C.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from opacus import GradSampleModule
from torch import nn
from torch.func import grad, vmap

from raydp_synth.privacy.noise import noisy_sum

__all__ = [
    "clip_per_record",
    "clipped_sum",
    "functional_record_grads",
    "noised_release",
    "per_record_gradients",
    "split_by_shapes",
    "topk_per_record",
    "topk_thresholds",
]


_TOPK_SAMPLE = 2048


def topk_per_record(per_record: torch.Tensor, *, fraction: float) -> torch.Tensor:
    """Keep about the ``fraction`` largest-magnitude entries of each row, zero the rest.

    The threshold of row i is the ``(1 - fraction)`` quantile of the magnitudes of
    row i itself: exactly for d <= 2048 entries, and estimated on a strided sample
    of >= 1024 of the row's own entries beyond (the kept fraction is then within
    about 1% of ``fraction``): on DPAF's conv2* (512 records x 4624 entries, one
    thread) the exact selection took 31 ms and the sampled one 12 ms, of a DP step
    of about 40 ms (``bench/dp_grad_samplers.py``). Either way it is a function of record i's
    gradient alone, applied before clipping, so the sensitivity of the clipped sum
    is unchanged. Entries tied with the threshold are dropped.
    """
    threshold = topk_thresholds([per_record], fraction=fraction)
    return per_record if threshold is None else per_record * (per_record.abs() > threshold)


def topk_thresholds(rows: Sequence[torch.Tensor], *, fraction: float) -> torch.Tensor | None:
    """The per-record top-k thresholds ``[n, 1]`` of :func:`topk_per_record` for
    the rows ``torch.cat(rows, dim=1)``, read from the parts ``rows`` (each
    ``[n, d_j]``) without concatenating them; None where nothing is dropped."""
    if not 0 < fraction <= 1:
        raise ValueError(f"Expected 0 < topk_fraction={fraction} <= 1.")
    n = rows[0].shape[0] if rows else 0
    d = sum(r.shape[1] for r in rows)
    if fraction == 1 or n == 0:
        return None
    step = 1 if d <= _TOPK_SAMPLE else d // (_TOPK_SAMPLE // 2)
    parts, offset = [], 0
    for r in rows:  # the entries at global indices 0, step, 2 * step, ...
        parts.append(r[:, (-offset) % step :: step].abs())
        offset += r.shape[1]
    sample = torch.cat(parts, dim=1)
    drop = sample.shape[1] - math.ceil(fraction * sample.shape[1])
    if drop <= 0:
        return None
    return sample.kthvalue(drop, dim=1, keepdim=True).values


def clip_per_record(per_record: torch.Tensor, *, max_norm: float) -> torch.Tensor:
    """Scale each row to L2 norm at most ``max_norm``."""
    norms = per_record.norm(dim=1, keepdim=True)
    return per_record * (max_norm / (norms + 1e-12)).clamp(max=1.0)


def per_record_gradients(
    module: GradSampleModule, loss_of_batch: Callable[[], torch.Tensor], *, batch_size: int
) -> list[torch.Tensor]:
    """Per-record gradients ``[B, *p.shape]`` of a sum of per-record losses.

    Args:
        module: the Opacus-wrapped module (``loss_reduction="sum"``).
        loss_of_batch: runs the forward pass and returns ``sum_i loss_i``; each
            loss_i must depend on record i alone (docs/architecture.md, invariant 8).
        batch_size: the realised batch size; 0 skips the forward pass.
    """
    params = [p for p in module.parameters() if p.requires_grad]
    if batch_size == 0:
        return [torch.zeros(0, *p.shape, device=p.device) for p in params]
    module.zero_grad(set_to_none=True)
    loss_of_batch().backward()
    grads = [p.grad_sample.detach() for p in params]  # type: ignore[attr-defined]
    for p in params:  # Opacus accumulates grad_sample across backward passes
        p.grad_sample = None  # type: ignore[attr-defined]
        p.grad = None
    return grads


def functional_record_grads(
    module: nn.Module, record_loss: Callable[..., torch.Tensor], *batched: torch.Tensor,
    compile_backend: str | None = None,
) -> list[torch.Tensor]:
    """Per-record gradients ``[B, *p.shape]`` of ``module``'s trainable parameters,
    by ``torch.func`` (``vmap`` of ``grad``, the technique of Opacus' functorch mode;
    it also differentiates through a gradient penalty, which Opacus' hooks cannot).

    Args:
        module: the network (parameters read, not modified).
        record_loss: ``record_loss(params, *rows)``, the loss of one record, with
            ``rows`` the record's slice of each of ``batched``; it calls the network
            as ``torch.func.functional_call(module, params, ...)``. Record i's loss
            must depend on record i's rows alone.
        batched: the per-record inputs, each ``[B, ...]`` (B may be 0).
        compile_backend: a ``torch.compile`` backend (``"inductor"`` on a GPU) to run
            the vmapped gradient compiled, one graph per batch shape (fixed shapes:
            :mod:`~raydp_synth.runtime.fixed_shapes`); None runs it eagerly. The same
            function either way (``tests/privacy/test_compiled_step.py``).
    """
    names = [n for n, p in module.named_parameters() if p.requires_grad]
    params = {n: p.detach() for n, p in module.named_parameters() if p.requires_grad}
    if len(batched[0]) == 0:
        return [torch.zeros(0, *params[n].shape, device=params[n].device) for n in names]
    in_dims = (None, *(0 for _ in batched))
    per_record_fn = vmap(grad(record_loss), in_dims=in_dims)
    if compile_backend is not None:
        per_record_fn = torch.compile(per_record_fn, backend=compile_backend, dynamic=False)
    per_record = per_record_fn(params, *batched)
    return [per_record[n].detach() for n in names]


def clipped_sum(
    per_record_grads: Sequence[torch.Tensor],
    *,
    max_grad_norm: float,
    topk_fraction: float = 1.0,
    shapes: Sequence[torch.Size] | None = None,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """The pre-noise sum of a DP-SGD release: ``sum_i clip_C(topk(g_i))``, flattened
    (the parameters' sums concatenated in order).

    Record i's gradient g_i is its slices of all parameters together: its norm is
    the root of the sum over parameters of each slice's squared norm, and each
    parameter's clipped sum is the product of the clip factors ``[B]`` with that
    parameter's per-record gradients ``[B, d_j]``; no concatenated ``[B, D]`` copy
    is made (top-k masks each part, against a threshold over the whole row). The
    same value as clipping the concatenated rows (:func:`clip_per_record`), up
    to float rounding: each record is still clipped to norm C as a whole, so the
    sensitivity of the sum is C.

    ``weights`` (``[B]``, 1 for a record, 0 for a padding row of a fixed-shape batch:
    :attr:`~raydp_synth.privacy.records.RecordBatch.weights`) multiply each row's clip
    factor, so a padding row adds exactly zero (its gradient is finite: a zero image).
    """
    shapes = list(shapes) if shapes is not None else [g.shape[1:] for g in per_record_grads]
    local_n = per_record_grads[0].shape[0] if per_record_grads else 0
    sizes = [math.prod(shape) for shape in shapes]
    if local_n == 0:
        device = per_record_grads[0].device if per_record_grads else None
        return torch.zeros(sum(sizes), device=device)
    rows = [g.reshape(local_n, -1) for g in per_record_grads]
    threshold = topk_thresholds(rows, fraction=topk_fraction)
    if threshold is not None:
        rows = [r * (r.abs() > threshold) for r in rows]
    squared = torch.zeros(local_n, dtype=rows[0].dtype, device=rows[0].device)
    for r in rows:
        squared += torch.linalg.vector_norm(r, dim=1).square()
    factor = (max_grad_norm / (squared.sqrt() + 1e-12)).clamp(max=1.0)
    if weights is not None:
        factor = factor * weights.to(factor)
    out = torch.empty(sum(sizes), dtype=rows[0].dtype, device=rows[0].device)
    for r, part in zip(rows, split_by_shapes(out, [torch.Size([s]) for s in sizes]), strict=True):
        torch.mv(r.t(), factor, out=part)
    return out


def noised_release(
    summed: torch.Tensor,
    *,
    noise_std: float,
    expected_batch_size: float,
    generator: torch.Generator | None,
) -> torch.Tensor:
    """The release of a pre-noise sum (this worker's ``sum_i clip_C(g_i)``, flattened):
    summed over workers, plus N(0, noise_std^2) once (noise_std = sigma * C), divided
    by the expected batch size qN. Flat, identical on every worker."""
    return noisy_sum(summed, noise_std=noise_std, generator=generator) / expected_batch_size


def split_by_shapes(flat: torch.Tensor, shapes: Sequence[torch.Size]) -> list[torch.Tensor]:
    """``flat`` cut into one view per shape, in order (the inverse of concatenating
    the flattened tensors)."""
    out, start = [], 0
    for shape in shapes:
        size = math.prod(shape)
        out.append(flat[start : start + size].view(shape))
        start += size
    if start != flat.numel():
        raise ValueError(f"{flat.numel()} values for shapes of {start} in all")
    return out
