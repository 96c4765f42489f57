"""Decoding encoded images (PNG, JPEG, ...) into one ``uint8 [N, C, H, W]`` array.

Shared by the image-folder and Parquet loaders. Every image is decoded with
PIL. With declared ``size`` and ``channels`` (what the dataset loaders pass:
public facts, docs/privacy.md, "What the guarantee assumes public") every image
is converted to them: resized to ``size x size`` (bilinear) and converted to
grayscale or RGB. Without them (a bare loader call) the images must have one
size, and the result has one channel if all images are grayscale (or 1-bit),
else three. Alpha channels are dropped.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

from raydp_synth.errors import DataError

__all__ = ["DecodedImage", "decode_image", "stack_images"]

_GRAY_MODES = frozenset({"1", "L", "LA", "La"})
_WIDE_GRAY_MODES = frozenset({"I;16", "I;16L", "I;16B", "I;16N"})
_SINGLE_CHANNEL_MODES = _GRAY_MODES | _WIDE_GRAY_MODES | {"I", "F"}
_DECODE_ERRORS = (
    OSError,
    SyntaxError,
    ValueError,
    TypeError,
    Image.DecompressionBombError,
)


@dataclass(frozen=True, kw_only=True, eq=False)
class DecodedImage:
    """One decoded image and where it came from.

    Attributes:
        pixels: ``uint8`` array, ``[H, W]`` for grayscale or ``[H, W, 3]`` RGB.
        origin: Names the image in messages (a file path or a row index).
    """

    pixels: np.ndarray
    origin: str

    @property
    def is_gray(self) -> bool:
        """Whether the image has a single channel."""
        return self.pixels.ndim == 2


def _gray_pixels(image: Image.Image) -> np.ndarray:
    """Convert a single-channel PIL image of any bit depth to ``uint8``.

    Args:
        image: A PIL image in a grayscale mode (``1``, ``L``, ``LA``, ``I;16*``,
            ``I`` or ``F``).

    Returns:
        ``uint8 [H, W]`` pixels; 16-bit images are scaled to 8 bits, 32-bit
        integer and float images are clipped to ``0..255``.
    """
    if image.mode in _GRAY_MODES:
        return np.asarray(image.convert("L"), dtype=np.uint8)
    values = np.asarray(image, dtype=np.float64)
    if image.mode in _WIDE_GRAY_MODES:
        values = values / 257.0
    return np.clip(np.rint(values), 0, 255).astype(np.uint8)


def _palette_pixels(image: Image.Image) -> np.ndarray:
    """Convert a palette image, keeping it grayscale if its colours are all gray.

    Args:
        image: A PIL image in mode ``P`` or ``PA``.

    Returns:
        ``uint8 [H, W]`` if every pixel has equal R, G and B, else ``[H, W, 3]``.
    """
    rgb = np.asarray(image.convert("RGB"), dtype=np.uint8)
    if np.array_equal(rgb[..., 0], rgb[..., 1]) and np.array_equal(rgb[..., 0], rgb[..., 2]):
        return np.ascontiguousarray(rgb[..., 0])
    return rgb


def decode_image(data: bytes | Path, *, origin: str) -> DecodedImage:
    """Decode one encoded image.

    Args:
        data: The encoded bytes, or the path of an image file.
        origin: Names the image in error messages, e.g. the file path or
            ``"s3://bucket/x.parquet: row 17"``.

    Returns:
        The decoded image (grayscale or RGB ``uint8`` pixels); EXIF
        orientation is applied and, for animations, the first frame is used.

    Raises:
        DataError: If the data cannot be decoded as an image.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. truncated-EXIF chatter
            source = io.BytesIO(data) if isinstance(data, bytes) else data
            with Image.open(source) as opened:
                opened.load()
                image = ImageOps.exif_transpose(opened)
                image.load()
            if image.mode in _SINGLE_CHANNEL_MODES:
                pixels = _gray_pixels(image)
            elif image.mode in ("P", "PA"):
                pixels = _palette_pixels(image)
            else:
                pixels = np.asarray(image.convert("RGB"), dtype=np.uint8)
    except _DECODE_ERRORS as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise DataError(
            f"{origin}: cannot decode image ({reason}); replace it with a valid PNG/JPEG "
            "image or remove it"
        ) from exc
    return DecodedImage(pixels=pixels, origin=origin)


def _declared_pixels(pixels: np.ndarray, *, size: int | None, channels: int | None) -> np.ndarray:
    """One image's pixels converted to the declared size (bilinear) and channels
    (``L``: ITU-R 601-2 luma; gray replicated to RGB); ``None``: as it is."""
    image = Image.fromarray(pixels)
    if channels is not None and (pixels.ndim == 2) != (channels == 1):
        image = image.convert("L" if channels == 1 else "RGB")
    if size is not None and image.size != (size, size):
        image = image.resize((size, size), Image.Resampling.BILINEAR)
    return np.asarray(image, dtype=np.uint8)


def stack_images(decoded: Iterable[DecodedImage], *, source: str, size: int | None = None,
                 channels: int | None = None) -> np.ndarray:
    """Stack decoded images into one ``uint8 [N, C, H, W]`` array.

    Args:
        decoded: The decoded images, in dataset order.
        source: Names the dataset in error messages.
        size: The declared side: every image is resized to ``size x size``;
            ``None``: the images must share one size.
        channels: The declared channels (1 or 3): every image is converted;
            ``None``: 1 if every image is grayscale, else 3.

    Returns:
        ``[N, C, H, W]``; without a declaration ``[N, 1, H, W]`` if every image
        is grayscale, else ``[N, 3, H, W]`` (grayscale images are replicated to
        three channels).

    Raises:
        DataError: If there are no images or, without a declared size, their
            sizes differ.
    """
    items = list(decoded)
    if not items:
        raise DataError(f"{source}: contains no images; add at least one image")
    if size is not None or channels is not None:
        items = [DecodedImage(pixels=_declared_pixels(item.pixels, size=size, channels=channels),
                              origin=item.origin) for item in items]
    first = items[0]
    height, width = first.pixels.shape[:2]
    for item in items[1:]:
        if item.pixels.shape[:2] != (height, width):
            h, w = item.pixels.shape[:2]
            raise DataError(
                f"{item.origin}: image is {w}x{h} but {first.origin} is {width}x{height}; "
                "resize all images to one size"
            )
    gray = all(item.is_gray for item in items)
    channels = 1 if gray else 3
    out = np.empty((len(items), channels, height, width), dtype=np.uint8)
    for i, item in enumerate(items):
        if item.is_gray:
            out[i] = item.pixels[np.newaxis, :, :]  # broadcasts to 3 channels if needed
        else:
            out[i] = item.pixels.transpose(2, 0, 1)
    return out
