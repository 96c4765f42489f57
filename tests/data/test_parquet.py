"""Tests of the Parquet loader and writer, with real Parquet files written to tmp_path."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from raydp_synth.data import load_dataset, write_parquet
from raydp_synth.data.parquet import CLASS_NAMES_KEY, load_parquet_raw
from raydp_synth.data.spec import parse_dataset_spec
from raydp_synth.errors import DataError

from .helpers import message_of


def _images(n: int, channels: int, side: int = 7, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=(n, channels, side, side), dtype=np.uint8)


def _png(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.mark.parametrize("channels", [1, 3])
def test_write_parquet_round_trip(tmp_path: Path, channels: int) -> None:
    images = _images(12, channels)
    labels = np.arange(12) % 3
    path = tmp_path / "sub" / "synthetic.parquet"  # parent folder is created
    write_parquet(path, images, labels, ["cat", "dog", "eel"])

    schema = pq.read_schema(path)
    assert schema.field("image").type == pa.struct([("bytes", pa.binary()),
                                                     ("path", pa.string())])
    assert schema.field("label").type == pa.int64()
    assert json.loads(schema.metadata[CLASS_NAMES_KEY]) == ["cat", "dog", "eel"]

    raw = load_parquet_raw(path)
    assert np.array_equal(raw.images, images)
    assert np.array_equal(raw.labels, labels)
    assert raw.class_names == ("cat", "dog", "eel")
    assert raw.source == str(path)


def test_written_file_is_what_hugging_face_datasets_decodes_as_image_and_class_label(
        tmp_path: Path) -> None:
    """The layout ``datasets`` writes for ``Features({"image": Image(), "label":
    ClassLabel(names=...)})``: the struct storage of ``Image`` and the features in
    the ``huggingface`` schema metadata; each row's bytes are a PNG of its pixels."""
    images = _images(5, 3, side=6, seed=4)
    path = tmp_path / "hf.parquet"
    write_parquet(path, images, np.array([0, 1, 2, 0, 1]), ["cat", "dog", "eel"])
    schema = pq.read_schema(path)
    assert json.loads(schema.metadata[b"huggingface"]) == {"info": {"features": {
        "image": {"_type": "Image"},
        "label": {"names": ["cat", "dog", "eel"], "_type": "ClassLabel"}}}}
    rows = pq.read_table(path).column("image").to_pylist()
    assert all(set(row) == {"bytes", "path"} and row["path"] is None for row in rows)
    for row, pixels in zip(rows, images, strict=True):
        decoded = Image.open(io.BytesIO(row["bytes"]))
        assert decoded.format == "PNG" and decoded.mode == "RGB"
        assert np.array_equal(np.asarray(decoded), pixels.transpose(1, 2, 0))


def test_files_with_a_plain_binary_image_column_still_read(tmp_path: Path) -> None:
    """The layout written before the Hugging Face struct: a binary PNG column."""
    pixels = _images(3, 1, seed=5)
    table = pa.table({"image": pa.array([_png(p[0]) for p in pixels], pa.binary()),
                      "label": pa.array([1, 0, 1], pa.int64())})
    table = table.replace_schema_metadata({CLASS_NAMES_KEY: json.dumps(["a", "b"]).encode()})
    pq.write_table(table, tmp_path / "old.parquet")
    raw = load_parquet_raw(tmp_path / "old.parquet")
    assert np.array_equal(raw.images, pixels)
    assert raw.class_names == ("a", "b") and raw.labels.tolist() == [1, 0, 1]


def test_declared_class_without_samples_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "x.parquet"
    write_parquet(path, _images(4, 1), np.array([0, 1, 0, 1]), ["a", "b", "c"])
    raw = load_parquet_raw(path)
    assert raw.class_names == ("a", "b", "c")
    assert raw.labels.tolist() == [0, 1, 0, 1]


def test_file_uri_and_load_dataset(tmp_path: Path) -> None:
    path = tmp_path / "data.parquet"
    images = _images(30, 3, side=10)
    labels = np.arange(30) % 2
    write_parquet(path, images, labels, ["no", "yes"])
    uri = path.as_uri()
    assert uri.startswith("file:///")
    raw = load_parquet_raw(uri)
    assert np.array_equal(raw.images, images)

    splits = load_dataset(f"parquet:{uri}", image_size=8, public=True)
    assert splits.train.name == f"parquet:{uri}"
    assert splits.train.public and splits.val.public and splits.test.public
    assert splits.train.image_shape == (3, 8, 8)
    assert splits.class_names == ("no", "yes")
    assert len(splits.train) + len(splits.val) + len(splits.test) == 30


def test_write_parquet_to_file_uri(tmp_path: Path) -> None:
    uri = (tmp_path / "via-uri.parquet").as_uri()
    write_parquet(uri, _images(2, 1), np.array([0, 0]), ["only"])
    assert (tmp_path / "via-uri.parquet").is_file()
    assert load_parquet_raw(uri).class_names == ("only",)


def test_directory_of_parquet_files(tmp_path: Path) -> None:
    write_parquet(
        tmp_path / "part-0.parquet", _images(3, 1, seed=1), np.array([0, 1, 0]), ["a", "b"]
    )
    write_parquet(tmp_path / "part-1.parquet", _images(2, 1, seed=2), np.array([1, 1]), ["a", "b"])
    raw = load_parquet_raw(tmp_path)
    assert len(raw) == 5
    assert sorted(raw.labels.tolist()) == [0, 0, 1, 1, 1]
    assert raw.class_names == ("a", "b")


def _hf_table(pixels: list[np.ndarray], labels: list[int], *, names: list[str] | None) -> pa.Table:
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    column = pa.array(
        [{"bytes": _png(p), "path": f"img_{i}.png"} for i, p in enumerate(pixels)],
        type=image_type,
    )
    table = pa.table({"image": column, "label": pa.array(labels, type=pa.int64())})
    if names is not None:
        features = {
            "image": {"_type": "Image"},
            "label": {"names": names, "_type": "ClassLabel"},
        }
        meta = {b"huggingface": json.dumps({"info": {"features": features}}).encode()}
        table = table.replace_schema_metadata(meta)
    return table


def test_hugging_face_struct_column_with_class_label_names(tmp_path: Path) -> None:
    pixels = [np.full((4, 4), 10 * i, dtype=np.uint8) for i in range(4)]
    pq.write_table(_hf_table(pixels, [0, 1, 2, 1], names=["x", "y", "z"]), tmp_path / "hf.parquet")
    raw = load_parquet_raw(tmp_path / "hf.parquet")
    assert raw.class_names == ("x", "y", "z")
    assert raw.images.shape == (4, 1, 4, 4)
    assert [int(raw.images[i, 0, 0, 0]) for i in range(4)] == [0, 10, 20, 30]
    assert raw.labels.tolist() == [0, 1, 2, 1]


def test_without_class_metadata_the_class_count_is_declared(tmp_path: Path) -> None:
    pixels = [np.zeros((4, 4, 3), dtype=np.uint8) + i for i in range(4)]
    pq.write_table(_hf_table(pixels, [7, 3, 7, 3], names=None), tmp_path / "plain.parquet")
    # The labels present (3 and 7) are not a declaration of the class set.
    with pytest.raises(DataError, match=r"plain\.parquet: the Parquet schema declares no class "
                       r"names") as e:
        load_parquet_raw(tmp_path / "plain.parquet")
    assert "classes=K" in message_of(e)
    raw = load_parquet_raw(tmp_path / "plain.parquet", num_classes=10)
    assert raw.class_names == tuple(str(k) for k in range(10))
    assert raw.labels.tolist() == [7, 3, 7, 3]  # not renumbered
    assert raw.images.shape == (4, 3, 4, 4)
    with pytest.raises(DataError, match=r"row 0 has label 7 outside the 5 declared classes") as e:
        load_parquet_raw(tmp_path / "plain.parquet", num_classes=5)
    message_of(e)


def test_schema_declaration_takes_precedence(tmp_path: Path) -> None:
    path = tmp_path / "x.parquet"
    write_parquet(path, _images(4, 1), np.array([0, 1, 0, 1]), ["a", "b", "c"])
    assert load_parquet_raw(path, num_classes=7).class_names == ("a", "b", "c")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"nope\.parquet: Parquet file or directory does not") as e:
        load_parquet_raw(tmp_path / "nope.parquet")
    message_of(e)


def test_not_a_parquet_file(tmp_path: Path) -> None:
    path = tmp_path / "fake.parquet"
    path.write_text("col1,col2\n1,2\n")
    with pytest.raises(DataError, match=r"fake\.parquet: not a readable Parquet file") as e:
        load_parquet_raw(path)
    message_of(e)


def test_empty_directory(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="directory contains no Parquet files") as e:
        load_parquet_raw(tmp_path)
    message_of(e)


@pytest.mark.parametrize("missing", ["image", "label"])
def test_missing_column(tmp_path: Path, missing: str) -> None:
    columns = {"image": [_png(np.zeros((3, 3), np.uint8))], "label": [0], "extra": [1]}
    del columns[missing]
    pq.write_table(pa.table(columns), tmp_path / "t.parquet")
    with pytest.raises(DataError, match=rf"t\.parquet: missing column '{missing}'") as e:
        load_parquet_raw(tmp_path / "t.parquet")
    message_of(e)


def test_undecodable_bytes_name_the_row(tmp_path: Path) -> None:
    good = _png(np.zeros((3, 3), np.uint8))
    table = pa.table({"image": [good, good, b"garbage", good], "label": [0, 1, 0, 1]})
    pq.write_table(table, tmp_path / "t.parquet")
    with pytest.raises(DataError, match=r"t\.parquet: row 2: cannot decode image") as e:
        load_parquet_raw(tmp_path / "t.parquet", num_classes=2)
    message_of(e)


def test_null_image_bytes_name_the_row(tmp_path: Path) -> None:
    good = _png(np.zeros((3, 3), np.uint8))
    table = pa.table({"image": pa.array([good, None], pa.binary()), "label": [0, 1]})
    pq.write_table(table, tmp_path / "t.parquet")
    with pytest.raises(DataError, match=r"row 1 of column 'image' has no image bytes") as e:
        load_parquet_raw(tmp_path / "t.parquet")
    message_of(e)


def test_empty_table(tmp_path: Path) -> None:
    table = pa.table({"image": pa.array([], pa.binary()), "label": pa.array([], pa.int64())})
    pq.write_table(table, tmp_path / "empty.parquet")
    with pytest.raises(DataError, match=r"empty\.parquet: Parquet table has no rows") as e:
        load_parquet_raw(tmp_path / "empty.parquet")
    message_of(e)


def test_non_integer_labels(tmp_path: Path) -> None:
    table = pa.table({"image": [_png(np.zeros((3, 3), np.uint8))], "label": ["cat"]})
    pq.write_table(table, tmp_path / "t.parquet")
    with pytest.raises(DataError, match=r"t\.parquet: column 'label' has type string") as e:
        load_parquet_raw(tmp_path / "t.parquet")
    message_of(e)


def test_label_outside_declared_class_names(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    write_parquet(path, _images(3, 1), np.array([0, 1, 1]), ["a", "b"])
    table = pq.read_table(path)
    table = table.set_column(1, "label", pa.array([0, 1, 5], pa.int64()))
    pq.write_table(table, path)
    with pytest.raises(DataError, match=r"t\.parquet: row 2 has label 5 outside the 2 declared") as e:
        load_parquet_raw(path)
    message_of(e)


def test_unknown_uri_scheme() -> None:
    with pytest.raises(DataError, match=r"nosuchfs://bucket/x\.parquet: cannot open filesystem"):
        load_parquet_raw("nosuchfs://bucket/x.parquet")


def test_write_parquet_rejects_bad_inputs(tmp_path: Path) -> None:
    path = tmp_path / "bad.parquet"
    with pytest.raises(DataError, match=r"bad\.parquet: labels range over \[0, 3\]"):
        write_parquet(path, _images(2, 1), np.array([0, 3]), ["a", "b"])
    with pytest.raises(DataError, match=r"bad\.parquet: images must be a uint8"):
        write_parquet(path, _images(2, 1).astype(np.float32), np.array([0, 1]), ["a", "b"])
    with pytest.raises(DataError, match=r"bad\.parquet: labels must be a 1-D integer array"):
        write_parquet(path, _images(2, 1), np.array([0.0, 1.0]), ["a", "b"])
    with pytest.raises(DataError, match=r"bad\.parquet: no images to write"):
        write_parquet(path, _images(0, 1), np.array([], dtype=np.int64), ["a"])
    with pytest.raises(DataError, match=r"bad\.parquet: class_names must be a sequence"):
        write_parquet(path, _images(2, 1), np.array([0, 1]), "ab")
    assert not path.exists()


def test_parquet_size_and_channels_are_declared(tmp_path: Path) -> None:
    """A Parquet file declares no image size or channels: the spec does (``:size=S``,
    ``:channels=C``), else the defaults (32, RGB); records are converted to them."""
    path = tmp_path / "x.parquet"
    write_parquet(path, _images(40, 1), np.arange(40) % 2, ["a", "b"])
    assert load_dataset(f"parquet:{path}").train.image_shape == (3, 32, 32)
    declared = load_dataset(f"parquet:{path}:size=7:channels=1", seed=1)
    assert declared.train.image_shape == (1, 16, 16)
    assert str(parse_dataset_spec(f"parquet:{path}:channels=1:size=7:classes=2")) == (
        f"parquet:{path}:size=7:channels=1:classes=2")
    with pytest.raises(DataError, match="only folder and parquet take :size=S"):
        parse_dataset_spec("mnist:size=7")
    with pytest.raises(DataError, match="has 1-channel images, not 3"):
        parse_dataset_spec("digits:channels=3")
