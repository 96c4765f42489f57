"""MNIST-style IDX files (``train-images-idx3-ubyte[.gz]`` and friends).

An IDX file is a 4-byte big-endian magic number ``0x000008NN`` (``0x08`` =
unsigned bytes, ``NN`` = number of dimensions), then one big-endian ``uint32``
per dimension, then the values. Images are 3-D (``N x H x W``, magic
``0x00000803``) and labels 1-D (``N``, magic ``0x00000801``). Files may be
gzipped (``.gz`` suffix); if both forms exist the uncompressed one is used.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import numpy as np

from raydp_synth.data.dataset import RawImages
from raydp_synth.errors import DataError

__all__ = ["load_idx_raw", "read_idx"]

IMAGES_MAGIC = 0x00000803
LABELS_MAGIC = 0x00000801
TRAIN_IMAGES = "train-images-idx3-ubyte"
TRAIN_LABELS = "train-labels-idx1-ubyte"
TEST_IMAGES = "t10k-images-idx3-ubyte"
TEST_LABELS = "t10k-labels-idx1-ubyte"


def _find(directory: Path, stem: str) -> Path | None:
    """Return ``directory/stem`` or ``directory/stem.gz``, whichever exists.

    Args:
        directory: The folder to look in.
        stem: The uncompressed file name.

    Returns:
        The uncompressed file if present, else the gzipped one, else ``None``.
    """
    for name in (stem, f"{stem}.gz"):
        candidate = directory / name
        if candidate.is_file():
            return candidate
    return None


def _read_bytes(path: Path) -> bytes:
    """Read a file, decompressing it if its name ends in ``.gz``.

    Args:
        path: The file to read.

    Returns:
        The (decompressed) contents.

    Raises:
        DataError: If the file cannot be read or is not valid gzip.
    """
    if path.suffix == ".gz":
        try:
            with gzip.open(path, "rb") as handle:
                return handle.read()
        except (OSError, EOFError, zlib.error) as exc:
            reason = " ".join(str(exc).split()) or type(exc).__name__
            raise DataError(
                f"{path}: corrupt gzip file ({reason}); download it again or gunzip a good copy"
            ) from exc
    try:
        return path.read_bytes()
    except OSError as exc:
        raise DataError(
            f"{path}: cannot read file ({exc.strerror}); check its permissions"
        ) from exc


def read_idx(path: Path, *, magic: int) -> np.ndarray:
    """Parse one unsigned-byte IDX file.

    Args:
        path: The file (``.gz`` suffix means gzipped).
        magic: The expected magic number (``IMAGES_MAGIC`` or ``LABELS_MAGIC``).

    Returns:
        A ``uint8`` array with the dimensions from the header.

    Raises:
        DataError: If the magic number is wrong or the file is truncated,
            has trailing bytes or is corrupt.
    """
    data = _read_bytes(path)
    kind = "images" if magic == IMAGES_MAGIC else "labels"
    if len(data) < 4:
        raise DataError(
            f"{path}: file is {len(data)} bytes, too short for an IDX header; "
            f"pass a valid IDX {kind} file"
        )
    found = int.from_bytes(data[:4], "big")
    if found != magic:
        raise DataError(
            f"{path}: bad IDX magic number 0x{found:08x}, expected 0x{magic:08x} for "
            f"uint8 {kind}; pass the matching IDX {kind} file"
        )
    ndim = magic & 0xFF
    header = 4 + 4 * ndim
    if len(data) < header:
        raise DataError(
            f"{path}: truncated IDX file ({len(data)} bytes, header alone needs {header}); "
            "download the file again"
        )
    dims = tuple(int(d) for d in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    expected = header + int(np.prod(dims, dtype=np.int64))
    if len(data) < expected:
        raise DataError(
            f"{path}: truncated IDX file, header promises {expected} bytes for shape "
            f"{list(dims)} but the file has {len(data)}; download the file again"
        )
    if len(data) > expected:
        raise DataError(
            f"{path}: IDX file has {len(data) - expected} unexpected trailing bytes after "
            f"shape {list(dims)}; download the file again"
        )
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(dims).copy()


def _read_pair(images_path: Path, labels_path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Read matching IDX image and label files.

    Args:
        images_path: The ``idx3`` images file.
        labels_path: The ``idx1`` labels file.

    Returns:
        ``(images uint8 [N, 1, H, W], labels int64 [N])``.

    Raises:
        DataError: If either file is malformed or their counts differ.
    """
    images = read_idx(images_path, magic=IMAGES_MAGIC)
    labels = read_idx(labels_path, magic=LABELS_MAGIC)
    if images.shape[0] != labels.shape[0]:
        raise DataError(
            f"{images_path}: images file has {images.shape[0]} images but labels file "
            f"{labels_path.name} has {labels.shape[0]} labels; pass matching IDX image/label files"
        )
    if images.shape[0] == 0:
        raise DataError(f"{images_path}: IDX file contains no images; pass a non-empty file")
    if images.shape[1] == 0 or images.shape[2] == 0:
        raise DataError(
            f"{images_path}: images have zero height or width {list(images.shape[1:])}; "
            "pass a valid IDX images file"
        )
    return images[:, np.newaxis, :, :], labels.astype(np.int64)


def _check_declared(labels: np.ndarray, num_classes: int, path: Path | str) -> None:
    """Refuse a label outside the declared classes ``0..num_classes-1``.

    Raises:
        DataError: naming the file, the label and the declaration.
    """
    bad = np.flatnonzero((labels < 0) | (labels >= num_classes))
    if bad.size:
        value = int(labels[int(bad[0])])
        raise DataError(
            f"{path}: label {value} lies outside the {num_classes} declared classes "
            f"0..{num_classes - 1}; declare the dataset's class count (idx:DIR:classes=K)"
        )


def load_idx_raw(directory: str | Path, *, num_classes: int | None = None) -> RawImages:
    """Load an MNIST-style IDX dataset from a folder.

    Requires ``train-images-idx3-ubyte`` and ``train-labels-idx1-ubyte``
    (each optionally ``.gz``); ``t10k-images-idx3-ubyte`` and
    ``t10k-labels-idx1-ubyte`` become the predefined test split if present.

    IDX files do not declare their class set, and the labels present are not a
    declaration (a class may have no record, and the class set is a public fact of
    the privacy statement): the caller declares it (``--num-classes``).

    Args:
        directory: The folder holding the IDX files (``~`` is expanded).
        num_classes: The declared class count K; labels must lie in ``0..K-1``.

    Returns:
        ``RawImages`` with ``[N, 1, H, W]`` images and class names
        ``"0"`` .. ``str(K-1)``.

    Raises:
        DataError: If the folder or a required file is missing, a file is
            malformed, counts disagree, no class count is declared, or a label
            lies outside the declared classes.
    """
    root = Path(directory).expanduser()
    if not root.is_dir():
        raise DataError(
            f"{root}: IDX directory does not exist; pass the folder holding the IDX files"
        )
    train_images = _find(root, TRAIN_IMAGES)
    train_labels = _find(root, TRAIN_LABELS)
    if train_images is None or train_labels is None:
        stem = TRAIN_IMAGES if train_images is None else TRAIN_LABELS
        raise DataError(
            f"{root / stem}: required IDX file not found (also tried {stem}.gz); "
            f"put {TRAIN_IMAGES}[.gz] and {TRAIN_LABELS}[.gz] in {root}"
        )
    images, labels = _read_pair(train_images, train_labels)

    test_images = _find(root, TEST_IMAGES)
    test_labels = _find(root, TEST_LABELS)
    predefined: tuple[np.ndarray, np.ndarray] | None = None
    if (test_images is None) != (test_labels is None):
        present, missing = (
            (test_images, TEST_LABELS) if test_labels is None else (test_labels, TEST_IMAGES)
        )
        raise DataError(
            f"{present}: test split file has no partner {missing}[.gz] in {root}; "
            "add it or remove the test file"
        )
    if test_images is not None and test_labels is not None:
        t_images, t_labels = _read_pair(test_images, test_labels)
        if t_images.shape[2:] != images.shape[2:]:
            raise DataError(
                f"{test_images}: test images are {t_images.shape[3]}x{t_images.shape[2]} but "
                f"training images are {images.shape[3]}x{images.shape[2]}; "
                "use test images of the same size"
            )
        predefined = (t_images, t_labels)

    if num_classes is None:
        raise DataError(
            f"{root}: IDX files do not declare their classes; declare the class count K "
            "for labels 0..K-1 in the dataset spec (e.g. idx:DIR:classes=10 for MNIST)"
        )
    _check_declared(labels, num_classes, train_labels)
    if predefined is not None and test_labels is not None:
        _check_declared(predefined[1], num_classes, test_labels)
    return RawImages(
        images=images,
        labels=labels,
        class_names=tuple(str(k) for k in range(num_classes)),
        source=str(root),
        predefined_test=predefined,
    )
