"""FID and the inception score: against reference formulas and on real data."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import linalg

from raydp_synth.data import load_dataset
from raydp_synth.evaluation.metrics import frechet_distance, inception_score
from raydp_synth.evaluation.report import feature_network


def _fid_scipy(a: np.ndarray, b: np.ndarray) -> float:
    """The usual FID code (pytorch-fid): scipy's general matrix square root."""
    mu_a, mu_b = a.mean(0), b.mean(0)
    s_a, s_b = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    covmean = linalg.sqrtm(s_a @ s_b).real
    return float(((mu_a - mu_b) ** 2).sum() + np.trace(s_a + s_b - 2 * covmean))


def test_frechet_distance_matches_scipy_reference() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(size=(500, 16))
    b = rng.normal(size=(400, 16)) @ rng.normal(size=(16, 16)) * 0.5 + 1.0
    assert frechet_distance(a, b) == pytest.approx(_fid_scipy(a, b), rel=1e-6)
    assert frechet_distance(a, a) == pytest.approx(0.0, abs=1e-8)


def test_frechet_distance_of_two_known_gaussians() -> None:
    # N(0, I) vs N(m, 4I) in d dims: |m|^2 + d (1 + 4 - 2*2) = |m|^2 + d.
    rng = np.random.default_rng(1)
    d, n = 4, 200_000
    a = rng.normal(size=(n, d))
    b = rng.normal(size=(n, d)) * 2 + 3
    assert frechet_distance(a, b) == pytest.approx(9 * d + d, rel=0.01)


def test_inception_score_bounds() -> None:
    k = 10
    assert inception_score(np.full((50, k), 1 / k)) == pytest.approx(1.0)
    confident_balanced = np.eye(k)[np.arange(100) % k]
    assert inception_score(confident_balanced) == pytest.approx(k, rel=1e-6)
    mode_collapse = np.eye(k)[np.zeros(100, int)]
    assert inception_score(mode_collapse) == pytest.approx(1.0, abs=1e-6)


@pytest.fixture(scope="module")
def digits_and_net():
    splits = load_dataset("digits", image_size=16)
    return splits, feature_network(splits.test, seed=0, steps=400)


def _noise(n: int) -> np.ndarray:
    return np.random.default_rng(0).uniform(-1, 1, size=(n, 1, 16, 16)).astype(np.float32)


@pytest.mark.slow
def test_inception_score_of_real_images_is_far_above_noise(digits_and_net) -> None:
    splits, net = digits_and_net
    real = inception_score(net.probabilities(splits.train.images))
    noise = inception_score(net.probabilities(_noise(len(splits.train))))
    assert real > 7.0 and noise < 3.0 and real > 3 * noise


@pytest.mark.slow
def test_fid_of_real_held_out_is_far_below_fid_of_noise(digits_and_net) -> None:
    splits, net = digits_and_net
    train, val = net.features(splits.train.images), net.features(splits.val.images)
    real = frechet_distance(train, val)
    noise = frechet_distance(train, net.features(_noise(len(splits.val))))
    assert real * 10 < noise
