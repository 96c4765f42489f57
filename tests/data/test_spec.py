"""Tests of dataset spec parsing, dispatch and default image sizes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from raydp_synth.data import (
    DatasetSpec,
    default_image_size,
    load_dataset,
    load_raw,
    parse_dataset_spec,
    write_parquet,
)
from raydp_synth.data.spec import declared_dataset
from raydp_synth.errors import DataError

from .helpers import message_of, write_mnist_dir, write_png


@pytest.mark.parametrize(
    ("text", "kind", "location"),
    [
        ("digits", "digits", None),
        ("  Digits ", "digits", None),
        ("idx:/data/mnist", "idx", "/data/mnist"),
        ("folder:relative/dir", "folder", "relative/dir"),
        ("parquet:s3://bucket/x.parquet", "parquet", "s3://bucket/x.parquet"),
        ("parquet:file:///tmp/a:b.parquet", "parquet", "file:///tmp/a:b.parquet"),
    ],
)
def test_parse_valid_specs(text: str, kind: str, location: str | None) -> None:
    spec = parse_dataset_spec(text)
    assert spec == DatasetSpec(kind=kind, location=location)
    assert str(spec) == (kind if location is None else f"{kind}:{location}")
    assert parse_dataset_spec(str(spec)) == spec


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("cifar100", r"unknown dataset spec 'cifar100'; use one of: digits \| mnist \| "
                     r"fashion-mnist \| cifar10 \| celeba\[:SIZE\] \(each \[:DIR\]\) \| idx:DIR"),
        ("csv:/x.csv", r"unknown dataset spec 'csv:/x.csv'; use one of: .*parquet:URI"),
        ("", "unknown dataset spec ''"),
        ("idx:", "has no location; write idx:DIR"),
        ("parquet:  ", "has no location; write parquet:URI"),
        ("digits:/x", "'digits' takes no location"),
        # Class declarations (--num-classes, folded in as :classes=K).
        ("idx:/d:classes=ten", "classes='ten' is not a whole number"),
        ("idx:/d:classes=0", "the declared class count 0 must be a whole number >= 1"),
        ("digits:classes=5", "'digits' has 10 classes, not 5"),
        (":classes=3", "unknown dataset spec"),
    ],
)
def test_parse_invalid_specs(text: str, pattern: str) -> None:
    with pytest.raises(DataError, match=pattern) as e:
        parse_dataset_spec(text)
    message_of(e)


def test_dataset_spec_validates_itself() -> None:
    with pytest.raises(DataError, match="unknown dataset kind 'csv'"):
        DatasetSpec(kind="csv", location="x")
    with pytest.raises(DataError, match="needs a location; write folder:DIR"):
        DatasetSpec(kind="folder")
    with pytest.raises(DataError, match="takes no location"):
        DatasetSpec(kind="digits", location="x")


@pytest.mark.parametrize(
    ("native", "expected"),
    [
        (1, 16),
        (8, 16),
        (15, 16),
        (16, 16),
        (17, 32),
        (28, 32),
        (32, 32),
        (33, 64),
        (64, 64),
        (65, 128),
        (224, 256),
    ],
)
def test_default_image_size_table(native: int, expected: int) -> None:
    assert default_image_size(native) == expected


@pytest.mark.parametrize("bad", [0, -8, 2.0, True])
def test_default_image_size_rejects_bad_native(bad: object) -> None:
    with pytest.raises(DataError, match="native image size must be a positive integer"):
        default_image_size(bad)  # type: ignore[arg-type]


def test_load_raw_dispatches_every_kind(tmp_path: Path) -> None:
    write_mnist_dir(tmp_path / "idx", n_test=None)
    write_png(tmp_path / "folder" / "a" / "1.png", np.zeros((3, 3), np.uint8))
    write_parquet(tmp_path / "p.parquet", np.zeros((2, 3, 4, 4), np.uint8), np.array([0, 0]), ["z"])
    assert load_raw(parse_dataset_spec("digits")).images.shape == (1797, 1, 8, 8)
    assert load_raw(parse_dataset_spec(f"idx:{tmp_path / 'idx'}:classes=3")).images.shape == (
        30, 1, 5, 6)
    assert load_raw(parse_dataset_spec(f"folder:{tmp_path / 'folder'}")).class_names == ("a",)
    # A folder or Parquet file declares no size: the default is declared, not the records'.
    assert load_raw(parse_dataset_spec(f"parquet:{tmp_path / 'p.parquet'}")).images.shape == (
        2,
        3,
        32,
        32,
    )


def test_load_dataset_options() -> None:
    spec = DatasetSpec(kind="digits")
    native = load_dataset(spec, image_size=8, seed=2, public=True)
    assert native.train.image_shape == (1, 8, 8)
    assert native.train.public and native.val.public and native.test.public
    assert native.train.name == "digits"
    bigger = load_dataset("digits", image_size=32)
    assert bigger.test.image_shape == (1, 32, 32)


def test_load_dataset_names_dataset_after_spec(tmp_path: Path) -> None:
    write_mnist_dir(tmp_path, n_test=10)
    text = f"idx:{tmp_path}:classes=3"
    splits = load_dataset(text)
    assert {splits.train.name, splits.val.name, splits.test.name} == {text}


def test_load_dataset_missing_location_names_it(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"absent: image folder does not exist") as e:
        load_dataset(f"folder:{tmp_path / 'absent'}")
    message_of(e)


@pytest.mark.parametrize(
    ("text", "kind", "location", "classes", "canonical"),
    [
        ("idx:/data/mnist:classes=10", "idx", "/data/mnist", 10, "idx:/data/mnist:classes=10"),
        ("parquet:s3://b/x.parquet:classes=3", "parquet", "s3://b/x.parquet", 3,
         "parquet:s3://b/x.parquet:classes=3"),
        ("digits:classes=10", "digits", None, 10, "digits"),
        ("folder:d", "folder", "d", None, "folder:d"),
    ],
)
def test_spec_carries_a_class_declaration(
    text: str, kind: str, location: str | None, classes: int | None, canonical: str
) -> None:
    spec = parse_dataset_spec(text)
    assert (spec.kind, spec.location, spec.num_classes) == (kind, location, classes)
    assert str(spec) == canonical
    assert spec.source == (kind if location is None else f"{kind}:{location}")
    assert parse_dataset_spec(str(spec)).source == spec.source


def test_num_classes_is_folded_into_the_spec() -> None:
    assert str(declared_dataset("idx:/d", num_classes=None)) == "idx:/d"
    assert str(declared_dataset("idx:/d", num_classes=10)) == "idx:/d:classes=10"
    assert str(declared_dataset("idx:/d:classes=10", num_classes=10)) == "idx:/d:classes=10"
    assert str(declared_dataset("digits", num_classes=10)) == "digits"
    with pytest.raises(DataError, match="declared class count 4 disagrees with the dataset "
                                        "spec idx:/d:classes=10"):
        declared_dataset("idx:/d:classes=10", num_classes=4)
    with pytest.raises(DataError, match="'digits' has 10 classes, not 4"):
        declared_dataset("digits", num_classes=4)


def test_a_declaration_must_agree_with_the_datasets_own(tmp_path: Path) -> None:
    write_png(tmp_path / "a" / "1.png", np.zeros((3, 3), np.uint8))
    (tmp_path / "b").mkdir()
    assert load_raw(parse_dataset_spec(f"folder:{tmp_path}:classes=2")).class_names == ("a", "b")
    with pytest.raises(DataError, match=r"the dataset declares 2 classes \('a', 'b'\) but 3 were "
                       r"declared \(:classes=3\)") as e:
        load_raw(parse_dataset_spec(f"folder:{tmp_path}:classes=3"))
    message_of(e)


def test_default_classes_only_for_data_that_declares_none(tmp_path: Path) -> None:
    write_mnist_dir(tmp_path / "idx", n_test=None)
    assert len(load_raw(parse_dataset_spec(f"idx:{tmp_path / 'idx'}"),
                        default_classes=4).class_names) == 4
    assert len(load_raw(parse_dataset_spec("digits"), default_classes=4).class_names) == 10
