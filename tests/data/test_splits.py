"""Tests of splitting, resizing/scaling transforms and the dataset containers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from raydp_synth.data import DatasetSplits, ImageDataset, RawImages
from raydp_synth.data.splits import split_dataset
from raydp_synth.data.transforms import resize_uint8, to_unit_range
from raydp_synth.errors import DataError

from .helpers import message_of


def _tagged(n: int, *, classes: int = 4) -> RawImages:
    """N distinct 1x2x2 images whose first pixel is the image index."""
    images = np.zeros((n, 1, 2, 2), dtype=np.uint8)
    images[:, 0, 0, 0] = np.arange(n)
    return RawImages(
        images=images,
        labels=(np.arange(n) % classes).astype(np.int64),
        class_names=tuple(f"c{i}" for i in range(classes)),
        source="tagged",
    )


def _indices(part: ImageDataset) -> np.ndarray:
    pixels = np.rint((part.images[:, 0, 0, 0] + 1) / 2 * 255)
    return pixels.astype(np.int64)


def _random_raw(
    n: int,
    *,
    classes: int = 4,
    seed: int = 0,
    predefined_test: bool = False,
    source: str = "random",
) -> RawImages:
    """N random (almost surely distinct) 1x4x4 images with labels cycling over the classes."""
    rng = np.random.default_rng(seed)
    test = None
    if predefined_test:
        test = (
            rng.integers(0, 256, size=(5, 1, 4, 4), dtype=np.uint8),
            np.arange(5, dtype=np.int64) % classes,
        )
    return RawImages(
        images=rng.integers(0, 256, size=(n, 1, 4, 4), dtype=np.uint8),
        labels=(np.arange(n) % classes).astype(np.int64),
        class_names=tuple(f"c{i}" for i in range(classes)),
        source=source,
        predefined_test=test,
    )


def _records(part: ImageDataset) -> list[bytes]:
    """The split's records (native-size image bytes + label) in split order."""
    pixels = np.rint((part.images + 1) / 2 * 255).astype(np.uint8)
    return [
        img.tobytes() + int(lab).to_bytes(8, "little")
        for img, lab in zip(pixels, part.labels, strict=True)
    ]


def _raw_records(raw: RawImages) -> list[bytes]:
    return [
        img.tobytes() + int(lab).to_bytes(8, "little")
        for img, lab in zip(raw.images, raw.labels, strict=True)
    ]


def _assignment(splits: DatasetSplits, *, with_test: bool = True) -> dict[bytes, str]:
    names = ("train", "val", "test") if with_test else ("train", "val")
    out: dict[bytes, str] = {}
    for split in names:
        for record in _records(getattr(splits, split)):
            assert record not in out  # records are distinct in these tests
            out[record] = split
    return out


def _assert_binomial_size(count: int, total: int, fraction: float) -> None:
    """``count`` is within 5 standard deviations of ``Binomial(total, fraction)``."""
    std = math.sqrt(total * fraction * (1 - fraction))
    assert abs(count - total * fraction) <= 5 * std + 1, (count, total, fraction)


def test_split_sizes_disjoint_and_covering() -> None:
    raw = _tagged(200)
    splits = split_dataset(raw, image_size=2, seed=5, name="tagged")
    train, val, test = (_indices(p) for p in (splits.train, splits.val, splits.test))
    _assert_binomial_size(len(val), 200, 0.1)
    _assert_binomial_size(len(test), 200, 0.1)
    assert len(train) + len(val) + len(test) == 200
    assert np.array_equal(np.sort(np.concatenate([train, val, test])), np.arange(200))
    for part in (train, val, test):
        assert np.all(np.diff(part) > 0)  # original order kept inside each split
    assert np.array_equal(splits.train.labels, raw.labels[train])  # labels follow images
    assert splits.class_names == raw.class_names


def test_split_is_seeded() -> None:
    raw = _random_raw(500)
    a = split_dataset(raw, image_size=4, seed=1, name="t")
    b = split_dataset(raw, image_size=4, seed=1, name="t")
    c = split_dataset(raw, image_size=4, seed=2, name="t")
    for split in ("train", "val", "test"):
        assert _records(getattr(a, split)) == _records(getattr(b, split))
    assert _assignment(a) != _assignment(c)
    moved = sum(v != _assignment(c)[k] for k, v in _assignment(a).items())
    assert moved > 50  # about 2 * 0.8 * 0.2 * 500 = 160 records change split
    huge = split_dataset(raw, image_size=4, seed=2**80, name="t")  # any non-negative int
    assert _assignment(huge) != _assignment(a)


def test_split_depends_on_the_record_not_its_position() -> None:
    raw = _random_raw(300)
    perm = np.random.default_rng(9).permutation(300)
    shuffled = RawImages(
        images=raw.images[perm],
        labels=raw.labels[perm],
        class_names=raw.class_names,
        source="shuffled",
    )
    a = split_dataset(raw, image_size=4, seed=3, name="t")
    b = split_dataset(shuffled, image_size=4, seed=3, name="t")
    assert _assignment(a) == _assignment(b)


@pytest.mark.parametrize("predefined", [False, True], ids=["hashed-test", "predefined-test"])
@pytest.mark.parametrize("removed", [0, 150, 299])
def test_neighbouring_datasets_give_neighbouring_splits(predefined: bool, removed: int) -> None:
    # Add/remove-one DP on the splits implies DP on the dataset only if every
    # other record keeps its split when one record is removed or added.
    raw = _random_raw(300, predefined_test=predefined)
    splits_names = ("train", "val") if predefined else ("train", "val", "test")
    base = split_dataset(raw, image_size=4, seed=7, name="t")

    keep = np.arange(300) != removed
    smaller = RawImages(
        images=raw.images[keep],
        labels=raw.labels[keep],
        class_names=raw.class_names,
        source="smaller",
        predefined_test=raw.predefined_test,
    )
    gone = _raw_records(raw)[removed]
    small = split_dataset(smaller, image_size=4, seed=7, name="t")
    for split in splits_names:
        before, after = _records(getattr(base, split)), _records(getattr(small, split))
        assert after == [r for r in before if r != gone]  # same records, same order
    assert sum(gone in _records(getattr(base, s)) for s in splits_names) == 1

    new_image = np.full((1, 1, 4, 4), 7, dtype=np.uint8)
    bigger = RawImages(
        images=np.concatenate([raw.images[:removed], new_image, raw.images[removed:]]),
        labels=np.concatenate([raw.labels[:removed], [1], raw.labels[removed:]]).astype(np.int64),
        class_names=raw.class_names,
        source="bigger",
        predefined_test=raw.predefined_test,
    )
    added = new_image[0].tobytes() + (1).to_bytes(8, "little")
    big = split_dataset(bigger, image_size=4, seed=7, name="t")
    landed = [s for s in splits_names if added in _records(getattr(big, s))]
    assert len(landed) == 1
    for split in splits_names:
        before, after = _records(getattr(base, split)), _records(getattr(big, split))
        assert [r for r in after if r != added] == before
        assert len(after) - len(before) == (split == landed[0])
    if predefined:
        assert np.array_equal(big.test.images, base.test.images)


def test_identical_records_share_a_split() -> None:
    raw = _random_raw(200)
    images = raw.images.copy()
    images[1::2] = images[0::2]  # pairs of duplicates with equal labels
    labels = (np.arange(200) // 2 % 4).astype(np.int64)
    dup = RawImages(images=images, labels=labels, class_names=raw.class_names, source="dup")
    splits = split_dataset(dup, image_size=4, seed=0, name="t")
    for split in ("train", "val", "test"):
        records = _records(getattr(splits, split))
        assert all(records.count(r) == 2 for r in records)


@pytest.mark.parametrize(("val_fraction", "test_fraction"), [(0.1, 0.1), (0.25, 0.15), (0.05, 0.3)])
def test_fractions_are_respected_on_large_data(val_fraction: float, test_fraction: float) -> None:
    total = 20_000
    splits = split_dataset(
        _random_raw(total, seed=4),
        image_size=4,
        val_fraction=val_fraction,
        test_fraction=test_fraction,
        name="t",
    )
    _assert_binomial_size(len(splits.val), total, val_fraction)
    _assert_binomial_size(len(splits.test), total, test_fraction)
    assert len(splits.train) + len(splits.val) + len(splits.test) == total


def test_custom_fractions() -> None:
    splits = split_dataset(
        _tagged(100), image_size=2, val_fraction=0.25, test_fraction=0.15, name="t"
    )
    _assert_binomial_size(len(splits.val), 100, 0.25)
    _assert_binomial_size(len(splits.test), 100, 0.15)
    assert len(splits.train) + len(splits.val) + len(splits.test) == 100


def test_predefined_test_split_is_used_and_val_is_carved_from_train() -> None:
    base = _tagged(50)
    test_images = np.full((7, 1, 2, 2), 255, dtype=np.uint8)
    test_labels = np.arange(7, dtype=np.int64) % 4
    raw = RawImages(
        images=base.images,
        labels=base.labels,
        class_names=base.class_names,
        source="with-test",
        predefined_test=(test_images, test_labels),
    )
    splits = split_dataset(raw, image_size=2, name="t", test_fraction=0.9)  # ignored
    assert len(splits.test) == 7  # the predefined test split, as is
    assert np.all(splits.test.images == 1.0)
    assert np.array_equal(splits.test.labels, test_labels)
    train, val = _indices(splits.train), _indices(splits.val)
    assert len(train) + len(val) == 50 and len(val) >= 1
    _assert_binomial_size(len(val), 50, 0.1)
    assert np.array_equal(np.sort(np.concatenate([train, val])), np.arange(50))


def test_predefined_test_split_val_fraction_on_large_data() -> None:
    raw = _random_raw(10_000, seed=5, predefined_test=True)
    splits = split_dataset(raw, image_size=4, val_fraction=0.2, name="t")
    assert len(splits.test) == 5
    assert len(splits.train) + len(splits.val) == 10_000
    _assert_binomial_size(len(splits.val), 10_000, 0.2)
    # The val records are exactly those a hashed split sends to test or val (u < 0.1 + 0.1).
    without = RawImages(
        images=raw.images, labels=raw.labels, class_names=raw.class_names, source="r"
    )
    hashed = split_dataset(without, image_size=4, val_fraction=0.1, test_fraction=0.1, name="t")
    assert set(_records(splits.val)) == set(_records(hashed.test)) | set(_records(hashed.val))


def test_resize_and_scale_rgb() -> None:
    images = np.zeros((40, 3, 5, 9), dtype=np.uint8)
    images[:, 0] = 255  # pure red ...
    images[:, 1, 0, 0] = np.arange(40)  # ... with one tagged green pixel, so records differ
    raw = RawImages(
        images=images,
        labels=np.zeros(40, dtype=np.int64),
        class_names=("red",),
        source="red",
    )
    splits = split_dataset(raw, image_size=16, name="red", public=True)
    assert splits.train.image_shape == (3, 16, 16)
    assert np.all(splits.train.images[:, 0] == 1.0)
    assert np.all(splits.train.images[:, 2] == -1.0)
    assert np.all(splits.train.images[:, 1, 8:] == -1.0)
    assert splits.test.public is True


def test_empty_dataset() -> None:
    raw = RawImages(
        images=np.zeros((0, 1, 4, 4), dtype=np.uint8),
        labels=np.zeros(0, dtype=np.int64),
        class_names=("a",),
        source="empty-source",
    )
    with pytest.raises(DataError, match="empty-source: dataset is empty") as e:
        split_dataset(raw, image_size=4, name="x")
    message_of(e)


def test_declared_class_without_records_is_valid() -> None:
    # The class set is declared, not read off the labels: a class with no record
    # anywhere is kept (same class count in every split, labels untouched).
    raw = RawImages(
        images=_tagged(30).images,
        labels=np.arange(30, dtype=np.int64) % 2,
        class_names=("a", "b", "rare"),
        source="src",
    )
    splits = split_dataset(raw, image_size=2, name="x")
    assert splits.class_names == ("a", "b", "rare")
    assert {splits.train.num_classes, splits.val.num_classes, splits.test.num_classes} == {3}
    assert sum(map(len, (splits.train, splits.val, splits.test))) == 30
    assert 2 not in splits.train.labels


def test_class_only_in_predefined_test_is_valid() -> None:
    raw = RawImages(
        images=_tagged(30).images,
        labels=np.zeros(30, dtype=np.int64),
        class_names=("0", "1"),
        source="idx-dir",
        predefined_test=(np.zeros((3, 1, 2, 2), np.uint8), np.array([0, 1, 1], np.int64)),
    )
    splits = split_dataset(raw, image_size=2, name="x")
    assert set(splits.train.labels.tolist()) == {0}
    assert splits.test.labels.tolist() == [0, 1, 1]


# Seed 0 puts the tagged images 0..3 at u = 0.003, 0.277, 0.588, 0.187; the
# sizes of a split are random, so tiny data can leave one empty by chance.
@pytest.mark.parametrize(
    ("n", "val_fraction", "test_fraction", "pattern"),
    [
        (4, 0.3, 0.002, "test split would be empty"),
        (4, 0.05, 0.1, "val split would be empty"),
        (2, 0.8, 0.1, r"train split would be empty \(2 images\)"),
        (2, 0.5, 0.5, r"train split would be empty \(val_fraction \+ test_fraction = 1 >= 1\)"),
        (500, 0.6, 0.7, "train split would be empty"),
    ],
)
def test_empty_split(n: int, val_fraction: float, test_fraction: float, pattern: str) -> None:
    with pytest.raises(DataError, match=f"tagged: {pattern}") as e:
        split_dataset(
            _tagged(n, classes=1) if n < 256 else _random_raw(n, classes=1, source="tagged"),
            image_size=2,
            name="x",
            val_fraction=val_fraction,
            test_fraction=test_fraction,
        )
    message = message_of(e)
    assert "lower val_fraction/test_fraction" in message or "raise" in message


def test_empty_val_split_with_predefined_test() -> None:
    base = _tagged(4, classes=1)
    raw = RawImages(
        images=base.images,
        labels=base.labels,
        class_names=base.class_names,
        source="tagged",
        predefined_test=(base.images[:1], base.labels[:1]),
    )
    with pytest.raises(DataError, match="tagged: val split would be empty") as e:
        split_dataset(raw, image_size=2, name="x", val_fraction=0.002)
    assert "add more images or raise val_fraction" in message_of(e)


@pytest.mark.parametrize("bad", [0, 0.0, 1.0, -0.1, 1.5, True, "0.1"])
def test_invalid_fraction(bad: object) -> None:
    with pytest.raises(DataError, match="val_fraction must be"):
        split_dataset(_tagged(50), image_size=2, name="x", val_fraction=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, -3, 2.5, None])
def test_invalid_image_size(bad: object) -> None:
    with pytest.raises(DataError, match="image_size must be a positive integer"):
        split_dataset(_tagged(50), image_size=bad, name="x")  # type: ignore[arg-type]


def test_resize_uint8_gray_and_rgb() -> None:
    gray = np.full((2, 1, 8, 8), 77, dtype=np.uint8)
    rgb = np.stack([np.full((5, 7), v, np.uint8) for v in (10, 20, 30)])[None].repeat(3, 0)
    assert np.all(resize_uint8(gray, 16) == 77)
    assert resize_uint8(gray, 16).shape == (2, 1, 16, 16)
    out = resize_uint8(rgb, 4)
    assert out.shape == (3, 3, 4, 4)
    assert out[:, 0].max() == 10 and out[:, 1].min() == 20 and out[:, 2].max() == 30
    same = resize_uint8(gray, 8)
    assert np.array_equal(same, gray) and same is not gray
    with pytest.raises(DataError, match="1 or 3 channels"):
        resize_uint8(np.zeros((1, 2, 4, 4), np.uint8), 8)


def test_to_unit_range_endpoints() -> None:
    scaled = to_unit_range(np.array([0, 51, 255], dtype=np.uint8))
    assert scaled.dtype == np.float32
    assert scaled.tolist() == pytest.approx([-1.0, 51 / 255 * 2 - 1, 1.0])
    assert scaled[0] == -1.0 and scaled[2] == 1.0
    with pytest.raises(DataError, match="needs a uint8 array"):
        to_unit_range(np.zeros(3, dtype=np.float32))


def _dataset(**overrides: object) -> ImageDataset:
    fields: dict[str, object] = {
        "images": np.zeros((3, 1, 4, 4), np.float32),
        "labels": np.array([0, 1, 1], np.int64),
        "num_classes": 2,
        "name": "ds",
    }
    fields.update(overrides)
    return ImageDataset(**fields)  # type: ignore[arg-type]


def test_image_dataset_valid() -> None:
    ds = _dataset()
    assert len(ds) == 3
    assert ds.image_shape == (1, 4, 4)
    assert ds.public is False


@pytest.mark.parametrize(
    ("overrides", "pattern"),
    [
        ({"images": np.zeros((3, 1, 4, 4), np.float64)}, "images must be a float32"),
        ({"images": np.full((3, 1, 4, 4), 1.5, np.float32)}, r"must lie in \[-1, 1\]"),
        ({"images": np.full((3, 1, 4, 4), np.nan, np.float32)}, r"must lie in \[-1, 1\]"),
        ({"images": np.zeros((3, 2, 4, 4), np.float32)}, "need 1 .* or 3"),
        ({"labels": np.array([0, 1], np.int64)}, "3 images but 2 labels"),
        ({"labels": np.array([0, 1, 2], np.int64)}, r"labels range over \[0, 2\]"),
        ({"labels": np.array([0, 1, 1], np.int32)}, "1-D int64"),
        ({"num_classes": 0}, "num_classes must be a positive integer"),
        ({"public": "yes"}, "public must be True or False"),
    ],
)
def test_image_dataset_rejects_bad_fields(overrides: dict[str, object], pattern: str) -> None:
    with pytest.raises(DataError, match=pattern) as e:
        _dataset(**overrides)
    assert "dataset 'ds'" in message_of(e)


def test_raw_images_validation() -> None:
    with pytest.raises(DataError, match="src: duplicate class names"):
        RawImages(
            images=np.zeros((1, 1, 2, 2), np.uint8),
            labels=np.zeros(1, np.int64),
            class_names=("a", "a"),
            source="src",
        )
    with pytest.raises(DataError, match=r"src \(test split\): test images have shape"):
        RawImages(
            images=np.zeros((1, 1, 2, 2), np.uint8),
            labels=np.zeros(1, np.int64),
            class_names=("a",),
            source="src",
            predefined_test=(np.zeros((1, 1, 3, 3), np.uint8), np.zeros(1, np.int64)),
        )


def test_dataset_splits_must_agree() -> None:
    small = _dataset()
    big = _dataset(images=np.zeros((3, 1, 8, 8), np.float32))
    with pytest.raises(DataError, match="test images have shape"):
        DatasetSplits(train=small, val=small, test=big, class_names=("a", "b"))
    with pytest.raises(DataError, match="3 class names are given"):
        DatasetSplits(train=small, val=small, test=small, class_names=("a", "b", "c"))
    ok = DatasetSplits(train=small, val=small, test=small, class_names=("a", "b"))
    assert ok.train is small
