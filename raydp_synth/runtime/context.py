"""What a method's training loop receives on each Ray Train worker."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from raydp_synth.data import DataInfo, ImageDataset
from raydp_synth.privacy.plan import PrivacyPlan
from raydp_synth.privacy.records import RecordBatch, RecordSampler, derived_seed, record_keys
from raydp_synth.privacy.sampling import shard_indices
from raydp_synth.privacy.secret_rng import derive_secret, secret_generator
from raydp_synth.runtime.fixed_shapes import batch_shapes

__all__ = ["DEVICE_RECORDS_LIMIT", "Auditor", "PreNoiseFunction", "WorkerContext"]

#: A mechanism's pre-noise function: a batch of records -> the sum over the batch of
#: the per-record contributions the mechanism noises (clipped gradients, bounded
#: features, counts), with every other input taken from the loop's current state.
PreNoiseFunction = Callable[[RecordBatch], torch.Tensor]
#: ``auditor(mechanism, pre_noise, batch)``: called before each release (tests).
Auditor = Callable[[str, PreNoiseFunction, RecordBatch], None]
#: A training split up to this size (bytes) is copied to the loop's device once and
#: sampled there; a larger one stays in host memory and each batch is copied.
DEVICE_RECORDS_LIMIT = 2 << 30


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
        noise_generator: rank 0's source of DP noise (secret), on ``device`` in a
            training worker (the noise is drawn where the sums are).
        report: ``report(metrics, checkpoint_state)``; metrics are checked against
            the method's allow-list; checkpoint_state (rank 0) is torch-saved.
        log: prints a progress line on rank 0.
        public: the records the curator declared public (``--public``), or None;
            a method may read them without noise (docs/architecture.md, invariant 9).
        dp_seed: the run's secret seed of its DP randomness (Poisson sampling,
            per-record draws, noise). Amplification by subsampling assumes the
            batches stay hidden, so it is 256 bits drawn from OS entropy by the driver
            (:func:`~raydp_synth.privacy.secret_rng.fresh_secret`) and never written
            anywhere.
        fixed_shapes: pad each Poisson batch to a capacity of a short ladder
            (:mod:`~raydp_synth.runtime.fixed_shapes`) before its pre-noise function
            sees it: the networks see a few shapes in a run (what a compiled or
            captured step needs). The release is the same; off only to measure it.
        compile_backend: a ``torch.compile`` backend for the per-record gradients of
            the methods that compute them with ``torch.func`` (dpwgan, dpgan,
            PrivImage's critic and denoiser), one graph per batch capacity; None (the
            default) runs them eagerly. Worth it on a GPU, where the eager step is
            launch-bound; a compile costs tens of seconds per shape on a CPU.
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
    dp_seed: int = field(repr=False)  # secret: in no repr, log or traceback
    public: ImageDataset | None = None
    auditor: Auditor | None = None
    fixed_shapes: bool = True
    compile_backend: str | None = None
    _records: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = field(
        default=None, init=False, repr=False)
    _samplers: dict[str, RecordSampler] = field(default_factory=dict, init=False, repr=False)

    def generator(self, *purpose: object) -> torch.Generator:
        """A *public* CPU generator (config seed, purpose, rank): this worker's
        synthetic draws, never the selection of sensitive records."""
        return torch.Generator().manual_seed(
            derived_seed(self.config.seed, *purpose, self.rank)
        )

    def shared_generator(self, *purpose: object) -> torch.Generator:
        """A *public* CPU generator identical on every rank (config seed, purpose):
        initial parameters and other public draws that every worker must agree on."""
        return torch.Generator().manual_seed(derived_seed(self.config.seed, *purpose))

    def secret_generator(self, *purpose: object) -> torch.Generator:
        """A CPU generator from the run's secret DP seed (its whole state expanded
        from the derived secret: :func:`~raydp_synth.privacy.secret_rng.secret_generator`):
        Poisson sampling."""
        return secret_generator(derive_secret(self.dp_seed, *purpose, self.rank))

    def sampler(self, mechanism: str) -> RecordSampler:
        """The sampler of a plan mechanism: Poisson at the plan's rate q (every
        record of the shard for a mechanism without subsampling), with the secret
        inclusion draws and per-record draws of that mechanism alone.

        One sampler per mechanism and run: asking again gives the same sampler (it
        goes on drawing fresh, independent samples; a second sampler would replay
        the first one's batches)."""
        if mechanism not in self._samplers:
            self._samplers[mechanism] = self._new_sampler(mechanism)
        return self._samplers[mechanism]

    def _new_sampler(self, mechanism: str) -> RecordSampler:
        if self._records is None:
            images = torch.as_tensor(self.train.images)
            labels = torch.as_tensor(self.train.labels)
            if images.nbytes + labels.nbytes <= DEVICE_RECORDS_LIMIT:
                # Once, here: each batch is then gathered on the device, with no
                # host-to-device copy of the records per step.
                images, labels = images.to(self.device), labels.to(self.device)
            self._records = (images, labels, record_keys(self.train.images, self.train.labels))
        images, labels, keys = self._records
        return RecordSampler(
            images=images, labels=labels, keys=keys,
            shard=shard_indices(len(labels), rank=self.rank, world_size=self.world_size),
            sample_rate=self.plan.mechanism(mechanism).sample_rate,
            generator=self.secret_generator("sample", mechanism),
            # Rank-independent: a record's draws follow it whichever worker holds it.
            draw_seed=derive_secret(self.dp_seed, "records", mechanism),
            device=self.device,
        )

    def pre_noise_sum(self, mechanism: str, pre_noise: PreNoiseFunction,
                      batch: RecordBatch) -> torch.Tensor:
        """The one door through which a loop reads sensitive records: this worker's
        pre-noise sum of ``mechanism`` over ``batch``; the caller noises it with the
        plan's multiplier. ``pre_noise`` must not change the loop's state (it may be
        called more than once: the neighbouring-dataset test calls it on the batch
        and on the batch without each record, before the loop's own call)."""
        pre_noise = self._on_fixed_shapes(mechanism, pre_noise)
        if self.auditor is not None:  # the function that runs: padded, chunked
            self.auditor(mechanism, pre_noise, batch)
        return pre_noise(batch)

    def _on_fixed_shapes(self, mechanism: str, pre_noise: PreNoiseFunction) -> PreNoiseFunction:
        """``pre_noise`` on the mechanism's batch ladder (a Poisson mechanism, with
        :attr:`fixed_shapes`); a one-shot release over the whole shard already has one
        shape."""
        q = self.plan.mechanism(mechanism).sample_rate
        if not self.fixed_shapes or q is None:
            return pre_noise
        shard = len(self.sampler(mechanism).shard)
        return batch_shapes(max(1.0, q * shard), q).wrap(pre_noise)
