"""Tests of the MNIST-style IDX loader, with real IDX files written to tmp_path."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from raydp_synth.data import load_dataset
from raydp_synth.data.idx import load_idx_raw
from raydp_synth.errors import DataError

from .helpers import IMAGES_MAGIC, idx_bytes, message_of, random_digits, write_idx, write_mnist_dir


@pytest.mark.parametrize("gz", [True, False], ids=["gzip", "raw"])
def test_idx_round_trip_with_t10k_test_split(tmp_path: Path, gz: bool) -> None:
    written = write_mnist_dir(tmp_path / "mnist", n_train=30, n_test=12, gz=gz)
    raw = load_idx_raw(tmp_path / "mnist", num_classes=3)
    assert raw.images.shape == (30, 1, 5, 6)
    assert np.array_equal(raw.images[:, 0], written["train_images"])
    assert np.array_equal(raw.labels, written["train_labels"].astype(np.int64))
    assert raw.class_names == ("0", "1", "2")
    assert raw.native_size == 6
    assert raw.predefined_test is not None
    test_images, test_labels = raw.predefined_test
    assert np.array_equal(test_images[:, 0], written["test_images"])
    assert np.array_equal(test_labels, written["test_labels"])

    splits = load_dataset(f"idx:{tmp_path / 'mnist'}:classes=3")
    assert len(splits.test) == 12
    assert len(splits.train) + len(splits.val) == 30
    assert len(splits.val) >= 1  # Binomial(30, 0.1): each record in val with probability 0.1
    assert splits.train.image_shape == (1, 16, 16)
    assert np.array_equal(splits.test.labels, written["test_labels"])  # t10k order kept


def test_idx_without_t10k_splits_the_training_files(tmp_path: Path) -> None:
    write_mnist_dir(tmp_path, n_train=40, n_test=None)
    raw = load_idx_raw(tmp_path, num_classes=3)
    assert raw.predefined_test is None
    splits = load_dataset(f"idx:{tmp_path}:classes=3")
    sizes = [len(splits.train), len(splits.val), len(splits.test)]
    assert sum(sizes) == 40 and min(sizes) >= 1  # val/test sizes are Binomial(40, 0.1)


def test_idx_prefers_uncompressed_file_when_both_exist(tmp_path: Path) -> None:
    written = write_mnist_dir(tmp_path, n_test=None, gz=False)
    (tmp_path / "train-images-idx3-ubyte.gz").write_bytes(b"not gzip at all")
    raw = load_idx_raw(tmp_path, num_classes=3)
    assert np.array_equal(raw.images[:, 0], written["train_images"])


def test_idx_28x28_defaults_to_32(tmp_path: Path) -> None:
    write_mnist_dir(tmp_path, n_train=20, n_test=10, height=28, width=28)
    splits = load_dataset(f"idx:{tmp_path}:classes=3")
    assert splits.train.image_shape == (1, 32, 32)
    assert splits.test.images.min() >= -1.0 and splits.test.images.max() <= 1.0


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="nope: IDX directory does not exist") as excinfo:
        load_idx_raw(tmp_path / "nope")
    message_of(excinfo)


@pytest.mark.parametrize("missing", ["train-images-idx3-ubyte", "train-labels-idx1-ubyte"])
def test_missing_required_file(tmp_path: Path, missing: str) -> None:
    write_mnist_dir(tmp_path, n_test=None)
    (tmp_path / f"{missing}.gz").unlink()
    with pytest.raises(DataError, match=f"{missing}: required IDX file not found") as excinfo:
        load_idx_raw(tmp_path)
    message_of(excinfo)


def test_t10k_images_without_labels(tmp_path: Path) -> None:
    write_mnist_dir(tmp_path, n_test=5)
    (tmp_path / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(DataError, match=r"t10k-images-idx3-ubyte\.gz: .*t10k-labels") as excinfo:
        load_idx_raw(tmp_path)
    message_of(excinfo)


def test_bad_magic(tmp_path: Path) -> None:
    images, labels = random_digits(10)
    write_idx(tmp_path / "train-images-idx3-ubyte", images, magic=0x00000801)
    write_idx(tmp_path / "train-labels-idx1-ubyte", labels)
    with pytest.raises(DataError, match=r"train-images-idx3-ubyte: bad IDX magic number") as exc:
        load_idx_raw(tmp_path)
    assert "0x00000803" in message_of(exc)


def test_labels_file_passed_as_images_magic(tmp_path: Path) -> None:
    images, labels = random_digits(10)
    write_idx(tmp_path / "train-images-idx3-ubyte", images)
    write_idx(tmp_path / "train-labels-idx1-ubyte", labels[:, None, None], magic=IMAGES_MAGIC)
    with pytest.raises(DataError, match=r"train-labels-idx1-ubyte: bad IDX magic") as excinfo:
        load_idx_raw(tmp_path)
    message_of(excinfo)


@pytest.mark.parametrize("gz", [True, False], ids=["gzip", "raw"])
def test_truncated_file(tmp_path: Path, gz: bool) -> None:
    images, labels = random_digits(10)
    data = idx_bytes(images)[:-7]
    name = "train-images-idx3-ubyte" + (".gz" if gz else "")
    (tmp_path / name).write_bytes(gzip.compress(data) if gz else data)
    write_idx(tmp_path / "train-labels-idx1-ubyte", labels)
    with pytest.raises(DataError, match=rf"{name}: truncated IDX file") as excinfo:
        load_idx_raw(tmp_path)
    assert "download the file again" in message_of(excinfo)


def test_truncated_header(tmp_path: Path) -> None:
    _, labels = random_digits(10)
    (tmp_path / "train-images-idx3-ubyte").write_bytes(idx_bytes(np.zeros((2, 3, 3)))[:9])
    write_idx(tmp_path / "train-labels-idx1-ubyte", labels)
    with pytest.raises(DataError, match=r"train-images-idx3-ubyte: truncated IDX file") as exc:
        load_idx_raw(tmp_path)
    message_of(exc)


def test_trailing_bytes(tmp_path: Path) -> None:
    images, labels = random_digits(10)
    (tmp_path / "train-images-idx3-ubyte").write_bytes(idx_bytes(images) + b"\x00\x01")
    write_idx(tmp_path / "train-labels-idx1-ubyte", labels)
    with pytest.raises(DataError, match=r"train-images-idx3-ubyte: .*2 unexpected trailing") as e:
        load_idx_raw(tmp_path)
    message_of(e)


def test_count_mismatch(tmp_path: Path) -> None:
    images, labels = random_digits(10)
    write_idx(tmp_path / "train-images-idx3-ubyte.gz", images)
    write_idx(tmp_path / "train-labels-idx1-ubyte.gz", labels[:9])
    with pytest.raises(
        DataError, match=r"images-idx3-ubyte\.gz: images file has 10 images but"
    ) as e:
        load_idx_raw(tmp_path)
    assert "9 labels" in message_of(e)


@pytest.mark.parametrize(
    "payload",
    [b"this is not gzip data", None],
    ids=["garbage", "cut-gzip-stream"],
)
def test_corrupt_gzip(tmp_path: Path, payload: bytes | None) -> None:
    images, labels = random_digits(10)
    if payload is None:
        payload = gzip.compress(idx_bytes(images))[:-20]
    (tmp_path / "train-images-idx3-ubyte.gz").write_bytes(payload)
    write_idx(tmp_path / "train-labels-idx1-ubyte.gz", labels)
    with pytest.raises(DataError, match=r"train-images-idx3-ubyte\.gz: corrupt gzip file") as e:
        load_idx_raw(tmp_path)
    message_of(e)


def test_the_class_set_is_declared_not_read_off_the_labels(tmp_path: Path) -> None:
    images, _ = random_digits(6)
    write_idx(tmp_path / "train-images-idx3-ubyte", images)
    write_idx(tmp_path / "train-labels-idx1-ubyte", np.array([0, 2, 0, 2, 5, 5]))
    # Classes 1, 3 and 4 have no record: declared, they are classes all the same.
    raw = load_idx_raw(tmp_path, num_classes=6)
    assert raw.class_names == ("0", "1", "2", "3", "4", "5")
    assert raw.labels.tolist() == [0, 2, 0, 2, 5, 5]
    # IDX files declare nothing: the caller must.
    with pytest.raises(DataError, match=r"IDX files do not declare their classes") as e:
        load_idx_raw(tmp_path)
    assert "classes=10" in message_of(e)


def test_label_outside_the_declared_classes(tmp_path: Path) -> None:
    images, _ = random_digits(6)
    write_idx(tmp_path / "train-images-idx3-ubyte", images)
    write_idx(tmp_path / "train-labels-idx1-ubyte", np.array([0, 2, 0, 2, 5, 5]))
    with pytest.raises(DataError, match=r"train-labels-idx1-ubyte: label 5 lies outside the 5 "
                       r"declared classes 0\.\.4") as e:
        load_idx_raw(tmp_path, num_classes=5)
    message_of(e)


def test_test_label_outside_the_declared_classes(tmp_path: Path) -> None:
    write_mnist_dir(tmp_path, n_test=None)
    test_images, _ = random_digits(4)
    write_idx(tmp_path / "t10k-images-idx3-ubyte", test_images)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte", np.array([0, 1, 2, 3]))
    with pytest.raises(DataError, match=r"t10k-labels-idx1-ubyte: label 3 lies outside") as e:
        load_idx_raw(tmp_path, num_classes=3)
    message_of(e)


def test_test_images_of_other_size(tmp_path: Path) -> None:
    write_mnist_dir(tmp_path, n_test=None)
    test_images, test_labels = random_digits(4, height=7, width=7)
    write_idx(tmp_path / "t10k-images-idx3-ubyte", test_images)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte", test_labels)
    with pytest.raises(DataError, match=r"t10k-images-idx3-ubyte: test images are 7x7") as e:
        load_idx_raw(tmp_path)
    message_of(e)


def test_empty_idx_file(tmp_path: Path) -> None:
    write_idx(tmp_path / "train-images-idx3-ubyte", np.zeros((0, 4, 4), dtype=np.uint8))
    write_idx(tmp_path / "train-labels-idx1-ubyte", np.zeros((0,), dtype=np.uint8))
    with pytest.raises(DataError, match=r"train-images-idx3-ubyte: IDX file contains no images"):
        load_idx_raw(tmp_path)


@pytest.mark.parametrize("case", range(20))
def test_idx_round_trip_random_shapes(tmp_path: Path, case: int) -> None:
    rng = np.random.default_rng(case)
    n, height, width = (int(v) for v in rng.integers(1, 13, size=3))
    classes = int(rng.integers(1, n + 1))
    images = rng.integers(0, 256, size=(n, height, width), dtype=np.uint8)
    labels = (np.arange(n) % classes).astype(np.uint8)
    suffix = ".gz" if case % 2 else ""
    write_idx(tmp_path / f"train-images-idx3-ubyte{suffix}", images)
    write_idx(tmp_path / f"train-labels-idx1-ubyte{suffix}", labels)
    raw = load_idx_raw(tmp_path, num_classes=classes)
    assert np.array_equal(raw.images[:, 0], images)
    assert np.array_equal(raw.labels, labels)
    assert raw.class_names == tuple(str(c) for c in range(classes))
    assert raw.native_size == max(height, width)
