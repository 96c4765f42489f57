"""Utility figures of a generator: CAS, FID and the inception score.

Choices (docs/architecture.md, section 5):

* **CAS** (classifier accuracy on synthetic data): a classifier of
  :mod:`~raydp_synth.evaluation.classifiers` trained only on synthetic images,
  tested on the real test split.
* **FID** is the Frechet distance between Gaussians fitted to features of the
  synthetic images and of the real test images. The features are the 128
  penultimate activations of an :class:`~raydp_synth.evaluation.classifiers.EvaluationCNN`
  trained on data that is *not* the sensitive training split: a dataset the user
  declared public, or else the held-out test split (for the embedded digits there
  is no other public digit data; the field's papers evaluate against the test
  split too). An ImageNet Inception network would need weights downloaded at run
  time and fits 8x8-32x32 grayscale digits poorly. FID values are therefore
  comparable between runs evaluated with the same feature network, not with
  published Inception-FIDs.
* **IS** is Schwabedal, Michel and Riontino 2020 eq. 8 with the same network as the
  classifier K: ``exp(mean_x KL(P(k|x) || P(k)))``, between 1 and the number of
  classes.

These figures read the test split (and public data): they are for the curator,
inside the trusted boundary, and never enter ``release/``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["frechet_distance", "gaussian_stats", "inception_score"]


def gaussian_stats(features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and (unbiased) covariance of features [N, D]."""
    features = np.asarray(features, dtype=np.float64)
    if features.ndim != 2 or len(features) < 2:
        raise ValueError(f"need at least two feature vectors [N, D], got shape {features.shape}")
    return features.mean(axis=0), np.cov(features, rowvar=False)


def _psd_sqrt(matrix: np.ndarray) -> np.ndarray:
    values, vectors = np.linalg.eigh((matrix + matrix.T) / 2)
    return (vectors * np.sqrt(np.clip(values, 0, None))) @ vectors.T


def frechet_distance(features_a: np.ndarray, features_b: np.ndarray) -> float:
    """``|mu_a - mu_b|^2 + tr(S_a + S_b - 2 (S_a S_b)^{1/2})`` of two feature sets.

    The trace of ``(S_a S_b)^{1/2}`` is computed as that of the symmetric PSD
    ``(S_a^{1/2} S_b S_a^{1/2})^{1/2}`` (same eigenvalues), which avoids the complex
    round-off of a general matrix square root.
    """
    mu_a, cov_a = gaussian_stats(features_a)
    mu_b, cov_b = gaussian_stats(features_b)
    root_a = _psd_sqrt(cov_a)
    cross = np.linalg.eigvalsh(root_a @ cov_b @ root_a)
    trace_cross = float(np.sqrt(np.clip(cross, 0, None)).sum())
    value = float(((mu_a - mu_b) ** 2).sum() + np.trace(cov_a) + np.trace(cov_b) - 2 * trace_cross)
    return max(value, 0.0)


def inception_score(probabilities: np.ndarray) -> float:
    """``exp(E_x KL(P(k|x) || P(k)))`` for class probabilities [N, K] (eq. 8)."""
    p = np.asarray(probabilities, dtype=np.float64)
    if p.ndim != 2 or len(p) == 0:
        raise ValueError(f"need class probabilities [N, K], got shape {p.shape}")
    p = np.clip(p, 1e-12, 1.0)
    marginal = p.mean(axis=0, keepdims=True)
    kl = (p * (np.log(p) - np.log(marginal))).sum(axis=1)
    return float(np.exp(kl.mean()))
