"""dpGAN's clip groups and their release (Zhang, Ji and Wang 2018, dpGAN sections 4.1-4.2).

The critic's parameter entries are split into k groups, group j clipped per record
at its bound C_j. A record's clipped contribution, each group rescaled by 1/C_j,
has L2 norm at most sqrt(k); Gaussian noise of std sigma on that rescaled sum,
rescaled back (noise sigma*C_j on group j), is **one** Gaussian mechanism of
sensitivity sqrt(k), i.e. of noise multiplier sigma / sqrt(k) (docs/architecture.md,
invariant 5). The paper's "parallel composition" of the groups is wrong (every group
reads the same records); the plan here charges sigma / sqrt(k), and tests pin it.

The bounds are fixed hyperparameters (global, or weights/biases) or, with adaptive
clipping, estimated each step from a batch of data the curator declared public:
the bound of a *unit* (one output filter or neuron of a weight tensor; all biases
together) is the mean per-record gradient norm of the unit on that batch, and
Algorithm 2 merges the units with the most similar bounds (merged bound
sqrt(C_a^2 + C_b^2)) until k - 1 weight groups remain. Units, rather than the
paper's single entries, keep the clustering cheap at every step; the argument is
the same. Bounds and groups depend on public data and on the critic (a DP
release) only, so they are post-processing (docs/architecture.md, invariants 8 and 9).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["ClipGroups", "adaptive_groups", "cluster_bounds", "fixed_groups", "group_sigma",
           "grouped_clipped_sum", "parameter_units", "plan_multiplier",
           "unit_bounds"]

_MIN_BOUND = 1e-8


def plan_multiplier(group_sigma: float, k: int) -> float:
    """The noise multiplier the accountant charges for k groups, each noised with
    ``group_sigma * C_j``: one Gaussian of sensitivity sqrt(k), i.e. sigma / sqrt(k)."""
    return group_sigma / math.sqrt(k)


def group_sigma(plan_multiplier: float, k: int) -> float:
    """The per-group noise multiplier (std / C_j) of a plan multiplier z: z sqrt(k)."""
    return plan_multiplier * math.sqrt(k)


@dataclass(frozen=True)
class ClipGroups:
    """k clip groups of a flattened parameter vector.

    Attributes:
        group_of: ``int64 [D]``: the group of every parameter entry.
        bounds: ``float [k]``: the clip bound of every group (> 0).
    """

    group_of: torch.Tensor
    bounds: torch.Tensor

    @property
    def k(self) -> int:
        return int(self.bounds.numel())

    def rescale(self, released: torch.Tensor) -> torch.Tensor:
        """Group j's coordinates times C_j: undoes the 1/C_j of the pre-noise sum
        (post-processing of a release)."""
        return released * self.bounds.to(released)[self.group_of.to(released.device)]


def parameter_units(named_shapes: Sequence[tuple[str, torch.Size]]) -> tuple[torch.Tensor, int]:
    """The unit of every flattened entry: one unit per output row of each weight
    tensor (a conv filter, a linear neuron), one shared unit for all biases.

    Returns:
        ``(unit_of [D], number of weight units)``; the bias unit has the last index.
    """
    weight_rows = sum(shape[0] for name, shape in named_shapes if not name.endswith("bias"))
    parts, start = [], 0
    for name, shape in named_shapes:
        size = math.prod(shape)
        if name.endswith("bias"):
            parts.append(torch.full((size,), weight_rows, dtype=torch.long))
        else:
            rows = torch.arange(start, start + shape[0]).repeat_interleave(size // shape[0])
            parts.append(rows)
            start += shape[0]
    return torch.cat(parts), weight_rows


def fixed_groups(named_shapes: Sequence[tuple[str, torch.Size]], *, groups: int, clip: float,
                 bias_clip: float) -> ClipGroups:
    """Bounds without public data: one global bound (k = 1) or weights/biases (k = 2)."""
    if groups not in (1, 2):
        raise ValueError(f"fixed bounds support groups 1 or 2, not {groups}")
    flags = torch.cat([torch.full((math.prod(s),), int(n.endswith("bias")), dtype=torch.long)
                       for n, s in named_shapes])
    if groups == 1:
        return ClipGroups(torch.zeros_like(flags), torch.tensor([clip], dtype=torch.float64))
    return ClipGroups(flags, torch.tensor([clip, bias_clip], dtype=torch.float64))


def unit_bounds(per_record: torch.Tensor, unit_of: torch.Tensor, num_units: int) -> torch.Tensor:
    """Mean over records of each unit's per-record gradient norm (``[num_units]``)."""
    squares = torch.zeros(per_record.shape[0], num_units, dtype=torch.float64)
    squares.index_add_(1, unit_of, per_record.double() ** 2)
    return squares.sqrt().mean(dim=0)


def cluster_bounds(bounds: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 2: merge the two groups with the most similar bounds until ``k`` remain.

    Args:
        bounds: ``[U]`` bounds of the units (each its own group at the start).
        k: groups wanted (``1 <= k``; ``k >= U`` keeps every unit alone).

    Returns:
        ``(group_of_unit [U], group_bounds [k'])``, k' = min(k, U); a merged group's
        bound is ``sqrt(C_a^2 + C_b^2)`` (L2 clipping of the union).
    """
    members = [[u] for u in range(len(bounds))]
    values = [float(b) for b in bounds]
    while len(values) > max(1, k):
        order = np.argsort(values, kind="stable")
        gaps = np.diff(np.asarray(values)[order])
        i = int(np.argmin(gaps))
        a, b = int(order[i]), int(order[i + 1])
        values[a] = math.hypot(values[a], values[b])
        members[a] += members[b]
        del values[b], members[b]
    group_of = np.empty(len(bounds), dtype=np.int64)
    for g, units in enumerate(members):
        group_of[units] = g
    return group_of, np.asarray(values, dtype=np.float64)


def adaptive_groups(public_per_record: torch.Tensor, unit_of: torch.Tensor, num_weight_units: int,
                    *, groups: int) -> ClipGroups:
    """Groups and bounds from per-record gradients of a **public** batch.

    k = 1: one group over everything (bound: the merge of all unit bounds). k >= 2:
    the biases' group and k - 1 clusters of weight units.
    """
    means = unit_bounds(public_per_record, unit_of, num_weight_units + 1).clamp(min=_MIN_BOUND)
    if groups == 1:
        return ClipGroups(torch.zeros_like(unit_of), means.square().sum().sqrt().reshape(1))
    weight_group, weight_bounds = cluster_bounds(means[:-1].numpy(), groups - 1)
    group_of_unit = torch.as_tensor(np.append(weight_group, len(weight_bounds)))
    bounds = torch.as_tensor(np.append(weight_bounds, means[-1].item()))
    if len(bounds) < groups:  # fewer units than groups: pad (an empty group costs nothing)
        bounds = torch.cat([bounds, torch.ones(groups - len(bounds), dtype=torch.float64)])
    return ClipGroups(group_of_unit[unit_of], bounds)


def grouped_clipped_sum(per_record: torch.Tensor, groups: ClipGroups, *,
                        weights: torch.Tensor | None = None) -> torch.Tensor:
    """``sum_i concat_j clip_{C_j}(g_ij) / C_j``: each record contributes at most
    sqrt(k) in L2 (at most 1 per group), the sensitivity of the release.

    Args:
        per_record: ``[B, D]`` flattened per-record gradients.
        weights: ``[B]``, 1 for a record, 0 for a padding row (which then adds
            exactly zero); None: every row is a record.
    """
    if per_record.shape[0] == 0:
        return torch.zeros(per_record.shape[1], device=per_record.device)
    group_of = groups.group_of.to(per_record.device)
    # Group sums and the weighted sum over records as matrix products (a third of the
    # time of scattering the squares and gathering the scales, dpGAN's critic on one
    # CPU thread): [B, D] x [D, k] one-hot, and [k, B] x [B, D].
    onehot = torch.nn.functional.one_hot(group_of, groups.k).to(per_record.dtype)
    squares = per_record.square() @ onehot
    bounds = groups.bounds.to(per_record).clamp(min=_MIN_BOUND)
    # clip_C(g) / C = g / max(C, |g|): at most 1 in norm per group.
    scale = 1.0 / torch.maximum(squares.sqrt(), bounds)
    if weights is not None:
        scale = scale * weights.to(scale)[:, None]
    # Column d of record i is scaled by record i's factor of d's group.
    return (scale.T @ per_record).gather(0, group_of[None])[0]
