"""Sensitive records as the training loops see them: sampled batches with secret,
per-record randomness.

A loop never indexes the training split itself. It asks the worker context for a
:class:`RecordSampler` of a plan mechanism, gets :class:`RecordBatch` objects from it,
and hands each batch to that mechanism's *pre-noise function* through
:meth:`~raydp_synth.runtime.context.WorkerContext.pre_noise_sum`. The pre-noise function
is the one place where real records are read; the neighbouring-dataset contract test
calls the same function, with the loop's own state, on the batch and on the batch
without each of its records.

**Per-record randomness** (a synthetic partner's latent, a mixing coefficient, a
diffusion timestep and its noise) is drawn by :meth:`RecordBatch.normal`,
:meth:`~RecordBatch.uniform` and :meth:`~RecordBatch.randint`: row i comes from a
generator whose whole state is expanded from (the mechanism's secret seed, the
purpose, the release index, the record's key) (:mod:`~raydp_synth.privacy.secret_rng`), where the key is a hash of the record's own content
(:func:`record_keys`). The privacy argument: the map F from (purpose, release, key) to
draws is a random function chosen independently of the data, from a seed that is
drawn from OS entropy and never written. *Conditional on F*, record i's contribution
is a fixed function of record i alone, so adding or removing a record changes the
pre-noise sum by that record's clipped term only, whatever the other records are:
the sensitivity the plan declares holds for every F, and the mechanism (a mixture
over F of mechanisms that each meet the plan's guarantee) meets it too. Draws handed
out by batch position would not: adding one record would shift the draws of every
later record. Two identical records share their key and so their draws; the
argument above does not need distinct keys.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
import torch

from raydp_synth.privacy.sampling import PoissonSampler
from raydp_synth.privacy.secret_rng import derive_secret, secret_generator

__all__ = ["RecordBatch", "RecordSampler", "derived_seed", "record_keys"]


def derived_seed(seed: int, *parts: object) -> int:
    """A 63-bit *public* seed derived from ``seed`` and a purpose (e.g. a config seed
    and ``"dpgan-public"``), for ``manual_seed`` of a public generator. A secret is
    never derived here: :func:`~raydp_synth.privacy.secret_rng.derive_secret` keeps
    all of its bits."""
    digest = hashlib.sha256(repr((seed, *parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def record_keys(images: np.ndarray, labels: np.ndarray) -> torch.Tensor:
    """``int64 [N]``: a key per record, a hash of the record's own image and label.

    A record keeps its key whatever else is in the dataset, so neighbouring datasets
    share the keys (and so the per-record draws) of their common records.
    """
    images = np.ascontiguousarray(images)
    labels = np.asarray(labels, dtype=np.int64)
    keys = np.empty(len(labels), dtype=np.int64)
    for i in range(len(labels)):
        h = hashlib.blake2b(images[i].tobytes(), digest_size=8, person=b"raydp-record")
        h.update(labels[i].tobytes())
        keys[i] = int.from_bytes(h.digest(), "big") >> 1
    return torch.from_numpy(keys)


@dataclass(frozen=True, eq=False)
class RecordBatch:
    """A batch of sensitive records and their secret per-record randomness.

    Sensitive: read it only inside a mechanism's pre-noise function.

    Attributes:
        images, labels: the records (on the loop's device).
        keys: ``int64 [B]`` record keys (:func:`record_keys`), on the CPU.
        release: which release of its mechanism this batch is for (1, 2, ...).
        seed: the mechanism's secret seed of per-record draws (never written).
    """

    images: torch.Tensor
    labels: torch.Tensor
    keys: torch.Tensor
    release: int
    seed: int = field(repr=False)  # secret: in no repr, log or traceback

    def __len__(self) -> int:
        return int(self.keys.shape[0])

    def without(self, i: int) -> RecordBatch:
        """The same batch without its i-th record (the neighbouring batch)."""
        keep = torch.arange(len(self)) != i
        return RecordBatch(images=self.images[keep.to(self.images.device)],
                           labels=self.labels[keep.to(self.labels.device)],
                           keys=self.keys[keep], release=self.release, seed=self.seed)

    def _generators(self, purpose: str) -> list[torch.Generator]:
        return [secret_generator(derive_secret(self.seed, purpose, self.release, int(k)))
                for k in self.keys.tolist()]

    def _stack(self, rows: list[torch.Tensor], shape: tuple[int, ...], dtype: torch.dtype
               ) -> torch.Tensor:
        out = torch.stack(rows) if rows else torch.zeros(0, *shape, dtype=dtype)
        return out.to(self.images.device)

    def normal(self, purpose: str, *shape: int) -> torch.Tensor:
        """``[B, *shape]`` standard normal draws, row i a function of record i's key."""
        return self._stack([torch.randn(shape, generator=g) for g in self._generators(purpose)],
                           shape, torch.float32)

    def uniform(self, purpose: str, *shape: int) -> torch.Tensor:
        """``[B, *shape]`` uniform [0, 1) draws, row i a function of record i's key."""
        return self._stack([torch.rand(shape, generator=g) for g in self._generators(purpose)],
                           shape, torch.float32)

    def randint(self, purpose: str, high: int, *shape: int) -> torch.Tensor:
        """``int64 [B, *shape]`` draws in [0, high), row i a function of record i's key."""
        return self._stack(
            [torch.randint(high, shape, generator=g) for g in self._generators(purpose)],
            shape, torch.int64)


class RecordSampler:
    """Poisson samples of this worker's shard, as :class:`RecordBatch` objects.

    Each record of the shard is included in each batch independently with
    probability q (``sample_rate``; ``None`` for a release over every record, such as
    a one-shot query). With W workers each samples its own shard at the same q, so
    the union is a Poisson sample of the whole training split at rate q.

    Args:
        images, labels, keys: the whole training split (the sampler reads its shard);
            images and labels on ``device`` (each batch is gathered there, no copy of
            the records per step) or in host memory (each batch is copied), keys on
            the CPU.
        shard: the indices this worker owns.
        sample_rate: q, or ``None`` for every record of the shard.
        generator: the secret source of the inclusion draws.
        draw_seed: the mechanism's secret seed of per-record draws.
        device: where batches go.
    """

    def __init__(self, *, images: torch.Tensor, labels: torch.Tensor, keys: torch.Tensor,
                 shard: torch.Tensor, sample_rate: float | None, generator: torch.Generator,
                 draw_seed: int, device: torch.device) -> None:
        self._images, self._labels, self._keys = images, labels, keys
        self.shard = shard
        # The inclusion draws are PoissonSampler's (tested against the accountant's q).
        self._poisson = (None if sample_rate is None
                         else PoissonSampler(shard, sample_rate=sample_rate, generator=generator))
        self.draw_seed = draw_seed
        self.device = device
        self.releases = 0

    def sample(self) -> RecordBatch:
        """The next batch (possibly empty: an empty batch is still released)."""
        idx = self.shard if self._poisson is None else self._poisson.sample()
        self.releases += 1
        return RecordBatch(images=self._images[idx].to(self.device),
                           labels=self._labels[idx].to(self.device), keys=self._keys[idx],
                           release=self.releases, seed=self.draw_seed)
