"""Poisson sampling that matches the accountant's ``PoissonSampledDpEvent``.

Each record is included in a batch independently with probability q. With W
workers, worker r holds the shard ``indices[r::W]`` and Poisson-samples it with the
same q, so the union over workers is a Poisson sample of the whole dataset with
rate q (docs/architecture.md, section 4). Empty batches are *kept*: the release of an empty
batch is pure noise, and skipping it (as Opacus' distributed sampler does) would
reveal that the batch was empty.
"""

from __future__ import annotations

import torch

from raydp_synth.errors import ConfigError

__all__ = ["PoissonSampler", "batch_sample_rate", "shard_indices"]


def shard_indices(num_records: int, *, rank: int, world_size: int) -> torch.Tensor:
    """The records a worker owns: ``rank, rank + W, rank + 2W, ...``."""
    if not 0 <= rank < world_size:
        raise ValueError(f"Expected 0 <= rank={rank} < world_size={world_size}.")
    return torch.arange(rank, num_records, world_size)


class PoissonSampler:
    """Draws Poisson samples of a fixed set of record indices.

    Args:
        indices: the records this worker may sample (its shard).
        sample_rate: inclusion probability q of each record in each batch.
        generator: the source of randomness (seeded per worker by the caller).
    """

    def __init__(
        self, indices: torch.Tensor, *, sample_rate: float, generator: torch.Generator
    ) -> None:
        if not 0 < sample_rate <= 1:
            raise ValueError(f"Expected 0 < sample_rate={sample_rate} <= 1.")
        self.indices = indices
        self.sample_rate = sample_rate
        self.generator = generator

    def sample(self) -> torch.Tensor:
        """One batch: the selected record indices (possibly none)."""
        mask = torch.rand(len(self.indices), generator=self.generator) < self.sample_rate
        return self.indices[mask]


def batch_sample_rate(batch_size: int, num_records: int) -> float:
    """The Poisson rate q = B / n of an expected batch B (refused above n)."""
    if batch_size > num_records:
        raise ConfigError(f"batch_size={batch_size} exceeds the {num_records} training records; "
                          "use a smaller batch_size")
    return batch_size / num_records
