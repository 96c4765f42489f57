"""Secret randomness with the entropy it claims: the one place that makes a secret
random source.

Every draw that a DP guarantee assumes hidden comes from here: Poisson inclusion
draws, per-record draws (a partner latent, a diffusion timestep), the DP noise on the
CPU or on a GPU, and the selection score's noise. A secret is an integer of
:data:`SECRET_BITS` bits from the OS (:func:`fresh_secret`); the sources of a run are
derived from it by hashing (:func:`derive_secret`), and each generator's *whole*
state is expanded from its secret (:func:`secret_generator`).

Why not ``torch.Generator().manual_seed(s)``: torch's CPU generator is an MT19937
seeded from one 32-bit word, ``s mod 2**32``. Whatever entropy ``s`` had, its stream
is one of 2**32, and an exactly released noisy number (the selection score,
``(count + sigma z) / m``) then gives back the exact count by enumerating seeds
(found by audit, 2026-11-27). Here:

* **CPU** (MT19937, 19,968 bits of state): the 624 state words are SHAKE-256 of the
  secret, written with ``Generator.set_state``; ``initial_seed()`` reads 0. An
  enumeration must cover the secret's 256 bits.
* **CUDA** (Philox-4x32-10): the state torch exposes is a 64-bit key and a 64-bit
  counter offset, which must be a multiple of 4. Both are SHAKE-256 of the secret, so
  the stream is one of 2**126 (key times offset). That is below the 128 bits the rest
  of the package gives, and cannot be raised without a second stream per draw; it
  suffices because the attack it must resist is an enumeration of streams against one
  released number (the score, which no longer uses a torch generator at all:
  :mod:`~raydp_synth.privacy.discrete_gaussian`) or against a noised sum of a whole
  model's gradients, and 2**126 trials is out of reach of any computation (2**32 took
  minutes; 2**126 is 2**94 times that).
* **Integers** (:func:`secret_integers`): ``secrets.SystemRandom`` (the OS's
  generator, read at every draw) for an exact discrete release.

A seed given by the user (``--dp-seed``, tests) goes through the same functions, so a
reproducibility run draws exactly as a real one would from that secret; such a run is
not a DP release (its "secret" is known) and says so.

Nothing here writes a secret or a generator's state anywhere; callers keep secrets in
memory only (``docs/privacy.md``, "Secrets and their entropy"). A static test
(``tests/privacy/test_secret_rng.py``) fails if a generator that draws secret values is
made anywhere else in the package.
"""

from __future__ import annotations

import functools
import hashlib
import random
import secrets
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

__all__ = [
    "SECRET_BITS",
    "derive_secret",
    "fresh_secret",
    "secret_generator",
    "secret_integers",
    "secret_numpy_rng",
    "secret_seed_words",
]

#: Bits of a secret drawn from the OS, and of every secret derived from one.
SECRET_BITS = 256

_MT_WORDS = 624  # MT19937's state: 624 32-bit words
_MT_STATE_OFFSET = 24  # torch's CPU state: u64 initial seed, i32 left, i32 seeded, u64 next


def fresh_secret() -> int:
    """A new secret: :data:`SECRET_BITS` bits from the OS (``secrets``)."""
    return secrets.randbits(SECRET_BITS)


def derive_secret(secret: int, *purpose: object) -> int:
    """A :data:`SECRET_BITS`-bit secret for one purpose (e.g. ``"noise", rank``),
    derived from ``secret`` by SHA-256: sources of different purposes are independent
    streams, and knowing one derived secret tells nothing of another."""
    if secret < 0:
        raise ValueError("a secret is a non-negative integer")  # never echo a secret
    digest = hashlib.sha256(repr(("raydp-synth secret", secret, *purpose)).encode()).digest()
    return int.from_bytes(digest, "big")


def _expand(secret: int, what: bytes, size: int) -> bytes:
    if secret < 0:
        raise ValueError("a secret is a non-negative integer")  # never echo a secret
    width = max(1, (secret.bit_length() + 7) // 8)
    return hashlib.shake_256(b"raydp-synth " + what + b"\0" + secret.to_bytes(width, "big")
                             ).digest(size)


def secret_generator(secret: int, *, device: torch.device | str = "cpu") -> torch.Generator:
    """A ``torch.Generator`` on ``device`` whose whole state is expanded from
    ``secret`` (every bit of it counts; see the module docstring for CUDA's 126).

    Args:
        secret: a secret from :func:`fresh_secret` or :func:`derive_secret` (or a
            user's reproducibility seed).
        device: ``"cpu"`` or a CUDA device.
    """
    import torch  # lazy: the ledger's readers (budget, the accountant) need no torch

    device = torch.device(device)
    generator = torch.Generator(device=device)
    if device.type == "cuda":
        words = np.frombuffer(_expand(secret, b"philox", 16), dtype="<u8")
        key, offset = int(words[0]), int(words[1]) & ~3  # the offset: a multiple of 4
        state = np.array([key, offset], dtype="<u8").view(np.uint8)
        generator.set_state(torch.from_numpy(state.copy()))
        return generator
    if device.type != "cpu":
        raise ValueError(f"no secret generator for device {device}")
    state = np.frombuffer(_cpu_state_template(), dtype=np.uint8).copy()
    words = np.frombuffer(_expand(secret, b"mt19937", 4 * _MT_WORDS), dtype="<u4")
    state[_MT_STATE_OFFSET:_MT_STATE_OFFSET + 8 * _MT_WORDS].view("<u8")[:] = words
    generator.set_state(torch.from_numpy(state))  # copied into the engine
    return generator


@functools.cache
def _cpu_state_template() -> bytes:
    """torch's CPU generator state with its header set for :func:`secret_generator`:
    initial seed 0 (nothing to read back), left 1 (the first draw twists the whole
    state), seeded, next 0; its 624 words are overwritten per secret. A public
    constant (no secret), made once per process on first use."""
    import torch  # lazy: see secret_generator

    generator = torch.Generator()
    generator.manual_seed(0)  # a valid state: sizes and flags as this torch wants them
    state = bytearray(generator.get_state().numpy().tobytes())
    state[:_MT_STATE_OFFSET] = (np.array([0], "<u8").tobytes() + np.array([1, 1], "<i4").tobytes()
                                + np.array([0], "<u8").tobytes())
    return bytes(state)



def secret_integers(seed: int | None = None) -> random.Random:
    """A source of uniform integers for an exact discrete release.

    ``None`` (every DP release): ``secrets.SystemRandom``, which reads the OS's
    generator at every draw and has no state to recover. A ``seed`` (a
    reproducibility run only: its secret is known, so it is no DP release): a
    ``random.Random`` whose MT19937 state is expanded from every bit of
    :func:`derive_secret` of the seed.
    """
    if seed is None:
        return secrets.SystemRandom()
    return random.Random(derive_secret(seed, "integers"))


def secret_numpy_rng() -> np.random.Generator:
    """A numpy generator (PCG64) seeded with :data:`SECRET_BITS` bits from the OS:
    random stopping's trial count K, subsampled tuning's secret subset."""
    return np.random.default_rng(fresh_secret())


def secret_seed_words(count: int = 4) -> list[int]:
    """``count`` 32-bit words from the OS (4: 128 bits), the seed of a secret search
    sampler (Optuna's ``RandomSampler`` and ours seed an MT19937 or a SeedSequence from
    every word; one int would be cut to 32 bits)."""
    if count < 4:
        raise ValueError(f"a secret sampler seed needs at least 4 words (128 bits), got {count}")
    return [secrets.randbits(32) for _ in range(count)]
