"""What a method's training loop receives on each Ray Train worker."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from raydp_synth.data import ImageDataset
from raydp_synth.methods.base import DataInfo
from raydp_synth.privacy.plan import PrivacyPlan

__all__ = ["WorkerContext", "derived_seed"]


def derived_seed(seed: int, *parts: object) -> int:
    """A 63-bit seed derived from ``seed`` and a purpose (e.g. ``"dpagg", rank``)."""
    digest = hashlib.sha256(repr((seed, *parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


@dataclass(kw_only=True)
class WorkerContext:
    """One worker's view of a run.

    Attributes:
        config: the method's typed config.
        plan: the run's granted privacy plan: the only source of noise multipliers.
        data: public facts about the training split.
        train: the sensitive training split (the worker samples its own shard).
        rank, world_size: this worker's place in the data-parallel group.
        device: where tensors live.
        noise_generator: rank 0's source of DP noise (secret).
        report: ``report(metrics, checkpoint_state)``; metrics are checked against
            the method's allow-list; checkpoint_state (rank 0) is torch-saved.
        log: prints a progress line on rank 0.
        public: the records the curator declared public (``--public``), or None;
            a method may read them without noise (design.md 3.9).
        dp_seed: the run's secret seed of its DP randomness (Poisson sampling and
            noise). Amplification by subsampling assumes the batches stay hidden, so
            it is drawn from OS entropy by the driver and never written anywhere.
    """

    config: Any
    plan: PrivacyPlan
    data: DataInfo
    train: ImageDataset
    rank: int
    world_size: int
    device: torch.device
    noise_generator: torch.Generator
    report: Callable[[Mapping[str, float], dict[str, Any] | None], None]
    log: Callable[[str], None]
    dp_seed: int
    public: ImageDataset | None = None

    def generator(self, *purpose: object) -> torch.Generator:
        """A *public* CPU generator (config seed, purpose, rank): initialisation and
        synthetic draws only, never the selection of sensitive records."""
        return torch.Generator().manual_seed(
            derived_seed(self.config.seed, *purpose, self.rank)
        )

    def secret_generator(self, *purpose: object) -> torch.Generator:
        """A generator from the run's secret DP seed: Poisson sampling."""
        return torch.Generator().manual_seed(derived_seed(self.dp_seed, *purpose, self.rank))
