"""Utility figures of a generator: CAS, FID, the inception score, precision/recall,
intra-class diversity.

Two feature spaces, reported under separate names (docs/architecture.md, section 5):

* **The field's figures** (``fid_inception``, ``is_inception``, ``precision``,
  ``recall``): the features of the FID Inception-v3 (:mod:`~raydp_synth.evaluation.inception`,
  torch-fidelity's port of TensorFlow's ``pt_inception-2015-12-05`` graph): FID on
  its 2048-d pool3 features (Heusel et al. 2017), IS on the softmax of its logits
  as Salimans et al. 2016 compute it (:func:`split_inception_score`), and improved
  precision/recall on the same pool3 features (:func:`precision_recall`). These are
  the numbers papers and DPImageBench compare.
* **The domain-CNN figures** (``fid_cnn``, ``is_cnn``, ``precision_cnn``,
  ``recall_cnn``, ``diversity_cnn``): the same formulas in the
  feature space of an :class:`~raydp_synth.evaluation.classifiers.EvaluationCNN`
  trained on data that is *not* the sensitive training split (a dataset the user
  declared public, or else the held-out test split). They need no downloaded
  weights, suit 8x8-32x32 grayscale images, and are what the privacy-utility curve
  tracks; they are comparable between runs evaluated with the same network, never
  with published Inception figures. The IS is then Schwabedal, Michel and Riontino
  2020 eq. 8 with the CNN as the classifier K (:func:`inception_score`), between 1
  and the number of classes. Two of them see what CAS cannot, a generator whose
  samples of a class all look alike: the recall (how much of the real distribution
  the samples cover) and the intra-class diversity (:func:`intra_class_diversity`).
* **CAS** (classifier accuracy on synthetic data): a classifier of
  :mod:`~raydp_synth.evaluation.classifiers` trained only on synthetic images,
  tested on the real test split.

These figures read the test split (and public data): they are for the curator,
inside the trusted boundary, and never enter ``release/``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["frechet_distance", "gaussian_stats", "inception_score", "intra_class_diversity",
           "precision_recall", "split_inception_score"]


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
    round-off of a general matrix square root. With fewer vectors than dimensions
    (e.g. a few hundred 2048-d Inception features) it is, exactly, the sum of the
    singular values of ``A B^T`` for the centred, scaled feature matrices (``S_a =
    A^T A``, ``S_b = B^T B``; ``S_a S_b`` and ``(A B^T)(A B^T)^T`` share their
    non-zero eigenvalues), which never forms a D x D matrix.
    """
    a, b = _feature_matrix(features_a), _feature_matrix(features_b)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"feature sets of different dimension: {a.shape} and {b.shape}")
    mean_term = float(((a.mean(axis=0) - b.mean(axis=0)) ** 2).sum())
    if max(len(a), len(b)) < a.shape[1]:
        trace_a, trace_b, trace_cross = _low_rank_traces(a, b)
    else:
        _, cov_a = gaussian_stats(a)
        _, cov_b = gaussian_stats(b)
        root_a = _psd_sqrt(cov_a)
        cross = np.linalg.eigvalsh(root_a @ cov_b @ root_a)
        trace_a, trace_b = float(np.trace(cov_a)), float(np.trace(cov_b))
        trace_cross = float(np.sqrt(np.clip(cross, 0, None)).sum())
    return max(mean_term + trace_a + trace_b - 2 * trace_cross, 0.0)


def _feature_matrix(features: np.ndarray) -> np.ndarray:
    features = np.asarray(features, dtype=np.float64)
    if features.ndim != 2 or len(features) < 2:
        raise ValueError(f"need at least two feature vectors [N, D], got shape {features.shape}")
    return features


def _low_rank_traces(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """``tr S_a``, ``tr S_b`` and ``tr (S_a S_b)^{1/2}`` from the N x D matrices."""
    centred_a = (a - a.mean(axis=0)) / np.sqrt(len(a) - 1)
    centred_b = (b - b.mean(axis=0)) / np.sqrt(len(b) - 1)
    singular = np.linalg.svd(centred_a @ centred_b.T, compute_uv=False)
    return float((centred_a**2).sum()), float((centred_b**2).sum()), float(singular.sum())


def inception_score(probabilities: np.ndarray) -> float:
    """``exp(E_x KL(P(k|x) || P(k)))`` for class probabilities [N, K] (eq. 8)."""
    p = np.asarray(probabilities, dtype=np.float64)
    if p.ndim != 2 or len(p) == 0:
        raise ValueError(f"need class probabilities [N, K], got shape {p.shape}")
    p = np.clip(p, 1e-12, 1.0)
    marginal = p.mean(axis=0, keepdims=True)
    kl = (p * (np.log(p) - np.log(marginal))).sum(axis=1)
    return float(np.exp(kl.mean()))


def split_inception_score(logits: np.ndarray, *, splits: int = 10,
                          shuffle_seed: int | None = 2020) -> float:
    """The inception score as the field reports it (Salimans et al. 2016, "Improved
    techniques for training GANs"): the samples split into ``splits`` parts, in each
    ``exp(E_x KL(p(y|x) || p(y)))`` with ``p(y)`` the part's mean, then the mean over
    the parts. ``p(y|x)`` is the softmax of ``logits`` [N, K].

    The order is first shuffled by ``numpy.random.RandomState(shuffle_seed)`` and the
    parts are ``[i N // splits, (i + 1) N // splits)``, as torch-fidelity's
    ``isc_features_to_metric`` does (its defaults: 10 splits, seed 2020), so the value
    is that library's ``inception_score_mean`` for the same logits. ``None``: no
    shuffle.
    """
    z = np.asarray(logits, dtype=np.float64)
    if z.ndim != 2 or len(z) < splits or splits < 1:
        raise ValueError(f"need logits [N, K] with N >= splits={splits}, got shape {z.shape}")
    if shuffle_seed is not None:
        z = z[np.random.RandomState(shuffle_seed).permutation(len(z))]
    log_p = z - z.max(axis=1, keepdims=True)
    log_p -= np.log(np.exp(log_p).sum(axis=1, keepdims=True))
    p = np.exp(log_p)
    n = len(z)
    scores = []
    for i in range(splits):
        part = slice(i * n // splits, (i + 1) * n // splits)
        log_marginal = np.log(p[part].mean(axis=0, keepdims=True))
        kl = (p[part] * (log_p[part] - log_marginal)).sum(axis=1)
        scores.append(np.exp(kl.mean()))
    return float(np.mean(scores))


def _squared_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    sq = (a**2).sum(axis=1)[:, None] + (b**2).sum(axis=1)[None, :] - 2 * a @ b.T
    return np.clip(sq, 0.0, None)


def _kth_neighbour_radii(points: np.ndarray, k: int, chunk: int) -> np.ndarray:
    """Squared distance of each point to its k-th nearest other point (the point
    itself, at distance 0, is the 0-th)."""
    radii = np.empty(len(points))
    for start in range(0, len(points), chunk):
        block = _squared_distances(points[start:start + chunk], points)
        radii[start:start + chunk] = np.partition(block, k, axis=1)[:, k]
    return radii


def _covered_fraction(points: np.ndarray, centres: np.ndarray, radii: np.ndarray,
                      chunk: int) -> float:
    """The fraction of ``points`` inside at least one ball (centre, radius)."""
    inside = 0
    for start in range(0, len(points), chunk):
        block = _squared_distances(points[start:start + chunk], centres)
        inside += int((block <= radii[None, :]).any(axis=1).sum())
    return inside / len(points)


def precision_recall(real: np.ndarray, synthetic: np.ndarray, *, k: int = 3,
                     chunk: int = 1024) -> tuple[float, float]:
    """Improved precision and recall (Kynkaanniemi, Karras, Laine, Lehtinen and Aila
    2019, "Improved precision and recall metric for assessing generative models").

    Each set's manifold is the union of balls around its points, of radius the
    distance to the point's ``k``-th nearest neighbour in the same set (k = 3, the
    paper's choice). Precision is the fraction of synthetic points inside the real
    manifold (how many samples look real), recall the fraction of real points inside
    the synthetic manifold (how much of the real distribution the samples cover). A
    point on a ball's boundary counts as inside, as in torch-fidelity's
    ``calculate_precision_recall_full``. Distances are computed in float64, ``chunk``
    rows at a time (memory ``chunk * N`` floats).

    Returns:
        ``(precision, recall)``, each in [0, 1].
    """
    real = np.asarray(real, dtype=np.float64)
    synthetic = np.asarray(synthetic, dtype=np.float64)
    if real.ndim != 2 or synthetic.ndim != 2 or real.shape[1] != synthetic.shape[1]:
        raise ValueError(f"need two feature sets [N, D] of the same D, got shapes {real.shape} "
                         f"and {synthetic.shape}")
    if min(len(real), len(synthetic)) <= k:
        raise ValueError(f"need more than k={k} points in each set, got {len(real)} real and "
                         f"{len(synthetic)} synthetic")
    real_radii = _kth_neighbour_radii(real, k, chunk)
    synthetic_radii = _kth_neighbour_radii(synthetic, k, chunk)
    precision = _covered_fraction(synthetic, real, real_radii, chunk)
    recall = _covered_fraction(real, synthetic, synthetic_radii, chunk)
    return precision, recall


def intra_class_diversity(real: np.ndarray, real_labels: np.ndarray, synthetic: np.ndarray,
                          synthetic_labels: np.ndarray, *, per_class: int = 1000,
                          seed: int = 0) -> float:
    """How varied a generator's samples of one class are, against the real images of
    that class: per class, the mean distance between two different synthetic feature
    vectors of it over that between two different real ones, then the mean over the
    classes that have at least two of each.

    1 is as varied as the real data; a generator that draws one image per class (mode
    collapse within the class, which CAS does not see: one clean image per class can
    train a good classifier) scores 0. A class's mean pairwise distance estimates the
    expected distance of two independent draws, whatever the sample count, so the two
    sides need not be the same size; each class is estimated on at most ``per_class``
    points of each side (a seeded subset), ``per_class^2`` distances a class.

    Args:
        real, synthetic: feature vectors [N, D] (the same D).
        real_labels, synthetic_labels: their class labels [N].

    Returns:
        The mean ratio over the classes, >= 0 (above 1 where the samples are more
        spread than the real data, e.g. noise).

    Raises:
        ValueError: on mismatched shapes, or when no class has two points of each side.
    """
    real, synthetic = _feature_matrix(real), _feature_matrix(synthetic)
    real_labels, synthetic_labels = np.asarray(real_labels), np.asarray(synthetic_labels)
    if real.shape[1] != synthetic.shape[1] or len(real) != len(real_labels) \
            or len(synthetic) != len(synthetic_labels):
        raise ValueError(f"need features [N, D] of the same D with one label each, got "
                         f"{real.shape} with {real_labels.shape} labels and {synthetic.shape} "
                         f"with {synthetic_labels.shape}")
    rng = np.random.default_rng(seed)
    ratios = []
    for label in np.unique(real_labels):
        sides = []
        for points in (synthetic[synthetic_labels == label], real[real_labels == label]):
            if len(points) > per_class:
                points = points[np.sort(rng.choice(len(points), per_class, replace=False))]
            sides.append(points)
        if min(len(side) for side in sides) < 2:
            continue
        synthetic_spread, real_spread = (_mean_pairwise_distance(side) for side in sides)
        if real_spread > 0:
            ratios.append(synthetic_spread / real_spread)
    if not ratios:
        raise ValueError("no class has two real and two synthetic points: nothing to compare")
    return float(np.mean(ratios))


def _mean_pairwise_distance(points: np.ndarray) -> float:
    """Mean Euclidean distance over the pairs of different points."""
    n = len(points)
    distances = np.sqrt(_squared_distances(points, points))
    return float((distances.sum() - np.trace(distances)) / (n * (n - 1)))
