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
:meth:`~RecordBatch.uniform` and :meth:`~RecordBatch.randint`: row i is Threefry-4x64
keyed by the 256-bit secret derived from (the mechanism's secret seed, the purpose,
the release index), at counters that start with record i's key
(:mod:`~raydp_synth.privacy.keyed_draws`), where the key is a hash of the record's own
content (:func:`record_keys`). The whole batch is drawn at once, on its device.

The privacy argument: the map F from (purpose, release, key) to draws is a random
function chosen independently of the data, from a seed that is drawn from OS entropy
and never written. *Conditional on F*, record i's contribution
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
import math
from dataclasses import dataclass, field

import numpy as np
import torch

from raydp_synth.privacy.keyed_draws import keyed_normal, keyed_randint, keyed_uniform
from raydp_synth.privacy.sampling import PoissonSampler
from raydp_synth.privacy.secret_rng import derive_secret

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

    A batch may end in ``padding`` rows (:meth:`padded`: a fixed shape for a captured
    step, :mod:`~raydp_synth.runtime.fixed_shapes`): zero images of label 0 that are no
    record. A pre-noise function multiplies each row's contribution by
    :attr:`weights` (1 a record, 0 a padding row), so a padding row adds exactly zero
    and the sum is the sum over the records alone.

    Attributes:
        images, labels: the rows (on the loop's device).
        keys: ``int64 [B]`` record keys (:func:`record_keys`), on the CPU.
        release: which release of its mechanism this batch is for (1, 2, ...).
        seed: the mechanism's secret seed of per-record draws (never written).
        padding: how many of the last rows are padding.
    """

    images: torch.Tensor
    labels: torch.Tensor
    keys: torch.Tensor
    release: int
    seed: int = field(repr=False)  # secret: in no repr, log or traceback
    padding: int = 0

    def __len__(self) -> int:
        """Rows, padding included (the shape the networks see)."""
        return int(self.keys.shape[0])

    @property
    def num_records(self) -> int:
        """The records of the batch (its rows less its padding)."""
        return len(self) - self.padding

    @property
    def weights(self) -> torch.Tensor | None:
        """``float32 [B]`` on the images' device: 1 for a record, 0 for a padding row;
        None where there is no padding (every row counts)."""
        if self.padding == 0:
            return None
        out = torch.ones(len(self), device=self.images.device)
        out[self.num_records:] = 0
        return out

    def without(self, i: int) -> RecordBatch:
        """The same batch without its i-th record (the neighbouring batch)."""
        if self.padding:
            raise ValueError("without() is for a batch of records, not a padded one")
        keep = torch.arange(len(self)) != i
        return RecordBatch(images=self.images[keep.to(self.images.device)],
                           labels=self.labels[keep.to(self.labels.device)],
                           keys=self.keys[keep], release=self.release, seed=self.seed)

    def rows(self, start: int, stop: int) -> RecordBatch:
        """Records ``start:stop`` of an unpadded batch, with their own draws."""
        if self.padding:
            raise ValueError("rows() is for a batch of records, not a padded one")
        return RecordBatch(images=self.images[start:stop], labels=self.labels[start:stop],
                           keys=self.keys[start:stop], release=self.release, seed=self.seed)

    def padded(self, capacity: int) -> RecordBatch:
        """This batch followed by ``capacity - len(self)`` padding rows (zero images,
        label 0, key 0: their draws are computed and weighted out)."""
        extra = capacity - len(self)
        if extra < 0 or self.padding:
            raise ValueError(f"cannot pad a batch of {len(self)} rows to {capacity}")
        if extra == 0:
            return self
        return RecordBatch(
            images=torch.cat([self.images, self.images.new_zeros(extra, *self.images.shape[1:])]),
            labels=torch.cat([self.labels, self.labels.new_zeros(extra)]),
            keys=torch.cat([self.keys, self.keys.new_zeros(extra)]),
            release=self.release, seed=self.seed, padding=extra)

    def _keys_here(self) -> torch.Tensor:
        return self.keys.to(self.images.device)

    def normal(self, purpose: str, *shape: int) -> torch.Tensor:
        """``[B, *shape]`` standard normal draws, row i a function of record i's key."""
        flat = keyed_normal(derive_secret(self.seed, purpose, self.release), self._keys_here(),
                            math.prod(shape))
        return flat.reshape(len(self), *shape)

    def uniform(self, purpose: str, *shape: int) -> torch.Tensor:
        """``[B, *shape]`` uniform [0, 1) draws, row i a function of record i's key."""
        flat = keyed_uniform(derive_secret(self.seed, purpose, self.release), self._keys_here(),
                            math.prod(shape))
        return flat.reshape(len(self), *shape)

    def randint(self, purpose: str, high: int, *shape: int) -> torch.Tensor:
        """``int64 [B, *shape]`` draws in [0, high), row i a function of record i's key."""
        flat = keyed_randint(derive_secret(self.seed, purpose, self.release), self._keys_here(),
                             high, math.prod(shape))
        return flat.reshape(len(self), *shape)


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
