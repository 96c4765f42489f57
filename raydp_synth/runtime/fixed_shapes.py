"""Fixed batch shapes for a DP step: a Poisson batch padded to one of a few capacities.

A Poisson batch has a new size at every release, so a compiled or captured step (the
GPU's way out of launching hundreds of small kernels) would be built again for every
size. Here a batch of n records is padded to the smallest *capacity* of a short
ladder that holds it, and a batch above the ladder's top is cut into chunks of the top
capacity, each padded likewise: never truncated, every record is processed. The
networks then see a handful of shapes in a whole run.

Privacy: padding changes no release. A padding row is a zero image of label 0 that is
no record; each pre-noise function multiplies each row's contribution by the batch's
weights (1 a record, 0 padding: :attr:`RecordBatch.weights`), so padding adds exactly
zero, and a chunked batch's pre-noise sum is the sum of its chunks' sums, the same
per-record terms in another order of addition. The ladder is a function of public
numbers (the mechanism's q, the number of training records, the number of workers);
which capacity a release used follows the secret batch size, as the step's time
always did, and is reported nowhere. The neighbouring-dataset contract test runs on
the wrapped function (:meth:`BatchShapes.wrap` is what ``WorkerContext.pre_noise_sum``
hands the auditor), and ``tests/runtime/test_fixed_shapes.py`` checks that the padded
and unpadded sums of every method's pre-noise function agree to float tolerance.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from raydp_synth.privacy.records import RecordBatch

__all__ = ["BatchShapes", "batch_shapes"]

#: The smallest rung of a ladder (rows): a capacity is a multiple of at least this.
MIN_GRANULE = 8
#: Rungs per expected batch: the granule is about expected / RUNGS_PER_BATCH (a power
#: of two), so padding adds on average half a granule, about 6% of a batch.
RUNGS_PER_BATCH = 8
#: The top capacity is the expected batch plus this many standard deviations of a
#: Poisson count (a batch above it is chunked, about once in 30,000 releases).
TOP_SIGMAS = 4.0


@dataclass(frozen=True)
class BatchShapes:
    """The capacities a mechanism's batches are padded to on one worker.

    Attributes:
        granule: every capacity is a multiple of it.
        top: the largest capacity; a larger batch is processed in chunks of ``top``.
    """

    granule: int
    top: int

    def __post_init__(self) -> None:
        if self.granule < 1 or self.top < self.granule or self.top % self.granule:
            raise ValueError(f"a ladder needs 1 <= granule <= top, top a multiple of granule; "
                             f"got granule={self.granule}, top={self.top}")

    @property
    def capacities(self) -> tuple[int, ...]:
        """Every capacity a batch may be padded to, ascending."""
        return tuple(range(self.granule, self.top + 1, self.granule))

    def capacity(self, rows: int) -> int:
        """The smallest capacity that holds ``rows`` (``rows <= top``; an empty batch
        gets the smallest capacity: its release is noise alone, at a fixed shape)."""
        if rows > self.top:
            raise ValueError(f"{rows} rows exceed the top capacity {self.top}: chunk them")
        return max(self.granule, self.granule * math.ceil(rows / self.granule))

    def chunks(self, batch: RecordBatch) -> list[RecordBatch]:
        """``batch`` as padded batches of ladder capacities, in order, every record in
        exactly one of them."""
        n = len(batch)
        if n <= self.top:
            return [batch.padded(self.capacity(n))]
        starts = range(0, n, self.top)
        return [(part := batch.rows(s, min(s + self.top, n))).padded(self.capacity(len(part)))
                for s in starts]

    def wrap(self, pre_noise: Callable[[RecordBatch], torch.Tensor]
             ) -> Callable[[RecordBatch], torch.Tensor]:
        """``pre_noise`` on fixed shapes: the sum of its values on :meth:`chunks`."""

        def fixed_shape_pre_noise(batch: RecordBatch) -> torch.Tensor:
            total: torch.Tensor | None = None
            for chunk in self.chunks(batch):
                part = pre_noise(chunk)
                total = part if total is None else total + part
            assert total is not None  # chunks() returns at least one batch
            return total

        fixed_shape_pre_noise.__wrapped__ = pre_noise  # type: ignore[attr-defined]
        return fixed_shape_pre_noise


def batch_shapes(expected_rows: float, sample_rate: float) -> BatchShapes:
    """The ladder of a Poisson mechanism whose batches on this worker have
    ``expected_rows`` records on average (q times the worker's shard), at rate q:
    a power-of-two granule of about an eighth of the expected batch (at least
    :data:`MIN_GRANULE`), up to :data:`TOP_SIGMAS` standard deviations above it."""
    if expected_rows <= 0 or not 0 < sample_rate <= 1:
        raise ValueError(f"Expected a positive batch and 0 < q <= 1, got {expected_rows}, "
                         f"{sample_rate}")
    granule = max(MIN_GRANULE, 2 ** round(math.log2(max(1.0, expected_rows / RUNGS_PER_BATCH))))
    spread = TOP_SIGMAS * math.sqrt(expected_rows * (1 - sample_rate))
    top = granule * max(1, math.ceil((expected_rows + spread + 1) / granule))
    return BatchShapes(granule=granule, top=top)
