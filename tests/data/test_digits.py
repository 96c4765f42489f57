"""Tests of the bundled scikit-learn digits loader and its default splits."""

from __future__ import annotations

import time

import numpy as np
import pytest

from raydp_synth.data import load_dataset
from raydp_synth.data.digits import load_digits_raw
from raydp_synth.data.splits import split_dataset

N_DIGITS = 1797


@pytest.fixture(scope="module")
def raw():
    return load_digits_raw()


def test_raw_digits_shape_dtype_and_classes(raw) -> None:
    assert raw.images.shape == (N_DIGITS, 1, 8, 8)
    assert raw.images.dtype == np.uint8
    assert raw.labels.dtype == np.int64
    assert raw.images.min() == 0 and raw.images.max() == 255
    assert raw.class_names == tuple(str(d) for d in range(10))
    assert np.array_equal(np.unique(raw.labels), np.arange(10))
    assert raw.native_size == 8
    assert raw.predefined_test is None


def test_raw_digits_match_sklearn_load_digits(raw) -> None:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    expected = np.rint(bunch.images / 16 * 255).astype(np.uint8)
    assert np.array_equal(raw.images[:, 0], expected)
    assert np.array_equal(raw.labels, bunch.target)


def test_load_dataset_digits_defaults() -> None:
    splits = load_dataset("digits")
    parts = (splits.train, splits.val, splits.test)
    assert sum(len(p) for p in parts) == N_DIGITS
    # Per-record hashed split: sizes are Binomial(1797, 0.1) for val and test;
    # the exact values pin the seed-0 assignment so a change to it is noticed.
    assert [len(p) for p in parts] == [1442, 165, 190]
    for part in parts:
        assert part.image_shape == (1, 16, 16)
        assert part.images.dtype == np.float32
        assert part.labels.dtype == np.int64
        assert part.images.min() >= -1.0 and part.images.max() <= 1.0
        assert part.num_classes == 10
        assert part.name == "digits"
        assert part.public is False
    assert splits.train.images.min() == -1.0 and splits.train.images.max() == 1.0
    assert splits.class_names == tuple(str(d) for d in range(10))
    assert set(np.unique(splits.train.labels)) == set(range(10))


def test_digits_split_is_deterministic_per_seed() -> None:
    first = load_dataset("digits", seed=3)
    again = load_dataset("digits", seed=3)
    other = load_dataset("digits", seed=4)
    for name in ("train", "val", "test"):
        a, b = getattr(first, name), getattr(again, name)
        assert np.array_equal(a.images, b.images)
        assert np.array_equal(a.labels, b.labels)
    assert not np.array_equal(first.test.labels, other.test.labels)
    assert not np.array_equal(first.train.images, other.train.images)


def _rows(images: np.ndarray, labels: np.ndarray) -> list[bytes]:
    return sorted(img.tobytes() + bytes([lab]) for img, lab in zip(images, labels, strict=True))


def test_digits_splits_are_disjoint_and_cover_the_dataset(raw) -> None:
    # At native size (no resize) every split row maps back to a raw row exactly.
    splits = split_dataset(raw, image_size=8, seed=0, name="digits")
    pixels = []
    labels = []
    for part in (splits.train, splits.val, splits.test):
        pixels.append(np.rint((part.images + 1) / 2 * 255).astype(np.uint8))
        labels.append(part.labels)
    assert _rows(np.concatenate(pixels), np.concatenate(labels)) == _rows(raw.images, raw.labels)


def test_digits_load_and_split_is_fast() -> None:
    load_dataset("digits")  # warm imports and file cache
    start = time.perf_counter()
    load_dataset("digits")
    assert time.perf_counter() - start < 1.0
