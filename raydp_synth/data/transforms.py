"""Pixel transforms: resizing, scaling to ``[-1, 1]`` and the default image size."""

from __future__ import annotations

import numpy as np
from PIL import Image

from raydp_synth.errors import DataError

__all__ = [
    "MIN_IMAGE_SIZE",
    "check_image_size",
    "default_image_size",
    "resize_uint8",
    "to_unit_range",
]

MIN_IMAGE_SIZE = 16
"""Smallest default side length; tiny sources (8x8 digits) are upsampled to it."""


def check_image_size(size: object, *, what: str = "image_size") -> int:
    """Validate an image side length.

    Args:
        size: The candidate side length.
        what: Names the value in the error message.

    Returns:
        The side length as an ``int``.

    Raises:
        DataError: If ``size`` is not a positive integer.
    """
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        raise DataError(f"{what} must be a positive integer, got {size!r}; pass e.g. 32")
    return int(size)


def default_image_size(native: int) -> int:
    """Return the default model image size for a source of a given native size.

    The result is the smallest power of two that is at least
    ``max(native, 16)``: 8x8 digits become 16, 28x28 MNIST becomes 32 and
    64x64 images stay 64.

    Args:
        native: The larger of the source images' height and width.

    Returns:
        The default side length.

    Raises:
        DataError: If ``native`` is not a positive integer.
    """
    side = max(check_image_size(native, what="native image size"), MIN_IMAGE_SIZE)
    return 1 << (side - 1).bit_length()


def resize_uint8(images: np.ndarray, size: int) -> np.ndarray:
    """Resize ``uint8`` images to ``size x size`` with PIL bilinear filtering.

    Args:
        images: ``uint8`` array ``[N, C, H, W]`` with ``C`` in ``{1, 3}``.
        size: Target height and width.

    Returns:
        A new ``uint8`` array ``[N, C, size, size]`` (a copy even when no
        resizing is needed).

    Raises:
        DataError: If the array or the size is malformed.
    """
    size = check_image_size(size)
    if not isinstance(images, np.ndarray) or images.dtype != np.uint8 or images.ndim != 4:
        raise DataError(
            "resize_uint8 needs a uint8 array of shape [N, C, H, W], got "
            f"{getattr(images, 'dtype', type(images).__name__)} of shape "
            f"{getattr(images, 'shape', None)}; decode images to 8-bit pixels first"
        )
    n, c, h, w = images.shape
    if c not in (1, 3):
        raise DataError(
            f"resize_uint8 supports 1 or 3 channels, got {c}; convert images to L or RGB"
        )
    if (h, w) == (size, size):
        return images.copy()
    out = np.empty((n, c, size, size), dtype=np.uint8)
    for i in range(n):
        if c == 1:
            pil = Image.fromarray(np.ascontiguousarray(images[i, 0]))
            out[i, 0] = np.asarray(pil.resize((size, size), Image.Resampling.BILINEAR))
        else:
            pil = Image.fromarray(np.ascontiguousarray(images[i].transpose(1, 2, 0)))
            resized = np.asarray(pil.resize((size, size), Image.Resampling.BILINEAR))
            out[i] = resized.transpose(2, 0, 1)
    return out


def to_unit_range(images_uint8: np.ndarray) -> np.ndarray:
    """Scale ``uint8`` pixels to ``float32`` in ``[-1, 1]`` as ``x / 255 * 2 - 1``.

    Args:
        images_uint8: ``uint8`` array of any shape.

    Returns:
        A ``float32`` array of the same shape; 0 maps to -1 and 255 to 1.

    Raises:
        DataError: If the array is not ``uint8``.
    """
    if not isinstance(images_uint8, np.ndarray) or images_uint8.dtype != np.uint8:
        raise DataError(
            "to_unit_range needs a uint8 array, got "
            f"{getattr(images_uint8, 'dtype', type(images_uint8).__name__)}; "
            "decode images to 8-bit pixels first"
        )
    scaled = images_uint8.astype(np.float32) / np.float32(255.0)
    scaled *= np.float32(2.0)
    scaled -= np.float32(1.0)
    return scaled
