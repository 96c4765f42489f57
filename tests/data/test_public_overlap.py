"""Data declared public is never the sensitive data (design invariant 16): the name
check (:func:`same_source`) and the content check (:func:`content_overlap`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from raydp_synth.data import (
    load_dataset,
    load_training_data,
    parse_dataset_spec,
    parse_public_spec,
    write_parquet,
)
from raydp_synth.data.dataset import ImageDataset
from raydp_synth.data.public import (
    PUBLIC_OVERLAP_LIMIT,
    check_content_overlap,
    check_public_validation,
    content_overlap,
    same_source,
)
from raydp_synth.data.spec import DatasetSpec
from raydp_synth.errors import DataError

from .helpers import message_of, write_png


def _public(images: np.ndarray) -> ImageDataset:
    return ImageDataset(images=images, labels=np.zeros(len(images), dtype=np.int64),
                        num_classes=10, name="public", public=True)


def specs(*texts: str) -> tuple[DatasetSpec, ...]:
    """Each spec string parsed."""
    return tuple(parse_dataset_spec(text) for text in texts)


def test_the_same_files_are_the_same_source_after_normalisation(tmp_path: Path, monkeypatch
                                                                ) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "data")
    monkeypatch.chdir(tmp_path)
    assert same_source(*specs("folder:data", f"folder:{tmp_path / 'data'}"))
    assert same_source(*specs("folder:./data/", f"folder:{tmp_path / 'link'}:classes=3"))
    assert same_source(*specs("digits", "digits:classes=10"))
    assert same_source(*specs("mnist", "mnist:" + str(Path("~/.cache/raydp_synth/datasets/mnist"))))
    assert not same_source(*specs("folder:data", "parquet:data"))
    assert not same_source(*specs("digits", f"folder:{tmp_path / 'data'}"))


def test_public_validation_naming_the_training_data_is_refused() -> None:
    with pytest.raises(DataError) as refused:
        check_public_validation(parse_dataset_spec("digits"),
                                dataset=parse_dataset_spec("digits:classes=10"))
    assert "names the sensitive training dataset" in message_of(refused)
    check_public_validation(None, dataset=parse_dataset_spec("digits"))
    check_public_validation(parse_dataset_spec("folder:/public"),
                            dataset=parse_dataset_spec("digits"))


def test_a_copy_overlaps_whole_and_labels_do_not_hide_it() -> None:
    splits = load_dataset("digits")
    sensitive = [splits.train.images, splits.val.images, splits.test.images]
    assert content_overlap([splits.val.images], sensitive) == 1.0
    # A public set holding every sensitive record among a hundred times more others.
    others = np.random.default_rng(0).uniform(-1, 1, (200 * len(splits.val), 1, 16, 16))
    mixed = np.concatenate([others.astype(np.float32), splits.val.images])
    assert content_overlap([mixed], [splits.val.images]) == 1.0
    relabelled = ImageDataset(images=splits.val.images, labels=(splits.val.labels + 1) % 10,
                              num_classes=10, name="relabelled", public=True)
    with pytest.raises(DataError) as refused:
        check_content_overlap(relabelled, splits, what="--public-validation folder:/copy")
    text = message_of(refused)
    assert "byte-identical" in text and "--public-validation folder:/copy" in text


def test_a_different_public_set_with_a_tiny_overlap_is_accepted() -> None:
    """Independent collections share a few exact duplicates by chance: below
    PUBLIC_OVERLAP_LIMIT they are the curator's declaration, above it refused."""
    splits = load_dataset("digits")
    different = -splits.train.images[:1000].copy()  # other bytes: inverted images
    assert content_overlap([different], [splits.train.images]) == 0.0
    tiny = different.copy()
    tiny[:3] = splits.test.images[:3]  # 0.3% of the public set, < 1% of the sensitive one
    share = content_overlap([tiny], [splits.train.images, splits.val.images, splits.test.images])
    assert 0 < share <= PUBLIC_OVERLAP_LIMIT
    check_content_overlap(_public(tiny), splits, what="the public data folder:/pub")
    large = different.copy()
    count = int(2 * PUBLIC_OVERLAP_LIMIT * len(large))
    large[:count] = splits.train.images[:count]
    with pytest.raises(DataError, match="byte-identical"):
        check_content_overlap(_public(large), splits, what="the public data folder:/pub")


def test_images_of_another_shape_are_refused_not_passed() -> None:
    """Fail closed: records that cannot be compared are not "nothing shared"."""
    images = np.zeros((5, 1, 8, 8), dtype=np.float32)
    with pytest.raises(DataError, match="cannot compare"):
        content_overlap([images], [np.zeros((5, 1, 16, 16), dtype=np.float32)])
    assert content_overlap([images[:0]], [images]) == 0.0


def write_copies(root: Path, count: int = 800) -> tuple[str, str]:
    """An image folder of ``count`` RGB 8x8 records (10 classes) and a Parquet copy of
    the same records under another name: the specs of both."""
    rng = np.random.default_rng(4)
    images = rng.integers(0, 256, (count, 3, 8, 8), dtype=np.uint8)
    labels = np.arange(count) % 10
    names = [f"c{k}" for k in range(10)]
    for i, (image, label) in enumerate(zip(images, labels, strict=True)):
        write_png(root / "data" / names[label] / f"{i:04d}.png", image.transpose(1, 2, 0))
    write_parquet(root / "copy.parquet", images, labels, names)
    return f"folder:{root / 'data'}", f"parquet:{root / 'copy.parquet'}"


def test_public_data_that_copies_the_training_data_is_refused(tmp_path: Path) -> None:
    """``--public parquet:COPY`` (another name, the same records) fails like
    ``--public DATASET``, with or without a fraction."""
    training, copy = write_copies(tmp_path)
    for public in (copy, f"{copy}:fraction=0.3"):
        with pytest.raises(DataError) as refused:
            load_training_data(parse_dataset_spec(training), public=parse_public_spec(public), check_overlap=True)
        assert "byte-identical" in message_of(refused)
