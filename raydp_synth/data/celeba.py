"""CelebA (Liu, Luo, Wang and Tang 2015, "Deep Learning Face Attributes in the Wild"),
aligned and cropped faces, as DP image-synthesis papers use it: two classes,
female and male, from the ``Male`` attribute.

Files, in the dataset's folder (the official names)::

    img_align_celeba/000001.jpg ...   (img_align_celeba.zip unpacked: 178x218 JPEGs)
    list_attr_celeba.txt              (the 40 binary attributes, 1 / -1, per image)
    list_eval_partition.txt           (per image: 0 train, 1 validation, 2 test)

``list_attr_celeba.txt`` has the image count on its first line, the 40
attribute names on its second, then one line per image: its file name and 40
values separated by spaces. The label is 1 (``male``) where ``Male`` is 1 and 0
(``female``) where it is -1.

Splits: partition 0 is the training data and partition 2 the predefined test
split (the standard test split, used only for evaluation). Partition 1, the
official validation partition (19,867 images), is **not used**: the papers train
on partition 0 (n = 162,770) and the number of records is a public fact of the
privacy statement; the run's own validation split for its private selection
score is drawn from partition 0 like for every dataset with a predefined test
split (:mod:`raydp_synth.data.splits`).

Decoding: 178x218 RGB images do not fit in memory at full size (200,000 x 116
KB), so each image is centre-cropped to a square (178x178) and resized to
``size x size`` (PIL bilinear, as a torchvision ``Resize`` + ``CenterCrop``
does) while the files are decoded. The decoded arrays are cached in the folder
as ``celeba-<size>px.npz``, written atomically once and reused while the text
files and the image folder are unchanged (their sizes and modification times
are stored with it), so the driver and the Ray workers of a run decode once.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

from raydp_synth.data.dataset import RawImages
from raydp_synth.data.decode import decode_image
from raydp_synth.errors import DataError

__all__ = [
    "ATTRIBUTES_FILE",
    "CELEBA_CLASSES",
    "CELEBA_SIZES",
    "IMAGES_FOLDER",
    "PARTITION_FILE",
    "cache_path",
    "load_celeba_raw",
]

IMAGES_FOLDER = "img_align_celeba"
ATTRIBUTES_FILE = "list_attr_celeba.txt"
PARTITION_FILE = "list_eval_partition.txt"
CELEBA_CLASSES = ("female", "male")
"""The declared classes: label 0 where the ``Male`` attribute is -1, 1 where it is 1."""
CELEBA_SIZES = (8, 16, 32, 64, 128)
"""Decoded image sizes (powers of two, at most the 178-pixel crop)."""

_LABEL_ATTRIBUTE = "Male"
_TRAIN, _VALIDATION, _TEST = 0, 1, 2
_CACHE_VERSION = "celeba-decode-v1"


def cache_path(directory: Path, size: int) -> Path:
    """Where the images decoded at ``size`` are cached."""
    return directory / f"celeba-{size}px.npz"


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise DataError(f"{path}: cannot read ({reason}); replace it with the official "
                        "file") from exc


def _partitions(path: Path) -> dict[str, int]:
    """``list_eval_partition.txt``: image file name -> partition, in file order."""
    out: dict[str, int] = {}
    for number, line in enumerate(_lines(path), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 2 or fields[1] not in ("0", "1", "2"):
            raise DataError(f"{path}: line {number} is {line!r}, not 'FILE.jpg 0|1|2'; "
                            "replace it with the official file")
        out[fields[0]] = int(fields[1])
    return out


def _male(path: Path) -> dict[str, bool]:
    """``list_attr_celeba.txt``: image file name -> whether ``Male`` is 1."""
    lines = _lines(path)
    if len(lines) < 2 or _LABEL_ATTRIBUTE not in lines[1].split():
        raise DataError(f"{path}: the second line must name the 40 attributes, among them "
                        f"{_LABEL_ATTRIBUTE!r}; replace it with the official file")
    names = lines[1].split()
    column = names.index(_LABEL_ATTRIBUTE) + 1
    out: dict[str, bool] = {}
    for number, line in enumerate(lines[2:], start=3):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != len(names) + 1 or fields[column] not in ("1", "-1"):
            raise DataError(f"{path}: line {number} does not hold a file name and "
                            f"{len(names)} values of 1 or -1; replace it with the official file")
        out[fields[0]] = fields[column] == "1"
    return out


def _fingerprint(directory: Path, size: int) -> str:
    """What the cached arrays were decoded from: the decoder, the size, and the
    text files' and image folder's sizes and modification times."""
    parts = [_CACHE_VERSION, f"size={size}"]
    for name in (ATTRIBUTES_FILE, PARTITION_FILE, IMAGES_FOLDER):
        stat = (directory / name).stat()
        parts.append(f"{name}:{stat.st_size}:{stat.st_mtime_ns}")
    return " ".join(parts)


def _decode(path: Path, size: int) -> np.ndarray:
    """One image as ``uint8 [3, size, size]``: centre square crop, then bilinear resize."""
    pixels = decode_image(path, origin=str(path)).pixels
    image = Image.fromarray(pixels).convert("RGB")
    width, height = image.size
    side = min(width, height)
    left, top = (width - side) // 2, (height - side) // 2
    square = image.crop((left, top, left + side, top + side))
    resized = square.resize((size, size), Image.Resampling.BILINEAR)
    return np.asarray(resized, dtype=np.uint8).transpose(2, 0, 1)


def _decode_all(directory: Path, names: list[str], size: int) -> np.ndarray:
    images = np.empty((len(names), 3, size, size), dtype=np.uint8)
    folder = directory / IMAGES_FOLDER
    for i, name in enumerate(names):
        path = folder / name
        if not path.is_file():
            raise DataError(f"{path}: image listed in {PARTITION_FILE} is missing; unpack the "
                            f"official img_align_celeba.zip into {directory}")
        images[i] = _decode(path, size)
    return images


def _load_cache(path: Path, fingerprint: str) -> dict[str, np.ndarray] | None:
    try:
        with np.load(path, allow_pickle=False) as cached:
            if str(cached["fingerprint"]) != fingerprint:
                return None
            return {key: cached[key] for key in cached.files if key != "fingerprint"}
    except (OSError, ValueError, KeyError):
        return None


def _save_cache(path: Path, fingerprint: str, arrays: dict[str, np.ndarray]) -> None:
    """Write the cache atomically; a folder that cannot be written keeps none (and says so)."""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    except OSError as exc:
        print(f"[raydp_synth] CelebA: cannot cache the decoded images in {path.parent} "
              f"({exc.strerror}); every load decodes them again", flush=True)
        return
    try:
        with os.fdopen(fd, "wb") as handle:
            np.savez(handle, fingerprint=np.array(fingerprint),
                     train_images=arrays["train_images"], train_labels=arrays["train_labels"],
                     test_images=arrays["test_images"], test_labels=arrays["test_labels"])
        os.replace(tmp, path)
    except OSError as exc:
        print(f"[raydp_synth] CelebA: cannot cache the decoded images in {path.parent} "
              f"({exc.strerror}); every load decodes them again", flush=True)
    finally:
        Path(tmp).unlink(missing_ok=True)


def load_celeba_raw(directory: Path, *, size: int) -> RawImages:
    """CelebA's partition 0 as training data and partition 2 as the predefined test
    split, decoded at ``size x size`` (see the module docstring; partition 1 is not
    used), with the classes ``female`` and ``male``.

    Raises:
        DataError: A text file is malformed, lacks an image the other lists, a listed
            image is missing or cannot be decoded, or a partition used is empty.
    """
    if size not in CELEBA_SIZES:
        raise DataError(f"CelebA image size {size} is not one of {list(CELEBA_SIZES)}; "
                        "write e.g. celeba:64")
    fingerprint = _fingerprint(directory, size)
    cache = cache_path(directory, size)
    arrays = _load_cache(cache, fingerprint)
    if arrays is None:
        partition = _partitions(directory / PARTITION_FILE)
        male = _male(directory / ATTRIBUTES_FILE)
        unlabelled = next((name for name in partition if name not in male), None)
        if unlabelled is not None:
            raise DataError(f"{directory / ATTRIBUTES_FILE}: has no attributes for {unlabelled} "
                            f"(listed in {PARTITION_FILE}); replace both with the official files")
        arrays = {}
        for split, part in (("train", _TRAIN), ("test", _TEST)):
            names = [name for name, p in partition.items() if p == part]
            if not names:
                raise DataError(f"{directory / PARTITION_FILE}: lists no image in partition "
                                f"{part} ({split}); replace it with the official file")
            print(f"[raydp_synth] CelebA: decoding {len(names)} {split} images at "
                  f"{size}x{size} (once; cached in {cache.name})", flush=True)
            arrays[f"{split}_images"] = _decode_all(directory, names, size)
            arrays[f"{split}_labels"] = np.array([male[name] for name in names], dtype=np.int64)
        _save_cache(cache, fingerprint, arrays)
    return RawImages(
        images=arrays["train_images"], labels=arrays["train_labels"].astype(np.int64),
        class_names=CELEBA_CLASSES, source=str(directory),
        predefined_test=(arrays["test_images"], arrays["test_labels"].astype(np.int64)),
    )
