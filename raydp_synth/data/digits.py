"""The scikit-learn bundled 8x8 handwritten digits (1797 real images, no download).

The data file ships inside the scikit-learn wheel. It is read directly with
numpy because importing :mod:`sklearn.datasets` costs more than a second;
``sklearn.datasets.load_digits`` is the fallback if the file ever moves.
"""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

import numpy as np

from raydp_synth.data.dataset import RawImages
from raydp_synth.errors import DataError

__all__ = ["load_digits_raw"]

_SOURCE = "sklearn.datasets.load_digits"
_MAX_VALUE = 16
_SIDE = 8


def _bundled_csv() -> Path | None:
    """Locate scikit-learn's ``digits.csv.gz`` without importing scikit-learn.

    Returns:
        The file's path, or ``None`` if it cannot be found.
    """
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        candidate = Path(root) / "datasets" / "data" / "digits.csv.gz"
        if candidate.is_file():
            return candidate
    return None


def _read_digits() -> tuple[np.ndarray, np.ndarray]:
    """Read the raw digits as values ``0..16``.

    Returns:
        ``(images, targets)``: ``float64 [N, 8, 8]`` in ``0..16`` and ``[N]``
        integer class labels ``0..9``.

    Raises:
        DataError: If scikit-learn is not installed.
    """
    path = _bundled_csv()
    if path is not None:
        with gzip.open(path, "rt") as handle:
            table = np.loadtxt(handle, delimiter=",")
        return table[:, :-1].reshape(-1, _SIDE, _SIDE), table[:, -1]
    try:
        from sklearn.datasets import load_digits
    except ImportError as exc:
        raise DataError(
            f"{_SOURCE}: scikit-learn is not installed; install scikit-learn to use the "
            "'digits' dataset"
        ) from exc
    bunch = load_digits()
    return np.asarray(bunch.images), np.asarray(bunch.target)


def load_digits_raw() -> RawImages:
    """Load scikit-learn's 8x8 digits as ``uint8`` images.

    Pixel values ``0..16`` are mapped to ``round(x / 16 * 255)``.

    Returns:
        ``RawImages`` with images ``uint8 [1797, 1, 8, 8]``, labels ``0..9``
        and class names ``"0"`` .. ``"9"``; no predefined test split.
    """
    values, targets = _read_digits()
    pixels = np.rint(values / _MAX_VALUE * 255.0).astype(np.uint8)
    return RawImages(
        images=pixels[:, np.newaxis, :, :],
        labels=targets.astype(np.int64),
        class_names=tuple(str(digit) for digit in range(10)),
        source=_SOURCE,
    )
