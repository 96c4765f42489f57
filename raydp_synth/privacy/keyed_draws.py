"""Per-record secret draws as a keyed function, computed for a whole batch at once on
its device: Threefry-4x64-20 (Salmon, Moraes, Dror and Shaw 2011, "Parallel random
numbers: as easy as 1, 2, 3").

A loop gives record i draws of its own (a synthetic partner's latent, a mixing
coefficient, a diffusion timestep and its noise) that must be a function of (a secret,
the purpose, the release, record i's key) alone (:mod:`~raydp_synth.privacy.records`
states the privacy argument). A counter-based generator is exactly that function:
``block(key, counter)`` with the 256-bit key the mechanism's secret for this purpose
and release (:func:`~raydp_synth.privacy.secret_rng.derive_secret`) and the counter
(record key, block index, 0, 0). Every record's blocks are computed in one pass of
tensor arithmetic (add, rotate, xor on int64) on the batch's device: no generator is
built per record (25-35 us each on the host, and a host-to-device copy per batch),
no host synchronisation, and a shape fixed by the batch's, so a captured step can
hold it.

Threefry-4x64-20 has a 256-bit key: the key is every bit of the derived secret, so
the draws keep the secret's entropy (design invariant 14: no 32- or 64-bit seed in
the path). Its rounds are the Threefish-256 block cipher's, without the tweak; the
implementation is checked against the published known-answer vectors of the
authors' Random123 library (``tests/privacy/test_keyed_draws.py``).

Conversion: each 64-bit word gives two 24-bit uniforms (its two 32-bit halves' top
24 bits), i.e. float32's resolution on [0, 1); normals are Box-Muller pairs, so
``|z| <= sqrt(2 ln 2**24) = 5.77``; integers below ``high`` are a 62-bit word modulo
``high`` (bias at most ``high / 2**62``). These laws matter for utility only: the
privacy argument needs the draws to be a data-independent function of the key, not
any particular law.
"""

from __future__ import annotations

import math

import torch

__all__ = ["keyed_normal", "keyed_randint", "keyed_uniform", "threefry4x64"]

#: Threefry-4x64's rotation constants, round r uses row r mod 8 (Random123, Skein).
_ROTATIONS = ((14, 16), (52, 57), (23, 40), (5, 37), (25, 33), (46, 12), (58, 22), (32, 32))
_PARITY = 0x1BD11BDAA9FC1A22
_ROUNDS = 20
_MASK64 = (1 << 64) - 1
_UNIFORMS_PER_BLOCK = 8  # 4 words x 2 halves
_INV_2_24 = 1.0 / (1 << 24)


def _signed(word: int) -> int:
    """An unsigned 64-bit word as the int64 with the same bits."""
    word &= _MASK64
    return word - (1 << 64) if word >= 1 << 63 else word


def _rotl(x: torch.Tensor, r: int) -> torch.Tensor:
    """Rotate each int64 of ``x`` left by ``r`` bits (``>>`` is arithmetic on int64:
    the mask keeps the bits that wrap around)."""
    return (x << r) | ((x >> (64 - r)) & ((1 << r) - 1))


def threefry4x64(counter: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
                 key: tuple[int, int, int, int]) -> list[torch.Tensor]:
    """Threefry-4x64-20 of ``counter`` (four int64 tensors of one shape, the words'
    bits) under ``key`` (four unsigned 64-bit words): four int64 tensors, the output
    words' bits. Additions wrap modulo 2**64 (two's complement int64)."""
    ks = [*(k & _MASK64 for k in key), 0]
    ks[4] = _PARITY ^ ks[0] ^ ks[1] ^ ks[2] ^ ks[3]
    schedule = [_signed(k) for k in ks]
    x = [counter[j] + schedule[j] for j in range(4)]
    for r in range(_ROUNDS):
        r0, r1 = _ROTATIONS[r % 8]
        if r % 2 == 0:
            x[0] = x[0] + x[1]
            x[1] = _rotl(x[1], r0) ^ x[0]
            x[2] = x[2] + x[3]
            x[3] = _rotl(x[3], r1) ^ x[2]
        else:
            x[0] = x[0] + x[3]
            x[3] = _rotl(x[3], r0) ^ x[0]
            x[2] = x[2] + x[1]
            x[1] = _rotl(x[1], r1) ^ x[2]
        if r % 4 == 3:  # key injection s = (r + 1) / 4
            s = (r + 1) // 4
            x = [x[j] + schedule[(s + j) % 5] for j in range(4)]
            x[3] = x[3] + s
    return x


def _key_words(secret: int) -> tuple[int, int, int, int]:
    if secret < 0:
        raise ValueError("a secret is a non-negative integer")  # never echo a secret
    if secret.bit_length() > 256:
        raise ValueError("a Threefry-4x64 key holds 256 bits; derive the secret first")
    return (secret & _MASK64, (secret >> 64) & _MASK64, (secret >> 128) & _MASK64,
            (secret >> 192) & _MASK64)


def _words(secret: int, records: torch.Tensor, blocks: int) -> torch.Tensor:
    """``int64 [B, 4 * blocks]``: record i's first ``blocks`` output blocks, counter
    (records[i], j, 0, 0) for block j."""
    rows = records.to(torch.int64).reshape(-1, 1)
    index = torch.arange(blocks, dtype=torch.int64, device=rows.device).reshape(1, -1)
    rows, index = torch.broadcast_tensors(rows, index)
    zero = torch.zeros_like(rows)
    out = threefry4x64((rows, index, zero, zero), _key_words(secret))
    return torch.stack(out, dim=-1).reshape(rows.shape[0], 4 * blocks)


def keyed_uniform(secret: int, records: torch.Tensor, count: int) -> torch.Tensor:
    """``float32 [B, count]`` uniform on [0, 1) in steps of 2**-24: row i a function of
    ``(secret, records[i])`` alone, on ``records``' device."""
    blocks = max(1, math.ceil(count / _UNIFORMS_PER_BLOCK))
    words = _words(secret, records, blocks)
    halves = torch.stack([(words >> 40) & 0xFFFFFF, (words >> 8) & 0xFFFFFF], dim=-1)
    return (halves.reshape(words.shape[0], 8 * blocks)[:, :count].to(torch.float32)
            * _INV_2_24)


def keyed_normal(secret: int, records: torch.Tensor, count: int) -> torch.Tensor:
    """``float32 [B, count]`` standard normal (Box-Muller on :func:`keyed_uniform`'s
    pairs; the first uniform of a pair is taken in (0, 1] so its logarithm is finite)."""
    pairs = math.ceil(count / 2)
    u = keyed_uniform(secret, records, 2 * pairs).reshape(records.numel(), pairs, 2)
    radius = torch.sqrt(-2.0 * torch.log(1.0 - u[..., 0]))
    angle = (2.0 * math.pi) * u[..., 1]
    z = torch.stack([radius * torch.cos(angle), radius * torch.sin(angle)], dim=-1)
    return z.reshape(u.shape[0], 2 * pairs)[:, :count]


def keyed_randint(secret: int, records: torch.Tensor, high: int, count: int) -> torch.Tensor:
    """``int64 [B, count]`` in [0, high): a 62-bit word of record i's blocks modulo
    ``high`` (bias at most high / 2**62)."""
    if not 0 < high <= 1 << 31:
        raise ValueError(f"Expected 0 < high={high} <= 2**31.")
    blocks = max(1, math.ceil(count / 4))
    words = _words(secret, records, blocks)[:, :count]
    return ((words >> 2) & ((1 << 62) - 1)) % high
