"""Helpers that write real test inputs (IDX files, PNG folders, CIFAR-10 batches, CelebA's
folder) in their exact on-disk formats with numpy and PIL."""

from __future__ import annotations

import gzip
import io
import pickle
import struct
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


class _Py2Pickler(pickle._Pickler):  # type: ignore[name-defined]
    """Pickles like Python 2's cPickle did for CIFAR's batches: every string (and the
    arrays' raw bytes) as a Python 2 ``str`` (BINSTRING opcodes)."""

    dispatch = pickle._Pickler.dispatch.copy()  # type: ignore[attr-defined]

    def save_py2_str(self, obj: str | bytes) -> None:
        data = obj.encode("latin1") if isinstance(obj, str) else obj
        if len(data) < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([len(data)]) + data)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", len(data)) + data)
        self.memoize(obj)

    dispatch[str] = save_py2_str
    dispatch[bytes] = save_py2_str


def py2_pickle(obj: object) -> bytes:
    """``obj`` pickled as CIFAR-10's python batches are (protocol 2, Python 2 strings,
    numpy's array reconstructor under its historical name ``numpy.core.multiarray``)."""
    buffer = io.BytesIO()
    _Py2Pickler(buffer, protocol=2).dump(obj)
    return buffer.getvalue().replace(b"cnumpy._core.multiarray\n", b"cnumpy.core.multiarray\n")


CIFAR10_NAMES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
                 "truck"]


def write_cifar10_dir(root: Path, *, per_batch: int = 6, n_test: int = 8,
                      names: list[str] | None = None) -> dict[str, np.ndarray]:
    """Write ``root/cifar-10-batches-py`` in the official format: five training batches,
    ``test_batch`` and ``batches.meta``, as Python 2 pickles with numpy arrays.

    Returns:
        ``train_images`` ``[N, 3, 32, 32]``, ``train_labels``, ``test_images``, ``test_labels``.
    """
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(3)
    out: dict[str, list[np.ndarray]] = {"train_images": [], "train_labels": [],
                                        "test_images": [], "test_labels": []}
    batches = [(f"data_batch_{i}", "train", per_batch) for i in range(1, 6)]
    for name, split, count in [*batches, ("test_batch", "test", n_test)]:
        data = rng.integers(0, 256, size=(count, 3072), dtype=np.uint8)
        labels = [int(v) for v in rng.integers(0, 10, size=count)]
        batch = {"batch_label": f"{split} batch", "labels": labels, "data": data,
                 "filenames": [f"img_{name}_{i}.png" for i in range(count)]}
        (folder / name).write_bytes(py2_pickle(batch))
        out[f"{split}_images"].append(data.reshape(count, 3, 32, 32))
        out[f"{split}_labels"].append(np.asarray(labels, dtype=np.int64))
    meta = {"num_cases_per_batch": per_batch, "label_names": names or CIFAR10_NAMES,
            "num_vis": 3072}
    (folder / "batches.meta").write_bytes(py2_pickle(meta))
    return {key: np.concatenate(parts) for key, parts in out.items()}


CELEBA_ATTRIBUTES = (
    "5_o_Clock_Shadow Arched_Eyebrows Attractive Bags_Under_Eyes Bald Bangs Big_Lips Big_Nose "
    "Black_Hair Blond_Hair Blurry Brown_Hair Bushy_Eyebrows Chubby Double_Chin Eyeglasses Goatee "
    "Gray_Hair Heavy_Makeup High_Cheekbones Male Mouth_Slightly_Open Mustache Narrow_Eyes "
    "No_Beard Oval_Face Pale_Skin Pointy_Nose Receding_Hairline Rosy_Cheeks Sideburns Smiling "
    "Straight_Hair Wavy_Hair Wearing_Earrings Wearing_Hat Wearing_Lipstick Wearing_Necklace "
    "Wearing_Necktie Young").split()


def write_celeba_dir(root: Path, partitions: list[int], male: list[bool]) -> list[str]:
    """Write CelebA's official layout: ``img_align_celeba/NNNNNN.jpg`` (178x218 JPEGs whose
    centre 178x178 square is a flat colour and whose 20-pixel top and bottom bands are
    black), ``list_attr_celeba.txt`` and ``list_eval_partition.txt`` in the official text
    layout (count line, attribute-name line, ``%2d`` values; CRLF line ends).

    Returns:
        The image file names, in order.
    """
    folder = root / "img_align_celeba"
    folder.mkdir(parents=True, exist_ok=True)
    names = [f"{i + 1:06d}.jpg" for i in range(len(partitions))]
    male_column = CELEBA_ATTRIBUTES.index("Male")
    rows = []
    for i, (name, is_male) in enumerate(zip(names, male, strict=True)):
        pixels = np.zeros((218, 178, 3), dtype=np.uint8)
        pixels[20:198] = (200, 40 + 5 * i, 255 if is_male else 0)
        Image.fromarray(pixels).save(folder / name, quality=95)
        values = [1 if (k + i) % 3 == 0 else -1 for k in range(len(CELEBA_ATTRIBUTES))]
        values[male_column] = 1 if is_male else -1
        rows.append(name + " " + " ".join(f"{v:2d}" for v in values))
    header = [str(len(names)), " ".join(CELEBA_ATTRIBUTES) + " "]
    (root / "list_attr_celeba.txt").write_bytes("\r\n".join([*header, *rows, ""]).encode())
    (root / "list_eval_partition.txt").write_bytes(
        "".join(f"{n} {p}\r\n" for n, p in zip(names, partitions, strict=True)).encode())
    return names
