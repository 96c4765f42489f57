"""Releasing a noisy sum across workers, with the noise added exactly once.

This is the single place where Gaussian noise meets sensitive sums, for DP-SGD
gradients and for DPAF's DPAGG alike (docs/architecture.md, invariant 4 and section
4). Each worker holds the sum of its clipped per-record contributions; the global sum
is the all-reduce of those. Rank 0 adds N(0, noise_std^2) to its local sum before the
all-reduce, every other rank adds nothing, so the released value carries the
noise once, whatever the number of workers, and every rank receives the same
released tensor.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

__all__ = ["gaussian_noise", "noisy_sum", "world_info"]


def world_info() -> tuple[int, int]:
    """(rank, world size) of the default process group, or (0, 1) without one."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def gaussian_noise(
    shape: torch.Size | tuple[int, ...], *, std: float, generator: torch.Generator | None
) -> torch.Tensor:
    """N(0, std^2) noise of ``shape`` (float32), drawn on the generator's device.

    A generator on the parameters' device (a CUDA generator on a GPU worker) draws
    the noise there, with no host-to-device copy; a CPU generator draws it on the
    host as before. The stream depends on the generator's device: a seeded run is
    reproducible on the same kind of device, not across kinds.

    Raises:
        ValueError: no generator. torch's global generator is never a noise source:
            any ``torch.manual_seed`` makes it public, and it keeps 32 bits of a seed
            (design.md, invariant 14).
    """
    if generator is None:
        raise ValueError("noise needs an explicit generator (a DP release's comes from "
                         "raydp_synth.privacy.secret_rng), never torch's global one")
    return torch.normal(0.0, std, size=tuple(shape), generator=generator, device=generator.device)


def noisy_sum(
    local_sum: torch.Tensor, *, noise_std: float, generator: torch.Generator | None
) -> torch.Tensor:
    """Release ``sum over workers of local_sum + N(0, noise_std^2 I)``.

    Args:
        local_sum: this worker's sum of clipped contributions (not yet noised).
        noise_std: standard deviation of the noise of the release
            (noise multiplier x L2 sensitivity).
        generator: rank 0's noise source; unused on other ranks.

    Returns:
        The released tensor, identical on every rank.
    """
    rank, world_size = world_info()
    out = local_sum.detach().clone()
    if rank == 0 and noise_std > 0:
        out += gaussian_noise(out.shape, std=noise_std, generator=generator).to(out)
    if world_size > 1:
        dist.all_reduce(out, op=dist.ReduceOp.SUM)
    return out
