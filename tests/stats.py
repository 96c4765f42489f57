"""Statistical helpers: tolerances derived from the sample size, not guessed."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats


def std_interval(n: int, *, alpha: float = 1e-6) -> tuple[float, float]:
    """Two-sided (1 - alpha) interval of sample_std / true_std for n Gaussian draws.

    (n - 1) s^2 / sigma^2 ~ chi^2(n - 1).
    """
    lo = stats.chi2.ppf(alpha / 2, n - 1)
    hi = stats.chi2.ppf(1 - alpha / 2, n - 1)
    return math.sqrt(lo / (n - 1)), math.sqrt(hi / (n - 1))


def assert_gaussian_std(samples: np.ndarray, expected_std: float, *, alpha: float = 1e-6) -> None:
    """Assert that zero-mean samples have standard deviation ``expected_std``.

    The chi-square interval rejects a wrong scale: with n >= 10^4 draws it excludes
    any scale off by more than a few percent (e.g. a stray 1/sqrt(B) factor), and
    a Kolmogorov-Smirnov test rejects non-Gaussian noise.
    """
    samples = np.asarray(samples, dtype=np.float64).ravel()
    n = samples.size
    lo, hi = std_interval(n, alpha=alpha)
    ratio = math.sqrt(np.mean(samples**2)) / expected_std  # zero mean is known
    assert lo <= ratio <= hi, f"std ratio {ratio:.4f} outside [{lo:.4f}, {hi:.4f}] (n={n})"
    ks = stats.kstest(samples / expected_std, "norm")
    assert ks.pvalue > alpha, f"noise is not Gaussian: KS p={ks.pvalue:.2e}"
