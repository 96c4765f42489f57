"""Deterministic train/validation/test splitting of decoded images.

The split is a seeded random permutation (``numpy.random.default_rng(seed)``):
the first ``round(N * test_fraction)`` permuted images are the test split, the
next ``round(N * val_fraction)`` the validation split and the rest the training
split. If the source has its own test split (IDX ``t10k`` files) it is used as
is and only the validation split is carved from the training images. Every
split is then resized and scaled to ``[-1, 1]``.
"""

from __future__ import annotations

import numpy as np

from raydp_synth.data.dataset import DatasetSplits, ImageDataset, RawImages
from raydp_synth.data.transforms import check_image_size, resize_uint8, to_unit_range
from raydp_synth.errors import DataError

__all__ = ["split_dataset"]


def _check_fraction(value: object, *, what: str) -> float:
    """Validate a split fraction.

    Args:
        value: The candidate fraction.
        what: The parameter name, for the error message.

    Returns:
        The fraction as a ``float``.

    Raises:
        DataError: If the value is not a number strictly between 0 and 1.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)):
        raise DataError(f"{what} must be a number between 0 and 1, got {value!r}; pass e.g. 0.1")
    fraction = float(value)
    if not 0.0 < fraction < 1.0:
        raise DataError(f"{what} must be strictly between 0 and 1, got {value!r}; pass e.g. 0.1")
    return fraction


def _split_size(total: int, fraction: float, *, split: str, what: str, source: str) -> int:
    """Return ``round(total * fraction)``, refusing an empty split.

    Args:
        total: Number of images being split.
        fraction: Fraction of them for this split.
        split: The split's name (``"val"`` or ``"test"``).
        what: The fraction parameter's name.
        source: Names the dataset in error messages.

    Returns:
        The split's size (at least 1).

    Raises:
        DataError: If the split would be empty.
    """
    size = int(round(total * fraction))
    if size < 1:
        raise DataError(
            f"{source}: {split} split would be empty ({total} images x {what}={fraction}); "
            f"add more images or raise {what}"
        )
    return size


def _make_split(
    images: np.ndarray,
    labels: np.ndarray,
    *,
    image_size: int,
    num_classes: int,
    name: str,
    public: bool,
) -> ImageDataset:
    """Resize, scale and wrap one split.

    Args:
        images: ``uint8 [n, C, H, W]`` images of the split.
        labels: ``int64 [n]`` labels of the split.
        image_size: Target side length.
        num_classes: Number of classes of the whole dataset.
        name: Dataset name.
        public: Whether the user declared the dataset public.

    Returns:
        The model-ready split.
    """
    return ImageDataset(
        images=to_unit_range(resize_uint8(images, image_size)),
        labels=np.ascontiguousarray(labels, dtype=np.int64),
        num_classes=num_classes,
        name=name,
        public=public,
    )


def split_dataset(
    raw: RawImages,
    *,
    image_size: int,
    seed: int = 0,
    val_fraction: float = 0.1,
    test_fraction: float = 0.1,
    public: bool = False,
    name: str,
) -> DatasetSplits:
    """Split decoded images into resized train/validation/test datasets.

    Args:
        raw: The decoded images.
        image_size: Side length every split is resized to.
        seed: Seed of the permutation; equal seeds give equal splits.
        val_fraction: Fraction of the (non-test) images used for validation.
        test_fraction: Fraction of the images used for testing; ignored when
            ``raw.predefined_test`` is set.
        public: Whether the user declared the dataset public.
        name: Dataset name given to every split (e.g. the spec string).

    Returns:
        The three splits and the class names.

    Raises:
        DataError: If the dataset is empty, a fraction or the image size is
            invalid, any split would be empty, or a class has no training
            samples.
    """
    source = raw.source
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise DataError(f"seed must be a non-negative integer, got {seed!r}; pass e.g. 0")
    size = check_image_size(image_size)
    if len(raw) == 0:
        raise DataError(f"{source}: dataset is empty; add images before splitting")
    val_frac = _check_fraction(val_fraction, what="val_fraction")
    rng = np.random.default_rng(int(seed))
    total = len(raw)
    order = rng.permutation(total)

    if raw.predefined_test is not None:
        test_images, test_labels = raw.predefined_test
        if test_images.shape[0] == 0:
            raise DataError(f"{source}: predefined test split is empty; add test images or drop it")
        n_val = _split_size(total, val_frac, split="val", what="val_fraction", source=source)
        val_idx, train_idx = order[:n_val], order[n_val:]
    else:
        test_frac = _check_fraction(test_fraction, what="test_fraction")
        n_test = _split_size(total, test_frac, split="test", what="test_fraction", source=source)
        n_val = _split_size(total, val_frac, split="val", what="val_fraction", source=source)
        test_idx, val_idx, train_idx = (
            order[:n_test],
            order[n_test : n_test + n_val],
            order[n_test + n_val :],
        )
        test_images, test_labels = raw.images[test_idx], raw.labels[test_idx]
    if train_idx.size == 0:
        raise DataError(
            f"{source}: train split would be empty ({total} images); add more images or "
            "lower val_fraction/test_fraction"
        )

    train_labels = raw.labels[train_idx]
    counts = np.bincount(train_labels, minlength=len(raw.class_names))
    missing = np.flatnonzero(counts == 0)
    if missing.size:
        cls = raw.class_names[int(missing[0])]
        raise DataError(
            f"{source}: class {cls!r} has no training samples after the split; "
            f"add more samples of class {cls!r} or merge it with another class"
        )

    def make(images: np.ndarray, labels: np.ndarray) -> ImageDataset:
        return _make_split(
            images,
            labels,
            image_size=size,
            num_classes=len(raw.class_names),
            name=name,
            public=public,
        )

    return DatasetSplits(
        train=make(raw.images[train_idx], train_labels),
        val=make(raw.images[val_idx], raw.labels[val_idx]),
        test=make(test_images, test_labels),
        class_names=raw.class_names,
    )
