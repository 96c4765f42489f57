"""Helpers that write real test inputs (IDX files, PNG folders) with numpy and PIL."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

IMAGES_MAGIC = 0x00000803
LABELS_MAGIC = 0x00000801


def idx_bytes(array: np.ndarray, *, magic: int | None = None) -> bytes:
    """Encode a uint8 array as an IDX file (header + data).

    Args:
        array: The values; its dimensions go into the header.
        magic: Override of the magic number (default: 0x0800 + ndim).

    Returns:
        The file contents.
    """
    values = np.asarray(array, dtype=np.uint8)
    header = (magic if magic is not None else 0x0800 + values.ndim).to_bytes(4, "big")
    dims = np.asarray(values.shape, dtype=">u4").tobytes()
    return header + dims + values.tobytes()


def write_idx(path: Path, array: np.ndarray, *, magic: int | None = None) -> Path:
    """Write an IDX file, gzipped if the name ends in ``.gz``.

    Args:
        path: Destination.
        array: The values.
        magic: Optional magic-number override.

    Returns:
        ``path``.
    """
    data = idx_bytes(array, magic=magic)
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def random_digits(n: int, *, height: int = 5, width: int = 6, classes: int = 3, seed: int = 0):
    """Random uint8 images [n, H, W] and labels cycling through 0..classes-1.

    Args:
        n: Number of images.
        height: Image height.
        width: Image width.
        classes: Number of classes.
        seed: Random seed.

    Returns:
        ``(images, labels)`` as uint8 arrays.
    """
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(n, height, width), dtype=np.uint8)
    labels = (np.arange(n) % classes).astype(np.uint8)
    return images, labels


def write_mnist_dir(
    directory: Path,
    *,
    n_train: int = 30,
    n_test: int | None = 12,
    gz: bool = True,
    height: int = 5,
    width: int = 6,
) -> dict[str, np.ndarray]:
    """Write an MNIST-style IDX folder.

    Args:
        directory: Destination folder (created).
        n_train: Number of training images.
        n_test: Number of t10k images, or ``None`` for no test files.
        gz: Whether to gzip the files.
        height: Image height.
        width: Image width.

    Returns:
        The arrays written, keyed ``train_images``, ``train_labels`` and, with
        a test split, ``test_images`` and ``test_labels``.
    """
    directory.mkdir(parents=True, exist_ok=True)
    suffix = ".gz" if gz else ""
    train_images, train_labels = random_digits(n_train, height=height, width=width, seed=1)
    write_idx(directory / f"train-images-idx3-ubyte{suffix}", train_images)
    write_idx(directory / f"train-labels-idx1-ubyte{suffix}", train_labels)
    out = {"train_images": train_images, "train_labels": train_labels}
    if n_test is not None:
        test_images, test_labels = random_digits(n_test, height=height, width=width, seed=2)
        write_idx(directory / f"t10k-images-idx3-ubyte{suffix}", test_images)
        write_idx(directory / f"t10k-labels-idx1-ubyte{suffix}", test_labels)
        out.update(test_images=test_images, test_labels=test_labels)
    return out


def write_png(path: Path, pixels: np.ndarray, *, mode: str | None = None) -> Path:
    """Write an image file with PIL (format from the suffix).

    Args:
        path: Destination (parent folders are created).
        pixels: ``[H, W]`` or ``[H, W, 3]`` uint8 pixels.
        mode: Optional PIL mode to convert to before saving (e.g. ``"1"``).

    Returns:
        ``path``.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    image = Image.fromarray(np.asarray(pixels, dtype=np.uint8))
    if mode is not None:
        image = image.convert(mode)
    image.save(path)
    return path


def message_of(excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    """Return an exception's message after checking it is a single line.

    Args:
        excinfo: What ``pytest.raises`` captured.

    Returns:
        The message.
    """
    text = str(excinfo.value)
    assert text and "\n" not in text, f"error message must be one non-empty line: {text!r}"
    return text
