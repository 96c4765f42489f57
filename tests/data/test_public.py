"""Data declared public (``--public SPEC[:fraction=F]``): parsing, the carve-out from
the training split, its neighbouring property, and the errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from raydp_synth.data import (
    load_dataset,
    load_training_data,
    parse_dataset_spec,
    parse_public_spec,
)
from raydp_synth.errors import DataError

from .helpers import write_png


def _rows(images: np.ndarray) -> set[bytes]:
    return {row.tobytes() for row in images}


def test_parse_public_spec() -> None:
    assert str(parse_public_spec("digits:fraction=0.02")) == "digits:fraction=0.02"
    assert parse_public_spec(" folder:/data/pub ").fraction is None
    parquet = parse_public_spec("parquet:s3://bucket/x.parquet:fraction=0.1")
    assert parquet.dataset == parse_dataset_spec("parquet:s3://bucket/x.parquet") and parquet.fraction == 0.1
    for bad in ("digits:fraction=0", "digits:fraction=1.5", "digits:fraction=abc", "nope"):
        with pytest.raises(DataError):
            parse_public_spec(bad)


def test_fraction_of_the_training_data_is_taken_out_of_the_training_split() -> None:
    full = load_dataset("digits").train
    splits, public = load_training_data(parse_dataset_spec("digits"), public=parse_public_spec("digits:fraction=0.05"))
    assert public is not None and public.public and not splits.train.public
    assert len(public) + len(splits.train) == len(full)
    assert 0.02 * len(full) < len(public) < 0.09 * len(full)  # Binomial(n, 0.05), wide margin
    assert _rows(public.images).isdisjoint(_rows(splits.train.images))
    assert _rows(public.images) | _rows(splits.train.images) == _rows(full.images)
    val = load_dataset("digits").val
    assert np.array_equal(splits.val.images, val.images)  # validation and test keep theirs
    again, public_again = load_training_data(parse_dataset_spec("digits"), public=parse_public_spec("digits:fraction=0.05"))
    assert np.array_equal(public_again.images, public.images)


def test_without_public_data_nothing_changes() -> None:
    splits, public = load_training_data(parse_dataset_spec("digits"), public=None)
    assert public is None and len(splits.train) == len(load_dataset("digits").train)


def _folder(root: Path, count: int) -> Path:
    rng = np.random.default_rng(0)
    for i in range(count):
        write_png(root / f"c{i % 2}" / f"{i:03d}.png", rng.integers(0, 256, (8, 8), dtype=np.uint8))
    return root


def test_neighbouring_datasets_give_neighbouring_public_and_private_parts(tmp_path: Path) -> None:
    """Adding one record moves no other record between public and private (the
    carve-out hashes each record alone), so the private training splits are
    neighbouring and DP on them is DP for the dataset."""
    small, large = _folder(tmp_path / "a", 80), _folder(tmp_path / "b", 81)
    parts = []
    for root in (small, large):
        splits, public = load_training_data(parse_dataset_spec(f"folder:{root}"), public=parse_public_spec(f"folder:{root}:fraction=0.3"))
        parts.append((_rows(splits.train.images), _rows(public.images)))
    (train_a, pub_a), (train_b, pub_b) = parts
    assert len(train_b - train_a) + len(pub_b - pub_a) <= 1
    assert train_a <= train_b and pub_a <= pub_b


def test_the_whole_training_dataset_cannot_be_declared_public() -> None:
    with pytest.raises(DataError, match="fraction"):
        load_training_data(parse_dataset_spec("digits"), public=parse_public_spec("digits"))


def test_another_public_dataset_must_match_the_training_data(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    for i in range(20):  # RGB: the digits are grayscale
        write_png(tmp_path / f"c{i % 10}" / f"{i}.png", rng.integers(0, 256, (8, 8, 3), dtype=np.uint8))
    with pytest.raises(DataError, match="same kind"):  # declared RGB: refused
        load_training_data(parse_dataset_spec("digits"), public=parse_public_spec(f"folder:{tmp_path}:channels=3"))
    # Undeclared, a folder's channels are declared like the training data's and its
    # records converted (never read off the records).
    _, public = load_training_data(parse_dataset_spec("digits"), public=parse_public_spec(f"folder:{tmp_path}"))
    assert public is not None and public.image_shape == (1, 16, 16)


def test_another_dataset_is_public_whole_or_by_fraction(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    for i in range(40):
        write_png(tmp_path / f"c{i % 10}" / f"{i:02d}.png", rng.integers(0, 256, (8, 8), dtype=np.uint8))
    splits, public = load_training_data(parse_dataset_spec("digits"), public=parse_public_spec(f"folder:{tmp_path}"))
    assert public is not None and len(public) == 40 and public.public
    assert len(splits.train) == len(load_dataset("digits").train)
    _, part = load_training_data(parse_dataset_spec("digits"), public=parse_public_spec(f"folder:{tmp_path}:fraction=0.5"))
    assert 0 < len(part) < 40


def test_a_class_declaration_does_not_change_which_dataset_is_the_training_one(
    tmp_path: Path,
) -> None:
    """``--public folder:D:fraction=F`` on training data ``folder:D:classes=2`` is a
    part of the training data (taken out of its split), not another dataset."""
    root = _folder(tmp_path / "a", 80)
    plain, _ = load_training_data(parse_dataset_spec(f"folder:{root}"), public=None)
    splits, public = load_training_data(parse_dataset_spec(f"folder:{root}:classes=2"),
                                        public=parse_public_spec(f"folder:{root}:fraction=0.3"))
    assert public is not None and len(public) + len(splits.train) == len(plain.train)
    assert _rows(public.images).isdisjoint(_rows(splits.train.images))
    with pytest.raises(DataError, match="declares 3 classes, the training data 2"):
        load_training_data(parse_dataset_spec(f"folder:{root}"), public=parse_public_spec(f"folder:{root}:classes=3:fraction=0.3"))


def test_public_idx_data_is_declared_like_the_training_data(tmp_path: Path) -> None:
    """IDX files declare no classes: public ones take the training data's class set."""
    from .helpers import write_mnist_dir

    write_mnist_dir(tmp_path / "idx", n_train=30, n_test=None, height=8, width=8)
    _, public = load_training_data(parse_dataset_spec("digits"), public=parse_public_spec(f"idx:{tmp_path / 'idx'}"))
    assert public is not None and public.num_classes == 10 and len(public) == 30


def test_a_fraction_may_leave_a_declared_class_without_private_records(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    for i in range(60):
        write_png(tmp_path / "common" / f"{i:02d}.png", rng.integers(0, 256, (8, 8), dtype=np.uint8))
    write_png(tmp_path / "rare" / "only.png", rng.integers(0, 256, (8, 8), dtype=np.uint8))
    for fraction in (0.2, 0.5, 0.8):
        splits, public = load_training_data(parse_dataset_spec(f"folder:{tmp_path}"),
                                            public=parse_public_spec(f"folder:{tmp_path}:fraction={fraction}"))
        assert splits.class_names == ("common", "rare") and splits.train.num_classes == 2
