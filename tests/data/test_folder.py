"""Tests of the image-folder loader, with real PNG/JPEG folders written to tmp_path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from raydp_synth.data import load_dataset
from raydp_synth.data.folder import load_folder_raw
from raydp_synth.errors import DataError

from .helpers import message_of, write_png


def _gray(seed: int, size: tuple[int, int] = (6, 5)) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=size, dtype=np.uint8)


def _rgb(seed: int, size: tuple[int, int] = (6, 5)) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(*size, 3), dtype=np.uint8)


def test_grayscale_folder(tmp_path: Path) -> None:
    pixels = {("dog", "b.png"): _gray(1), ("cat", "a.png"): _gray(2), ("dog", "a.png"): _gray(3)}
    for (cls, name), arr in pixels.items():
        write_png(tmp_path / cls / name, arr)
    (tmp_path / "cat" / ".DS_Store").write_bytes(b"junk")  # hidden files are ignored
    (tmp_path / "README.txt").write_text("files at the root are ignored")

    raw = load_folder_raw(tmp_path)
    assert raw.class_names == ("cat", "dog")
    assert raw.images.shape == (3, 1, 6, 5)
    assert raw.labels.tolist() == [0, 1, 1]
    # classes in sorted order, files sorted by name; PNG is lossless
    assert np.array_equal(raw.images[0, 0], pixels[("cat", "a.png")])
    assert np.array_equal(raw.images[1, 0], pixels[("dog", "a.png")])
    assert np.array_equal(raw.images[2, 0], pixels[("dog", "b.png")])
    assert raw.native_size == 6


def test_one_rgb_image_makes_the_folder_rgb(tmp_path: Path) -> None:
    gray = _gray(1)
    color = _rgb(2)
    write_png(tmp_path / "a" / "1.png", gray)
    write_png(tmp_path / "b" / "1.png", color)
    raw = load_folder_raw(tmp_path)
    assert raw.images.shape == (2, 3, 6, 5)
    for channel in range(3):
        assert np.array_equal(raw.images[0, channel], gray)
    assert np.array_equal(raw.images[1], color.transpose(2, 0, 1))


def test_one_bit_and_rgba_images(tmp_path: Path) -> None:
    bits = (_gray(1) > 127).astype(np.uint8) * 255
    write_png(tmp_path / "a" / "1.png", bits, mode="1")
    write_png(tmp_path / "a" / "2.png", _gray(2), mode="LA")
    raw = load_folder_raw(tmp_path)
    assert raw.images.shape == (2, 1, 6, 5)
    assert np.array_equal(raw.images[0, 0], bits)

    rgba = np.dstack([_rgb(3), np.full((6, 5), 128, dtype=np.uint8)])
    Image.fromarray(rgba).save(tmp_path / "a" / "3.png")
    raw = load_folder_raw(tmp_path)
    assert raw.images.shape == (3, 3, 6, 5)
    assert np.array_equal(raw.images[2], rgba[..., :3].transpose(2, 0, 1))  # alpha dropped


def test_jpeg_and_grayscale_palette(tmp_path: Path) -> None:
    write_png(tmp_path / "x" / "1.jpg", _rgb(1, (8, 8)))
    raw = load_folder_raw(tmp_path)
    assert raw.images.shape == (1, 3, 8, 8)

    gray_palette = Image.fromarray(_gray(4, (8, 8))).convert("P")
    gray_dir = tmp_path / "palette"
    (gray_dir / "y").mkdir(parents=True)
    gray_palette.save(gray_dir / "y" / "1.png")
    assert load_folder_raw(gray_dir).images.shape == (1, 1, 8, 8)


def test_load_dataset_from_folder(tmp_path: Path) -> None:
    for cls in ("a", "b"):
        for i in range(30):
            write_png(tmp_path / cls / f"{i:02d}.png", _rgb(i, (20, 20)))
    splits = load_dataset(f"folder:{tmp_path}", seed=1)
    assert splits.class_names == ("a", "b")
    assert splits.train.image_shape == (3, 32, 32)
    sizes = [len(splits.train), len(splits.val), len(splits.test)]
    assert sum(sizes) == 60 and min(sizes) >= 1  # val/test sizes are Binomial(60, 0.1)


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="missing: image folder does not exist") as excinfo:
        load_folder_raw(tmp_path / "missing")
    message_of(excinfo)


def test_no_class_subfolders(tmp_path: Path) -> None:
    write_png(tmp_path / "loose.png", _gray(1))
    with pytest.raises(DataError, match=rf"{tmp_path.name}: no class sub-folders found") as e:
        load_folder_raw(tmp_path)
    message_of(e)


def test_empty_class_folder_is_a_declared_class(tmp_path: Path) -> None:
    write_png(tmp_path / "cat" / "1.png", _gray(1))
    (tmp_path / "dog").mkdir()
    (tmp_path / "dog" / ".hidden.png").write_bytes(b"")
    write_png(tmp_path / "eel" / "1.png", _gray(2))
    raw = load_folder_raw(tmp_path)
    assert raw.class_names == ("cat", "dog", "eel")
    assert raw.labels.tolist() == [0, 2]


def test_every_class_folder_empty(tmp_path: Path) -> None:
    (tmp_path / "cat").mkdir()
    (tmp_path / "dog").mkdir()
    with pytest.raises(DataError, match=r"none of the 2 class folders contains an image") as e:
        load_folder_raw(tmp_path)
    message_of(e)


def test_undecodable_file(tmp_path: Path) -> None:
    write_png(tmp_path / "cat" / "1.png", _gray(1))
    (tmp_path / "cat" / "2.png").write_bytes(b"\x89PNG but not really")
    with pytest.raises(DataError, match=r"cat/2\.png: cannot decode image") as e:
        load_folder_raw(tmp_path)
    assert "replace it" in message_of(e)


def test_truncated_png(tmp_path: Path) -> None:
    good = write_png(tmp_path / "cat" / "1.png", _rgb(1, (32, 32)))
    (tmp_path / "cat" / "2.png").write_bytes(good.read_bytes()[:60])
    with pytest.raises(DataError, match=r"cat/2\.png: cannot decode image") as e:
        load_folder_raw(tmp_path)
    message_of(e)


def test_images_of_different_sizes(tmp_path: Path) -> None:
    write_png(tmp_path / "a" / "1.png", _gray(1, (6, 5)))
    write_png(tmp_path / "b" / "1.png", _gray(2, (6, 5)))
    write_png(tmp_path / "b" / "2.png", _gray(3, (7, 5)))
    with pytest.raises(DataError, match=r"b/2\.png: image is 5x7 but .*a/1\.png is 5x6") as e:
        load_folder_raw(tmp_path)
    assert "resize all images to one size" in message_of(e)


def test_size_and_channels_are_declared_not_read_off_the_records(tmp_path: Path) -> None:
    """docs/privacy.md, "What the guarantee assumes public": a folder's image size and
    channels are declared (``:size=S``, ``:channels=C``; defaults: the model's size,
    else 32, and RGB). A record of another size or mode is converted to the declared
    facts, so one record can change neither."""
    for i in range(40):
        write_png(tmp_path / "ab"[i % 2] / f"{i:02d}.png", _gray(i, (8, 8)))
    gray = load_dataset(f"folder:{tmp_path}:size=8:channels=1").train
    assert gray.image_shape == (1, 16, 16)  # default_image_size of the declared 8
    write_png(tmp_path / "b" / "99.png", _rgb(4, (11, 5)))  # one colour record of another size
    again = load_dataset(f"folder:{tmp_path}:size=8:channels=1").train
    assert again.image_shape == (1, 16, 16)
    undeclared = load_dataset(f"folder:{tmp_path}")
    assert undeclared.train.image_shape == (3, 32, 32)  # the declared defaults
    assert load_dataset(f"folder:{tmp_path}", image_size=16).train.image_shape == (3, 16, 16)
    for bad, message in ((":channels=2", "must be 1 .grayscale. or 3"),
                         (":size=0", "must be a whole number >= 1")):
        with pytest.raises(DataError, match=message):
            load_dataset(f"folder:{tmp_path}{bad}")
