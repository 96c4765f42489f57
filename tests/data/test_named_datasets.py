"""The named datasets (mnist, fashion-mnist, cifar10, celeba): small files in each
dataset's exact on-disk format, read through the same code as the real ones."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import pickle
import tarfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from raydp_synth.data import celeba as celeba_module
from raydp_synth.data import checksums, named
from raydp_synth.data.cifar import read_batch_file
from raydp_synth.data.download import fetch_verified
from raydp_synth.data.fetch import download_declared
from raydp_synth.data.public import public_with_data_dir, validation_with_data_dir
from raydp_synth.data.spec import (
    declared_dataset,
    load_dataset,
    load_raw,
    parse_dataset_spec,
)
from raydp_synth.data.transforms import resize_uint8, to_unit_range
from raydp_synth.errors import DataError

from .helpers import (
    idx_bytes,
    message_of,
    random_digits,
    write_celeba_dir,
    write_cifar10_dir,
)

IDX_FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
             "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")


def write_mnist_files(root: Path, *, n_train: int = 40, n_test: int = 10) -> dict[str, np.ndarray]:
    """The four MNIST files (28x28, gzipped IDX) with distinct images."""
    root.mkdir(parents=True, exist_ok=True)
    train_images, train_labels = random_digits(n_train, height=28, width=28, classes=10, seed=1)
    test_images, test_labels = random_digits(n_test, height=28, width=28, classes=10, seed=2)
    arrays = (train_images, train_labels, test_images, test_labels)
    for name, array in zip(IDX_FILES, arrays, strict=True):
        (root / name).write_bytes(gzip.compress(idx_bytes(array)))
    return dict(zip(("train_images", "train_labels", "test_images", "test_labels"), arrays,
                    strict=True))


def _rows(images: np.ndarray) -> set[bytes]:
    return {image.tobytes() for image in images}


# --- spec grammar -------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "canonical", "location", "size"), [
    ("mnist", "mnist", None, None),
    (" Fashion-MNIST ", "fashion-mnist", None, None),
    ("cifar10:/data/c10", "cifar10:/data/c10", "/data/c10", None),
    ("mnist:/d:classes=10", "mnist:/d", "/d", None),
    ("celeba", "celeba:32", None, 32),
    ("celeba:64", "celeba:64", None, 64),
    ("celeba:64:/data/celeba", "celeba:64:/data/celeba", "/data/celeba", 64),
    ("celeba:/data/celeba", "celeba:32:/data/celeba", "/data/celeba", 32),
    ("celeba:./64", "celeba:32:./64", "./64", 32),
])
def test_named_specs_parse_and_print_canonically(text, canonical, location, size) -> None:
    spec = parse_dataset_spec(text)
    assert (str(spec), spec.location, spec.size) == (canonical, location, size)
    assert str(parse_dataset_spec(str(spec))) == canonical


@pytest.mark.parametrize(("text", "needle"), [
    ("mnist:", "empty folder; write mnist[:DIR]"),
    ("celeba:64:", "empty folder; write celeba[:SIZE][:DIR]"),
    ("celeba:20", "CelebA image size 20 is not one of [8, 16, 32, 64, 128]"),
    ("mnist:classes=5", "'mnist' has 10 classes, not 5"),
    ("celeba:classes=10", "'celeba' has 2 classes, not 10"),
])
def test_bad_named_specs_are_refused_in_one_line(text, needle) -> None:
    with pytest.raises(DataError) as e:
        parse_dataset_spec(text)
    assert needle in message_of(e)


def absolute_spec(text: str) -> str:
    """``text`` parsed, made absolute, as its canonical string."""
    return str(parse_dataset_spec(text).absolute())


def test_a_bare_name_resolves_to_the_default_cache_folder(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert absolute_spec("mnist") == f"mnist:{tmp_path}/xdg/raydp_synth/datasets/mnist"
    assert absolute_spec("celeba:64") == f"celeba:64:{tmp_path}/xdg/raydp_synth/datasets/celeba"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert absolute_spec("cifar10") == f"cifar10:{tmp_path}/home/.cache/raydp_synth/datasets/cifar10"
    monkeypatch.chdir(tmp_path)
    assert absolute_spec("mnist:rel") == f"mnist:{tmp_path}/rel"
    # The same records whether the default folder is spelled out or not.
    assert parse_dataset_spec("cifar10").source == parse_dataset_spec("cifar10").absolute().source


def test_data_dir_is_folded_into_a_named_spec_only(tmp_path) -> None:
    assert str(declared_dataset("mnist", data_dir="D")) == "mnist:D"
    assert str(declared_dataset("celeba:64", num_classes=2, data_dir="/d")) == "celeba:64:/d"
    assert str(declared_dataset("mnist:/d", data_dir="/d")) == "mnist:/d"
    assert str(declared_dataset("idx:/x", data_dir=None)) == "idx:/x"
    for spec in ("idx:/x", "digits", "parquet:s3://b/x.parquet"):
        with pytest.raises(DataError) as e:
            declared_dataset(spec, data_dir=str(tmp_path))
        assert "--data-dir is the folder of a named dataset" in message_of(e)
    with pytest.raises(DataError, match="already names the folder /a"):
        declared_dataset("mnist:/a", data_dir="/b")


def test_public_data_of_the_same_named_dataset_shares_its_folder() -> None:
    assert str(public_with_data_dir("mnist:fraction=0.02", parse_dataset_spec("mnist:/d"))) == "mnist:/d:fraction=0.02"
    assert str(public_with_data_dir("celeba:fraction=0.1", parse_dataset_spec("celeba:64:/d"))) == "celeba:32:/d:fraction=0.1"
    assert str(public_with_data_dir("mnist:/e:fraction=0.02", parse_dataset_spec("mnist:/d"))) == "mnist:/e:fraction=0.02"
    assert str(public_with_data_dir("fashion-mnist", parse_dataset_spec("mnist:/d"))) == "fashion-mnist"
    assert str(public_with_data_dir("mnist", parse_dataset_spec("mnist"))) == "mnist"
    assert public_with_data_dir(None, parse_dataset_spec("mnist:/d")) is None
    assert validation_with_data_dir("mnist", parse_dataset_spec("mnist:/d")) == \
        parse_dataset_spec("mnist:/d")
    assert validation_with_data_dir(None, parse_dataset_spec("mnist:/d")) is None


# --- MNIST and Fashion-MNIST --------------------------------------------------------------


def test_mnist_reads_the_four_idx_files_with_their_standard_split(tmp_path) -> None:
    arrays = write_mnist_files(tmp_path / "m")
    raw = load_raw(parse_dataset_spec(f"mnist:{tmp_path / 'm'}"))
    assert raw.class_names == tuple("0123456789")
    assert raw.images.shape == (40, 1, 28, 28)
    np.testing.assert_array_equal(raw.images[:, 0], arrays["train_images"])
    assert raw.predefined_test is not None
    np.testing.assert_array_equal(raw.predefined_test[0][:, 0], arrays["test_images"])
    fashion = load_raw(parse_dataset_spec(f"fashion-mnist:{tmp_path / 'm'}"))
    assert fashion.class_names == ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                   "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")


@pytest.mark.parametrize("kind", ["mnist", "cifar10"])
def test_the_standard_test_split_is_untouched_and_validation_comes_from_training(
        kind, tmp_path) -> None:
    if kind == "mnist":
        arrays = write_mnist_files(tmp_path, n_train=80, n_test=10)
        train_files, test_files = arrays["train_images"][:, None], arrays["test_images"][:, None]
    else:
        arrays = write_cifar10_dir(tmp_path, per_batch=16, n_test=10)
        train_files, test_files = arrays["train_images"], arrays["test_images"]
    splits = load_dataset(f"{kind}:{tmp_path}", seed=3)
    # The test split is exactly the standard test files, in order.
    np.testing.assert_array_equal(splits.test.images, to_unit_range(resize_uint8(test_files, 32)))
    np.testing.assert_array_equal(splits.test.labels, arrays["test_labels"])
    # Train and validation partition the training files; no test image is in either.
    used = np.concatenate([splits.train.images, splits.val.images])
    assert len(splits.val) > 0 and len(used) == len(train_files)
    assert _rows(used) == _rows(to_unit_range(resize_uint8(train_files, 32)))
    assert not _rows(used) & _rows(splits.test.images)


# --- CIFAR-10 -----------------------------------------------------------------------------


def test_cifar10_reads_the_python_batches(tmp_path) -> None:
    arrays = write_cifar10_dir(tmp_path)
    raw = load_raw(parse_dataset_spec(f"cifar10:{tmp_path}"))
    assert raw.class_names[:3] == ("airplane", "automobile", "bird") and len(raw.class_names) == 10
    np.testing.assert_array_equal(raw.images, arrays["train_images"])  # [N, 3, 32, 32], RGB planes
    np.testing.assert_array_equal(raw.labels, arrays["train_labels"])
    assert raw.predefined_test is not None
    np.testing.assert_array_equal(raw.predefined_test[0], arrays["test_images"])
    splits = load_dataset(f"cifar10:{tmp_path}")
    assert splits.train.image_shape == (3, 32, 32)


def test_cifar10_meta_naming_other_classes_is_refused(tmp_path) -> None:
    write_cifar10_dir(tmp_path, names=[f"c{i}" for i in range(10)])
    with pytest.raises(DataError) as e:
        load_raw(parse_dataset_spec(f"cifar10:{tmp_path}"))
    assert "not CIFAR-10's" in message_of(e)


class _RunsACommand:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_the_batch_unpickler_refuses_a_malicious_pickle(tmp_path) -> None:
    write_cifar10_dir(tmp_path)
    marker = tmp_path / "pwned"
    batch = tmp_path / "cifar-10-batches-py" / "data_batch_3"
    batch.write_bytes(pickle.dumps({"data": _RunsACommand(marker), "labels": []}, protocol=2))
    with pytest.raises(DataError) as e:
        load_raw(parse_dataset_spec(f"cifar10:{tmp_path}"))
    message = message_of(e)
    assert "data_batch_3" in message and "refused global posix.system" in message
    assert not marker.exists()  # nothing ran


@pytest.mark.parametrize("payload", [
    {"data": np.array([object(), 1], dtype=object)},    # an object array: pickled objects
    {"data": np.zeros(3), "x": io.StringIO},             # any other global
    {"data": np.ma.masked_array([1, 2])},               # another array type
])
def test_the_batch_unpickler_allows_only_plain_numeric_arrays(payload, tmp_path) -> None:
    path = tmp_path / "batch"
    path.write_bytes(pickle.dumps(payload, protocol=2))
    with pytest.raises(DataError) as e:
        read_batch_file(path)
    assert "not a CIFAR batch file" in message_of(e)


# --- CelebA -------------------------------------------------------------------------------


def test_celeba_reads_the_official_layout(tmp_path, capsys) -> None:
    partitions = [0, 0, 1, 0, 2, 0, 1, 2, 0, 0, 2, 0] * 3
    male = [True, False, True, True, False, False, True, True, False, True, False, True] * 3
    write_celeba_dir(tmp_path, partitions, male)
    raw = load_raw(parse_dataset_spec(f"celeba:16:{tmp_path}"))
    assert raw.class_names == ("female", "male")
    train = [m for m, p in zip(male, partitions, strict=True) if p == 0]
    test = [m for m, p in zip(male, partitions, strict=True) if p == 2]
    assert raw.images.shape == (len(train), 3, 16, 16)  # partition 1 is not used
    np.testing.assert_array_equal(raw.labels, np.array(train, dtype=np.int64))
    assert raw.predefined_test is not None
    np.testing.assert_array_equal(raw.predefined_test[1], np.array(test, dtype=np.int64))
    # Centre-cropped: the black bands above and below the centre square are cut off.
    assert raw.images[:, 0].min() > 150
    np.testing.assert_array_equal(raw.images[:, 2].mean(axis=(1, 2)) > 128, np.array(train))
    assert (tmp_path / "celeba-16px.npz").is_file()
    assert "decoding" in capsys.readouterr().out
    splits = load_dataset(f"celeba:16:{tmp_path}")
    assert splits.train.image_shape == (3, 16, 16) and splits.test.num_classes == 2


def test_celeba_decodes_once_and_again_when_its_files_change(tmp_path, monkeypatch) -> None:
    write_celeba_dir(tmp_path, [0, 0, 0, 2, 2], [True, False, True, False, True])
    first = load_raw(parse_dataset_spec(f"celeba:8:{tmp_path}"))
    calls = []
    decode_all = celeba_module._decode_all
    monkeypatch.setattr(celeba_module, "_decode_all",
                        lambda *a, **k: calls.append(1) or decode_all(*a, **k))
    again = load_raw(parse_dataset_spec(f"celeba:8:{tmp_path}"))
    assert calls == [] and np.array_equal(again.images, first.images)
    partition = tmp_path / "list_eval_partition.txt"
    partition.write_bytes(partition.read_bytes().replace(b"000003.jpg 0", b"000003.jpg 2"))
    changed = load_raw(parse_dataset_spec(f"celeba:8:{tmp_path}"))
    assert calls and len(changed) == 2


def test_celeba_image_missing_from_the_folder_is_named(tmp_path) -> None:
    write_celeba_dir(tmp_path, [0, 0, 2], [True, False, True])
    (tmp_path / "img_align_celeba" / "000002.jpg").unlink()
    with pytest.raises(DataError) as e:
        load_raw(parse_dataset_spec(f"celeba:8:{tmp_path}"))
    assert "000002.jpg" in message_of(e) and not (tmp_path / "celeba-8px.npz").exists()


# --- offline: missing and changed files ---------------------------------------------------


@pytest.mark.parametrize(("kind", "names"), [
    ("mnist", IDX_FILES),
    ("fashion-mnist", IDX_FILES),
    ("cifar10", ("cifar-10-batches-py/",)),
    ("celeba", ("img_align_celeba/", "list_attr_celeba.txt", "list_eval_partition.txt")),
])
def test_missing_files_are_one_line_that_says_what_to_put_where(kind, names, tmp_path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError) as e:
        load_dataset(f"{kind}:{empty}")
    message = message_of(e)
    assert f"not found in {empty}" in message and "--download" in message
    assert all(name in message for name in names)
    assert list(empty.iterdir()) == []  # nothing written
    with pytest.raises(DataError):
        load_dataset(f"{kind}:{tmp_path / 'absent'}")
    assert not (tmp_path / "absent").exists()


def test_one_missing_mnist_file_is_named_alone(tmp_path) -> None:
    write_mnist_files(tmp_path)
    (tmp_path / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(DataError) as e:
        load_dataset(f"mnist:{tmp_path}")
    assert "(missing: t10k-labels-idx1-ubyte.gz)" in message_of(e)


def test_files_that_differ_from_the_official_ones_are_warned_about_once(
        tmp_path, capsys, monkeypatch) -> None:
    write_mnist_files(tmp_path)
    monkeypatch.setattr(named, "_warned", set())
    load_raw(parse_dataset_spec(f"mnist:{tmp_path}"))
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"warning: {tmp_path}: ") and "\n" not in err
    assert "differ from the official MNIST files (MD5)" in err
    load_raw(parse_dataset_spec(f"mnist:{tmp_path}"))
    assert capsys.readouterr().err == ""


def test_checksums_are_computed_once_per_file_version(tmp_path, monkeypatch) -> None:
    (tmp_path / "f.bin").write_bytes(b"abc")
    calls = []
    real = checksums.file_md5
    monkeypatch.setattr(checksums, "file_md5",
                        lambda p, **kw: calls.append(p) or real(p, **kw))
    expected = hashlib.md5(b"abc").hexdigest()
    assert checksums.cached_md5(tmp_path, "f.bin") == expected
    assert checksums.cached_md5(tmp_path, "f.bin") == expected
    assert len(calls) == 1
    (tmp_path / "f.bin").write_bytes(b"abcd")
    assert checksums.cached_md5(tmp_path, "f.bin") == hashlib.md5(b"abcd").hexdigest()
    assert len(calls) == 2
    assert checksums.md5_mismatches(
        tmp_path, {"f.bin": expected, "absent": "0" * 32}).differ == ["f.bin"]


def _hex(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def test_the_file_the_loader_reads_is_the_one_checked(tmp_path) -> None:
    """IDX files may sit gunzipped beside (or instead of) the official .gz files, and the
    loader then reads the gunzipped one: that one is checked, against the published MD5
    of the content where one is given, else against an official .gz beside it."""
    content = b"IDX content" * 1000
    official_gz = gzip.compress(content, compresslevel=9, mtime=0)
    official = {"a.gz": _hex(official_gz)}
    gunzipped = {"a.gz": _hex(content)}

    def check(known: bool = True) -> tuple[list[str], list[str]]:
        found = checksums.md5_mismatches(tmp_path, official, gunzipped if known else None)
        return found.differ, found.unverified

    (tmp_path / "a.gz").write_bytes(official_gz)
    assert check() == ([], [])
    # Other gzip bytes, the official content (another compressor): the official data.
    (tmp_path / "a.gz").write_bytes(gzip.compress(content, compresslevel=1, mtime=7))
    assert _hex((tmp_path / "a.gz").read_bytes()) != official["a.gz"]
    assert check() == ([], [])
    assert check(known=False) == (["a.gz"], [])  # no published content MD5: bytes only
    (tmp_path / "a.gz").write_bytes(gzip.compress(content + b"!", mtime=0))
    assert check() == (["a.gz"], [])
    (tmp_path / "a.gz").write_bytes(b"not gzip at all")
    assert check() == (["a.gz"], [])

    # The gunzipped file beside the official .gz is what is read, so what is checked.
    (tmp_path / "a.gz").write_bytes(official_gz)
    (tmp_path / "a").write_bytes(content)
    assert check() == ([], []) and check(known=False) == ([], [])
    (tmp_path / "a").write_bytes(content[:-1] + b"?")
    assert check() == (["a"], []) and check(known=False) == (["a"], [])
    # Alone, or beside a .gz that is not the official one: the content MD5, if published.
    (tmp_path / "a.gz").write_bytes(b"not gzip at all")
    assert check() == (["a"], []) and check(known=False) == ([], ["a"])
    (tmp_path / "a.gz").unlink()
    (tmp_path / "a").write_bytes(content)
    assert check() == ([], []) and check(known=False) == ([], ["a"])


def test_gunzipped_mnist_files_are_checked_and_fashion_ones_said_unchecked(
        tmp_path, capsys, monkeypatch) -> None:
    assert set(named.NAMED_DATASETS["mnist"].gunzipped_md5) == set(IDX_FILES)
    for name, folder in (("mnist", tmp_path / "m"), ("fashion-mnist", tmp_path / "f")):
        write_mnist_files(folder)
        for gz in IDX_FILES:  # gunzipped only: the loader reads those
            (folder / gz[: -len(".gz")]).write_bytes(gzip.decompress((folder / gz).read_bytes()))
            (folder / gz).unlink()
        monkeypatch.setattr(named, "_warned", set())
        load_raw(parse_dataset_spec(f"{name}:{folder}"))
        err = capsys.readouterr().err.strip()
        stems = ", ".join(gz[: -len(".gz")] for gz in IDX_FILES)
        assert err.startswith(f"warning: {folder}: {stems} ") and "\n" not in err
        if name == "mnist":  # MNIST's content MD5s are published: these test files differ
            assert "differ from the official MNIST files (MD5)" in err
        else:
            assert "cannot be checked against the official Fashion-MNIST files" in err
            assert "keep the official .gz files beside them" in err


# --- --download, offline through file:// URLs ---------------------------------------------


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def test_fetch_verifies_the_checksum_and_writes_atomically(tmp_path) -> None:
    source = tmp_path / "served.gz"
    source.write_bytes(b"the official bytes")
    dest_dir = tmp_path / "data"
    dest_dir.mkdir()
    with pytest.raises(DataError) as e:
        fetch_verified([source.as_uri()], dest_dir / "f.gz", md5="0" * 32)
    assert "not the official" in message_of(e)
    assert list(dest_dir.iterdir()) == []  # nothing behind, not even a temporary file
    fetch_verified([(tmp_path / "nowhere").as_uri(), source.as_uri()], dest_dir / "f.gz",
                   md5=_md5(source))  # the first mirror fails, the second serves it
    assert [p.name for p in dest_dir.iterdir()] == ["f.gz"]
    assert (dest_dir / "f.gz").read_bytes() == b"the official bytes"


def _serve(monkeypatch, name: str, served: Path, md5s: dict[str, str] | None = None) -> None:
    """Point a named dataset's resources at ``served`` (file:// URLs) with the served
    files' own checksums (or ``md5s``)."""
    dataset = named.NAMED_DATASETS[name]
    resources = tuple(replace(r, urls=((served / r.filename).as_uri(),),
                              md5=(md5s or {}).get(r.filename, _md5(served / r.filename)))
                      for r in dataset.resources)
    monkeypatch.setitem(named.NAMED_DATASETS, name, replace(dataset, resources=resources))


def test_download_fetches_mnist_then_it_loads(tmp_path, monkeypatch) -> None:
    arrays = write_mnist_files(tmp_path / "served")
    _serve(monkeypatch, "mnist", tmp_path / "served")
    data = tmp_path / "cache" / "mnist"
    assert download_declared([parse_dataset_spec(f"mnist:{data}"), None]) == [f"mnist:{data}"]
    assert sorted(p.name for p in data.iterdir()) == sorted(IDX_FILES)
    raw = load_raw(parse_dataset_spec(f"mnist:{data}"))
    np.testing.assert_array_equal(raw.labels, arrays["train_labels"])


def test_download_unpacks_the_cifar_archive(tmp_path, monkeypatch) -> None:
    write_cifar10_dir(tmp_path / "src")
    served = tmp_path / "served"
    served.mkdir()
    with tarfile.open(served / "cifar-10-python.tar.gz", "w:gz") as tar:
        tar.add(tmp_path / "src" / "cifar-10-batches-py", arcname="cifar-10-batches-py")
    _serve(monkeypatch, "cifar10", served)
    data = tmp_path / "c10"
    named.download_named("cifar10", data)
    assert [p.name for p in data.iterdir()] == ["cifar-10-batches-py"]  # archive unpacked, gone
    assert len(load_raw(parse_dataset_spec(f"cifar10:{data}"))) == 30


def test_a_download_with_the_wrong_checksum_leaves_nothing(tmp_path, monkeypatch) -> None:
    write_mnist_files(tmp_path / "served")
    _serve(monkeypatch, "mnist", tmp_path / "served", md5s={IDX_FILES[1]: "0" * 32})
    data = tmp_path / "mnist"
    with pytest.raises(DataError) as e:
        named.download_named("mnist", data)
    assert IDX_FILES[1] in message_of(e) and "not the official" in message_of(e)
    assert [p.name for p in data.iterdir()] == [IDX_FILES[0]]  # verified before; no temp file
    # A folder the download created and left empty is removed again.
    _serve(monkeypatch, "mnist", tmp_path / "served", md5s={IDX_FILES[0]: "0" * 32})
    with pytest.raises(DataError):
        named.download_named("mnist", tmp_path / "other")
    assert not (tmp_path / "other").exists()


def test_an_archive_escaping_its_folder_is_refused(tmp_path, monkeypatch) -> None:
    served = tmp_path / "served"
    served.mkdir()
    payload = tmp_path / "evil.txt"
    payload.write_text("x")
    with tarfile.open(served / "cifar-10-python.tar.gz", "w:gz") as tar:
        tar.add(payload, arcname="../../escaped.txt")
    _serve(monkeypatch, "cifar10", served)
    with pytest.raises(DataError) as e:
        named.download_named("cifar10", tmp_path / "c10")
    assert "cannot unpack" in message_of(e)
    assert not (tmp_path / "escaped.txt").exists() and not list(tmp_path.glob("**/escaped.txt"))


def test_download_needs_a_named_dataset() -> None:
    with pytest.raises(DataError) as e:
        download_declared([parse_dataset_spec("idx:/x"), parse_dataset_spec("digits"), None])
    assert "--download fetches the named datasets" in message_of(e)
