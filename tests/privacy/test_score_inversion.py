"""The audit's score-inversion attack (2026-11-27, architecture invariant 14; issue 42's
acceptance item: "enumerating 2**20 seeds around the true one recovers nothing").

A released score v = (count + noise) / m is exact. With the old construction, noise =
sigma * randn from ``torch.Generator().manual_seed(derived_seed(dp_seed, ...))``,
whose stream depends on 32 bits only: an attacker enumerates seeds, and the one
candidate for which v * m - sigma * z is an integer gives the count exactly. The new
release adds discrete Gaussian noise from ``secrets.SystemRandom`` (a trial's DP
secret is 256 bits from ``fresh_secret``, and the score does not use it at all).

The attack runs on both releases with the same candidates: seeds in a window around
the true 32-bit torch seed of the trial's secret (an attacker who knows that much is
stronger than the audit's). The old release gives the count back from exactly one
candidate (the control: the harness does find what is there); the new one gives
nothing: no candidate leaves an integer, and a seeded integer source per candidate
(the new construction with guessed seeds) spreads the recovered counts over the
discrete Gaussian's range instead of singling out the true one.
"""

from __future__ import annotations

import random
import secrets

import numpy as np
import pytest
import torch

from raydp_synth.privacy.plan import Mechanism
from raydp_synth.privacy.records import derived_seed
from raydp_synth.privacy.secret_rng import fresh_secret
from raydp_synth.privacy.selection_score import (
    SELECTION_SCORE,
    release_score,
    score_noise_source,
)

SIGMA = 5.0  # a score std of 0.03 on 165 records, DEFAULT_SCORE_SHARE's regime
M = 165
COUNT = 121
LABELS = np.arange(M) % 10
PREDICTED = np.where(np.arange(M) < COUNT, LABELS, (LABELS + 1) % 10)
TOLERANCE = 1e-9  # a recovered count this close to an integer "matches" (float rounding ~1e-13)
MECHANISM = Mechanism(name=SELECTION_SCORE, noise_multiplier=SIGMA, sample_rate=None,
                      num_steps=1, sensitivity=1.0)


def _old_normals(seeds: range) -> np.ndarray:
    """randn of ``torch.Generator().manual_seed(s)`` for every candidate s."""
    generator = torch.Generator()
    out = np.empty(len(seeds))
    for i, s in enumerate(seeds):
        generator.manual_seed(s)
        out[i] = torch.randn((), generator=generator, dtype=torch.float64).item()
    return out


def _recovered(value: float, noises: np.ndarray) -> np.ndarray:
    """The counts the candidates' noises give back from ``value``: those that leave an
    integer in [0, M]."""
    counts = value * M - noises
    nearest = np.round(counts)
    match = (np.abs(counts - nearest) < TOLERANCE) & (nearest >= 0) & (nearest <= M)
    return nearest[match].astype(np.int64)


@pytest.mark.parametrize("window", [
    2**14,
    pytest.param(2**20, marks=pytest.mark.slow),  # ~10-25 s: 2**20 torch generators
])
def test_seed_enumeration_inverts_the_old_score_and_recovers_nothing_from_the_new(window):
    assert int((PREDICTED == LABELS).sum()) == COUNT
    secret = fresh_secret()  # a trial's DP secret (256 bits)
    torch_seed = derived_seed(secret, "selection_score")
    true32 = torch_seed % 2**32
    start = max(0, true32 - secrets.randbelow(window))
    candidates = range(start, start + window)
    assert true32 in candidates
    noises = SIGMA * _old_normals(candidates)

    # the old construction: torch keeps the seed's low 32 bits, so the window holds it
    old_gen = torch.Generator().manual_seed(torch_seed)
    old_value = (COUNT + SIGMA * torch.randn((), generator=old_gen, dtype=torch.float64).item()) / M
    assert _old_normals(range(true32, true32 + 1))[0] * SIGMA == pytest.approx(
        old_value * M - COUNT, abs=1e-9)
    assert list(_recovered(old_value, noises)) == [COUNT]  # the control: found, uniquely

    # the release path now: discrete noise from the OS's generator
    new = release_score(PREDICTED, LABELS, mechanism=MECHANISM, public=False,
                        noise_source=score_noise_source(None), classifier="logreg")
    assert len(_recovered(new.value, noises)) == 0


def test_guessed_seeds_of_the_new_construction_single_out_no_count():
    """Every seeded integer source leaves an integer (the noise is one), so matching
    says nothing; the counts 2**10 guessed seeds give back spread like
    count + N_Z(0, sigma^2) - N_Z(0, sigma^2), the true one no likelier than its
    neighbours."""
    new = release_score(PREDICTED, LABELS, mechanism=MECHANISM, public=False,
                        noise_source=score_noise_source(None), classifier="logreg")
    released = round(new.value * M)
    guess = secrets.randbits(64)
    counts = []
    for seed in range(guess, guess + 2**10):
        source = score_noise_source(seed)
        counts.append(released - (round(release_score(
            PREDICTED, LABELS, mechanism=MECHANISM, public=False, noise_source=source,
            classifier="logreg").value * M) - COUNT))
    values, freq = np.unique(counts, return_counts=True)
    assert len(values) >= 15  # sigma*sqrt(2) ~ 7: dozens of counts
    assert freq.max() / len(counts) < 0.12  # the largest mass of N_Z(0, 2 sigma^2) is ~0.06
    # a seeded source is not the release's: only a --dp-seed run uses one
    assert isinstance(score_noise_source(None), random.SystemRandom)
