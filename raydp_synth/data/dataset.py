"""In-memory dataset containers: decoded raw images and model-ready splits.

Three containers, all frozen keyword-only dataclasses that validate themselves:

* :class:`RawImages` -- decoded but not resized ``uint8`` images as a loader
  returns them, plus the source's own test split when it has one.
* :class:`ImageDataset` -- one model-ready split: ``float32`` images in
  ``[-1, 1]`` and ``int64`` labels.
* :class:`DatasetSplits` -- the train/validation/test triple and class names.

The dataclasses are frozen but the numpy arrays inside them are not copied or
made read-only; treat them as read-only by convention. Equality is identity
(``eq=False``) because element-wise array comparison has no single truth value.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from raydp_synth.errors import DataError

__all__ = ["DatasetSplits", "ImageDataset", "RawImages"]

_CHANNELS = (1, 3)


def _check_labels(labels: object, *, count: int, num_classes: int, what: str) -> None:
    """Validate a label vector against an image count and a class count.

    Args:
        labels: The candidate label array.
        count: Number of images the labels must match.
        num_classes: Labels must lie in ``[0, num_classes)``.
        what: Names the owner in error messages (dataset name or source).

    Raises:
        DataError: If the labels are not a 1-D ``int64`` array of ``count``
            values in ``[0, num_classes)``.
    """
    if not isinstance(labels, np.ndarray) or labels.dtype != np.int64 or labels.ndim != 1:
        desc = _describe(labels)
        raise DataError(
            f"{what}: labels must be a 1-D int64 numpy array, got {desc}; "
            "convert them with np.asarray(labels, dtype=np.int64)"
        )
    if labels.shape[0] != count:
        raise DataError(
            f"{what}: {count} images but {labels.shape[0]} labels; pass exactly one label per image"
        )
    if count and (int(labels.min()) < 0 or int(labels.max()) >= num_classes):
        raise DataError(
            f"{what}: labels range over [{int(labels.min())}, {int(labels.max())}] but must "
            f"lie in [0, {num_classes}); renumber the classes as 0..{num_classes - 1}"
        )


def _describe(value: object) -> str:
    """Return a short description of an array-like for error messages.

    Args:
        value: Any object.

    Returns:
        ``"<dtype> array of shape (...)"`` for arrays, else the type name.
    """
    if isinstance(value, np.ndarray):
        return f"{value.dtype} array of shape {value.shape}"
    return type(value).__name__


def _check_uint8_images(images: object, *, what: str) -> tuple[int, int, int]:
    """Validate a ``uint8 [N, C, H, W]`` image array.

    Args:
        images: The candidate image array.
        what: Names the owner in error messages.

    Returns:
        The per-image shape ``(C, H, W)``.

    Raises:
        DataError: If the array is not ``uint8`` 4-D with 1 or 3 channels and
            positive height and width.
    """
    return _image_shape(images, dtype=np.uint8, what=what,
                        fix="decode them to 8-bit pixels first")


def _image_shape(images: object, *, dtype: type, what: str, fix: str) -> tuple[int, int, int]:
    """``(C, H, W)`` of a ``dtype [N, C, H, W]`` array with 1 or 3 channels; ``fix``
    says how to get such an array."""
    if not isinstance(images, np.ndarray) or images.dtype != dtype or images.ndim != 4:
        raise DataError(
            f"{what}: images must be a {np.dtype(dtype).name} numpy array of shape "
            f"[N, C, H, W], got {_describe(images)}; {fix}"
        )
    _, c, h, w = images.shape
    if c not in _CHANNELS or h < 1 or w < 1:
        raise DataError(
            f"{what}: images have shape [C, H, W] = {[c, h, w]}; need 1 (grayscale) or "
            "3 (RGB) channels and a positive height and width"
        )
    return (c, h, w)


@dataclass(frozen=True, kw_only=True, eq=False)
class RawImages:
    """Decoded, not yet resized images as a loader returns them.

    Attributes:
        images: ``uint8`` array ``[N, C, H, W]`` with ``C`` in ``{1, 3}``.
        labels: ``int64`` array ``[N]`` with values in ``[0, len(class_names))``.
        class_names: One display name per class, indexed by label.
        source: The file, folder or URI the images came from (for messages).
        predefined_test: The source's own test split as ``(images, labels)``
            with the same per-image shape and class numbering, or ``None``.
    """

    images: np.ndarray
    labels: np.ndarray
    class_names: tuple[str, ...]
    source: str
    predefined_test: tuple[np.ndarray, np.ndarray] | None = None

    def __post_init__(self) -> None:
        """Validate shapes, dtypes and label ranges.

        Raises:
            DataError: If any field is malformed.
        """
        what = self.source
        if not isinstance(self.class_names, tuple) or not all(
            isinstance(n, str) for n in self.class_names
        ):
            raise DataError(
                f"{what}: class_names must be a tuple of strings, got "
                f"{type(self.class_names).__name__}; pass tuple(str(n) for n in names)"
            )
        if not self.class_names:
            raise DataError(f"{what}: no classes; a dataset needs at least one class")
        if len(set(self.class_names)) != len(self.class_names):
            dupes = sorted({n for n in self.class_names if self.class_names.count(n) > 1})
            raise DataError(
                f"{what}: duplicate class names {dupes}; give every class a unique name"
            )
        shape = _check_uint8_images(self.images, what=what)
        _check_labels(
            self.labels,
            count=self.images.shape[0],
            num_classes=len(self.class_names),
            what=what,
        )
        if self.predefined_test is not None:
            test_what = f"{what} (test split)"
            if not isinstance(self.predefined_test, tuple) or len(self.predefined_test) != 2:
                raise DataError(f"{test_what}: predefined_test must be an (images, labels) tuple")
            test_images, test_labels = self.predefined_test
            test_shape = _check_uint8_images(test_images, what=test_what)
            if test_shape != shape:
                raise DataError(
                    f"{test_what}: test images have shape [C, H, W] = {list(test_shape)} but "
                    f"training images have {list(shape)}; use test images of the same size"
                )
            _check_labels(
                test_labels,
                count=test_images.shape[0],
                num_classes=len(self.class_names),
                what=test_what,
            )

    def __len__(self) -> int:
        """Return the number of (non-test) images."""
        return int(self.images.shape[0])

    @property
    def native_size(self) -> int:
        """The larger of the images' native height and width."""
        return int(max(self.images.shape[2], self.images.shape[3]))


@dataclass(frozen=True, kw_only=True, eq=False)
class ImageDataset:
    """One model-ready split of an image classification dataset.

    Attributes:
        images: ``float32`` array ``[N, C, H, W]`` with values in ``[-1, 1]``.
        labels: ``int64`` array ``[N]`` with values in ``[0, num_classes)``.
        num_classes: Number of classes (may exceed the classes present).
        name: Human-readable name, e.g. the dataset spec string.
        public: ``True`` only if the user declared this dataset public (no
            privacy protection needed); defaults to private.
    """

    images: np.ndarray
    labels: np.ndarray
    num_classes: int
    name: str
    public: bool = False

    def __post_init__(self) -> None:
        """Validate shapes, dtypes and value ranges.

        Raises:
            DataError: If any field is malformed.
        """
        if not isinstance(self.name, str):
            raise DataError(f"dataset name must be a string, got {type(self.name).__name__}")
        what = f"dataset {self.name!r}"
        if not isinstance(self.public, bool):
            raise DataError(f"{what}: public must be True or False, got {self.public!r}")
        if (
            not isinstance(self.num_classes, int)
            or isinstance(self.num_classes, bool)
            or self.num_classes < 1
        ):
            raise DataError(
                f"{what}: num_classes must be a positive integer, got {self.num_classes!r}"
            )
        images = self.images
        _image_shape(images, dtype=np.float32, what=what,
                     fix="convert with transforms.to_unit_range")
        if images.size:
            low, high = float(images.min()), float(images.max())
            if not (-1.0 <= low and high <= 1.0):  # also rejects NaN
                raise DataError(
                    f"{what}: image values span [{low}, {high}] but must lie in [-1, 1]; "
                    "scale uint8 pixels with x / 255 * 2 - 1"
                )
        _check_labels(self.labels, count=images.shape[0], num_classes=self.num_classes, what=what)

    def __len__(self) -> int:
        """Return the number of images."""
        return int(self.images.shape[0])

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """The per-image shape ``(C, H, W)``."""
        _, c, h, w = self.images.shape
        return (int(c), int(h), int(w))

    def records_at(self, indices: np.ndarray) -> ImageDataset:
        """The records at ``indices``, and no other (a subsampled tuning trial's data)."""
        return ImageDataset(images=self.images[indices], labels=self.labels[indices],
                            num_classes=self.num_classes, name=self.name, public=self.public)


@dataclass(frozen=True, kw_only=True, eq=False)
class DatasetSplits:
    """Train, validation and test splits of one dataset.

    Attributes:
        train: Training split.
        val: Validation split.
        test: Test split.
        class_names: One display name per class, indexed by label.
    """

    train: ImageDataset
    val: ImageDataset
    test: ImageDataset
    class_names: tuple[str, ...]

    def __post_init__(self) -> None:
        """Check that the splits agree on image shape and class count.

        Raises:
            DataError: If the splits are inconsistent.
        """
        splits = {"train": self.train, "val": self.val, "test": self.test}
        for split_name, split in splits.items():
            if not isinstance(split, ImageDataset):
                raise DataError(
                    f"{split_name} split must be an ImageDataset, got {type(split).__name__}"
                )
        if not isinstance(self.class_names, tuple) or not all(
            isinstance(n, str) for n in self.class_names
        ):
            raise DataError(
                f"dataset {self.train.name!r}: class_names must be a tuple of strings; "
                "pass tuple(str(n) for n in names)"
            )
        for split_name, split in splits.items():
            if split.num_classes != len(self.class_names):
                raise DataError(
                    f"dataset {split.name!r}: {split_name} split has {split.num_classes} "
                    f"classes but {len(self.class_names)} class names are given; "
                    "pass one name per class"
                )
            if split.image_shape != self.train.image_shape:
                raise DataError(
                    f"dataset {split.name!r}: {split_name} images have shape "
                    f"{split.image_shape} but train images have {self.train.image_shape}; "
                    "resize every split to the same size"
                )
