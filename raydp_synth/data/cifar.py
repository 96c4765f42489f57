"""CIFAR-10's python-pickle batches (``cifar-10-batches-py/``), read without trusting pickle.

The official ``cifar-10-python.tar.gz`` (Krizhevsky 2009, "Learning Multiple
Layers of Features from Tiny Images") unpacks to ``cifar-10-batches-py/`` with
``data_batch_1`` .. ``data_batch_5`` (the 50,000 training images),
``test_batch`` (the 10,000 test images) and ``batches.meta`` (the class names).
Each batch is a Python 2 pickle of a dict: ``data``, a ``uint8`` numpy array of
shape ``[N, 3072]`` (per image the 1024 red, then green, then blue values of a
32x32 image, row-major), ``labels`` (N ints in 0..9), ``batch_label`` and
``filenames``; ``batches.meta`` is a dict with ``label_names``.

``pickle.load`` on a file runs whatever code the file names, so these files are
read with :class:`BatchUnpickler`, which resolves only the globals that a numpy
array in such a file needs (numpy's array reconstructor, with the array type
and plain numeric dtypes only) and refuses every other one: a file that names
anything else is refused with one line, before any of it runs.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np

from raydp_synth.data.dataset import RawImages
from raydp_synth.errors import DataError

__all__ = [
    "BATCHES_FOLDER",
    "BatchUnpickler",
    "CIFAR10_CLASSES",
    "META_FILE",
    "TEST_BATCHES",
    "TRAIN_BATCHES",
    "load_cifar10_raw",
    "read_batch_file",
]

BATCHES_FOLDER = "cifar-10-batches-py"
TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_BATCHES = ("test_batch",)
META_FILE = "batches.meta"
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                   "ship", "truck")
"""CIFAR-10's declared classes, in label order (as ``batches.meta`` names them)."""

_SIDE = 32
_PIXELS = 3 * _SIDE * _SIDE


class _ArrayType:
    """Stands for ``numpy.ndarray`` inside a batch: only the reconstructor may use it."""


_ARRAY_TYPE = _ArrayType()
# numpy's own reconstructor, whatever module this numpy version keeps it in.
_NUMPY_RECONSTRUCT = cast(Callable[..., np.ndarray], np.zeros(0).__reduce__()[0])


def _reconstruct(subtype: object, shape: object, dtype_code: object) -> np.ndarray:
    """numpy's ``_reconstruct`` for a plain ``ndarray`` only (the empty array that the
    pickle's BUILD step then fills with its raw bytes)."""
    if subtype is not _ARRAY_TYPE:
        raise pickle.UnpicklingError("the array reconstructor is called on something other "
                                     "than numpy.ndarray")
    return _NUMPY_RECONSTRUCT(np.ndarray, shape, dtype_code)


def _dtype(spec: object, align: object = False, copy: object = False) -> np.dtype[Any]:
    """A plain numeric dtype (bool, integer, float), never an object dtype."""
    if not isinstance(spec, str):
        raise pickle.UnpicklingError(f"dtype {spec!r} is not a type code")
    dtype = np.dtype(spec, align=bool(align), copy=bool(copy))
    if dtype.kind not in "biuf":
        raise pickle.UnpicklingError(f"dtype {spec!r} is not a plain numeric type")
    return dtype


_ALLOWED: dict[tuple[str, str], object] = {
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,  # numpy >= 2 writes this name
    ("numpy", "ndarray"): _ARRAY_TYPE,
    ("numpy", "dtype"): _dtype,
}


class BatchUnpickler(pickle.Unpickler):
    """An unpickler that resolves only the globals of CIFAR's batch files.

    Python 2 strings are decoded as latin-1 (so that an array's raw bytes survive);
    every global other than numpy's array reconstructor, the array type and
    ``numpy.dtype`` (numeric kinds only) raises :class:`pickle.UnpicklingError`.
    """

    def __init__(self, file: io.BufferedIOBase | io.BytesIO) -> None:
        super().__init__(file, encoding="latin1")

    def find_class(self, module: str, name: str) -> Any:
        """The allowed stand-in for ``module.name``; anything else is refused."""
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"refused global {module}.{name}") from None


def read_batch_file(path: Path) -> dict[str, Any]:
    """Unpickle one CIFAR batch or meta file with :class:`BatchUnpickler`.

    Returns:
        The file's dict, its keys as ``str``.

    Raises:
        DataError: The file cannot be read, names a global outside the allowed
            ones, is not a pickle, or does not hold a dict.
    """
    try:
        with path.open("rb") as handle:
            loaded = BatchUnpickler(handle).load()
    except pickle.UnpicklingError as exc:
        raise DataError(f"{path}: not a CIFAR batch file ({exc}); it was refused unread, "
                        "replace it with the official file") from exc
    except (OSError, EOFError, ValueError, TypeError, AttributeError, IndexError,
            KeyError, MemoryError, OverflowError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise DataError(f"{path}: cannot read the CIFAR batch file ({reason}); replace it with "
                        "the official file") from exc
    if not isinstance(loaded, dict):
        raise DataError(f"{path}: holds a {type(loaded).__name__}, not a CIFAR batch dict; "
                        "replace it with the official file")
    return {key.decode("latin1") if isinstance(key, bytes) else str(key): value
            for key, value in loaded.items()}


def _read_images(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One batch's ``uint8 [N, 3, 32, 32]`` images and ``int64 [N]`` labels."""
    batch = read_batch_file(path)
    data, labels = batch.get("data"), batch.get("labels")
    if (not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2
            or data.shape[1] != _PIXELS):
        shape = getattr(data, "shape", None)
        raise DataError(f"{path}: 'data' must be a uint8 array of shape [N, {_PIXELS}], got "
                        f"{type(data).__name__} of shape {shape}; replace it with the "
                        "official file")
    if (not isinstance(labels, list) or len(labels) != data.shape[0]
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in labels)):
        raise DataError(f"{path}: 'labels' must be a list of {data.shape[0]} integers (one "
                        "per image); replace it with the official file")
    label_array = np.asarray(labels, dtype=np.int64)
    bad = np.flatnonzero((label_array < 0) | (label_array >= len(CIFAR10_CLASSES)))
    if bad.size:
        raise DataError(f"{path}: label {int(label_array[bad[0]])} lies outside CIFAR-10's "
                        f"classes 0..{len(CIFAR10_CLASSES) - 1}; replace it with the "
                        "official file")
    return data.reshape(-1, 3, _SIDE, _SIDE).copy(), label_array


def _read_split(folder: Path, names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    parts = [_read_images(folder / name) for name in names]
    return (np.concatenate([images for images, _ in parts]),
            np.concatenate([labels for _, labels in parts]))


def load_cifar10_raw(directory: Path) -> RawImages:
    """CIFAR-10 from ``directory/cifar-10-batches-py``: the five training batches, and
    ``test_batch`` as the predefined test split.

    The class set is declared (:data:`CIFAR10_CLASSES`); ``batches.meta`` must name
    the same classes in the same order.

    Raises:
        DataError: A file is missing, refused or malformed, or ``batches.meta``
            names other classes.
    """
    folder = directory / BATCHES_FOLDER
    names = read_batch_file(folder / META_FILE).get("label_names")
    if not isinstance(names, list) or tuple(names) != CIFAR10_CLASSES:
        raise DataError(f"{folder / META_FILE}: names the classes {names!r}, not CIFAR-10's "
                        f"{list(CIFAR10_CLASSES)}; for other data use folder:DIR or parquet:URI")
    images, labels = _read_split(folder, TRAIN_BATCHES)
    test_images, test_labels = _read_split(folder, TEST_BATCHES)
    return RawImages(images=images, labels=labels, class_names=CIFAR10_CLASSES,
                     source=str(directory), predefined_test=(test_images, test_labels))
