"""The field's named datasets: ``mnist``, ``fashion-mnist``, ``cifar10``, ``celeba``.

Each is a declaration: its class set and class names (a public fact of the
privacy statement, never read off the labels present), its standard train/test
split (the test split becomes :attr:`RawImages.predefined_test`, so the run's
validation split is drawn from the training files only and the standard test
split stays untouched for evaluation), the files it is read from, with the
official MD5 of each, and where the publisher serves them.

The files live in one folder per dataset: the spec's location
(``mnist:/data/mnist``, ``--data-dir``), else :func:`default_data_dir`
(``$XDG_CACHE_HOME/raydp_synth/datasets/<name>``, by default under
``~/.cache``). Nothing is downloaded unless asked (:func:`download_named`,
``--download``); a missing file is a one-line :class:`DataError` that says which
files to put in which folder. A present file whose MD5 differs from the official
one is read, with a one-line warning (the figures of such a run are not
comparable with published ones).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from raydp_synth.data.celeba import (
    ATTRIBUTES_FILE,
    CELEBA_CLASSES,
    IMAGES_FOLDER,
    PARTITION_FILE,
    load_celeba_raw,
)
from raydp_synth.data.checksums import file_md5, md5_mismatches
from raydp_synth.data.cifar import (
    BATCHES_FOLDER,
    CIFAR10_CLASSES,
    META_FILE,
    TEST_BATCHES,
    TRAIN_BATCHES,
    load_cifar10_raw,
)
from raydp_synth.data.dataset import RawImages
from raydp_synth.data.download import extract_archive, fetch_verified
from raydp_synth.data.idx import load_idx_raw
from raydp_synth.errors import DataError

__all__ = [
    "NAMED_DATASETS",
    "NamedDataset",
    "Resource",
    "default_data_dir",
    "download_named",
    "load_named_raw",
    "missing_files",
]


@dataclass(frozen=True, kw_only=True)
class Resource:
    """A file the publisher serves.

    Attributes:
        filename: its official name (the name it is saved under in the folder).
        md5: its official MD5 (hex).
        urls: where it is served, mirrors in order.
        provides: the folder entries it supplies (itself, or what an archive
            unpacks to); it is fetched only when one of them is missing.
        unpacks_to: an archive's top-level entries to move into the folder
            (empty: not an archive). An unpacked archive is deleted.
    """

    filename: str
    md5: str
    urls: tuple[str, ...]
    provides: tuple[str, ...]
    unpacks_to: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class NamedDataset:
    """One named dataset's declaration.

    Attributes:
        name: the spec kind (``mnist``).
        title: how people write it (``MNIST``).
        class_names: the declared classes, in label order.
        required: the folder entries (files, or folders) a load needs; a
            ``.gz`` file may also be present gunzipped.
        official_md5: relative path -> official MD5 of the files checked on load.
        gunzipped_md5: for ``.gz`` files of ``official_md5``, the MD5 of their gzip
            content where the publisher states it (the loader reads a gunzipped copy
            when one is beside the ``.gz``; :func:`~raydp_synth.data.checksums.md5_mismatches`).
        resources: what :func:`download_named` fetches.
        layout: how to put the files in the folder by hand (for the error).
        loader: reads the folder (and the decode size, for CelebA).
    """

    name: str
    title: str
    class_names: tuple[str, ...]
    required: tuple[str, ...]
    official_md5: Mapping[str, str] = field(default_factory=dict)
    gunzipped_md5: Mapping[str, str] = field(default_factory=dict)
    resources: tuple[Resource, ...]
    layout: str
    loader: Callable[[Path, int], RawImages]


_IDX_FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
              "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")


def _idx_dataset(name: str, title: str, class_names: tuple[str, ...],
                 md5s: tuple[str, ...], mirrors: tuple[str, ...],
                 gunzipped_md5s: tuple[str, ...] = ()) -> NamedDataset:
    """MNIST and Fashion-MNIST: the four official IDX .gz files, read by the IDX reader
    (``gunzipped_md5s``: their contents' MD5s, in the same order, where published)."""

    def load(directory: Path, size: int) -> RawImages:
        del size  # the IDX files' own 28x28
        raw = load_idx_raw(directory, num_classes=len(class_names))
        return replace(raw, class_names=class_names)

    official = dict(zip(_IDX_FILES, md5s, strict=True))
    return NamedDataset(
        name=name, title=title, class_names=class_names, required=_IDX_FILES,
        official_md5=official,
        gunzipped_md5=dict(zip(_IDX_FILES, gunzipped_md5s, strict=True)) if gunzipped_md5s else {},
        resources=tuple(Resource(filename=f, md5=official[f], urls=tuple(m + f for m in mirrors),
                                 provides=(f,)) for f in _IDX_FILES),
        layout=f"put the four official {title} files ({', '.join(_IDX_FILES)}) in {{dir}}",
        loader=load,
    )


# The official MD5s and mirrors are the ones torchvision's datasets list
# (torchvision/datasets/mnist.py, cifar.py, celeba.py).
_MNIST = _idx_dataset(
    "mnist", "MNIST", tuple(str(digit) for digit in range(10)),
    ("f68b3c2dcbeaaa9fbdd348bbdeb94873", "d53e105ee54ea40749a09fcbcd1e9432",
     "9fb629c4189551a2d022fa330f9573f3", "ec29112dd5afa0611ce80d1b7f02629c"),
    ("https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/"),
    # The MD5s of the four files gunzipped (47,040,016, 60,008, 7,840,016 and 10,008
    # bytes), as MNIST's users publish them beside the .gz files' (Fashion-MNIST's are
    # not published: its gunzipped files are checked against their .gz files).
    ("6bbc9ace898e44ae57da46a324031adb", "a25bea736e30d166cdddb491f175f624",
     "2646ac647ad5339dbf082846283269ea", "27ae3e4e09519cfbb04c329615203637"),
)
_FASHION_MNIST = _idx_dataset(
    "fashion-mnist", "Fashion-MNIST",
    ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
     "Bag", "Ankle boot"),
    ("8d4fb7e6c68d591d4c3dfef9ec88bf0d", "25c81989df183df01b3e8a0aad5dffbe",
     "bef4ecab320f06d8554ea6380940ec79", "bb300cfdad3c16e7a12a480ee83cd310"),
    ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",),
)

_CIFAR_FILES = tuple(f"{BATCHES_FOLDER}/{name}" for name in (*TRAIN_BATCHES, *TEST_BATCHES,
                                                             META_FILE))
_CIFAR10 = NamedDataset(
    name="cifar10", title="CIFAR-10", class_names=CIFAR10_CLASSES, required=_CIFAR_FILES,
    official_md5=dict(zip(_CIFAR_FILES, (
        "c99cafc152244af753f735de768cd75f", "d4bba439e000b95fd0a9bffe97cbabec",
        "54ebc095f3ab1f0389bbae665268c751", "634d18415352ddfa80567beed471001a",
        "482c414d41f54cd18b22e5b47cb7c3cb", "40351d587109b95175f43aff81a1287e",
        "5ff9c542aee3614f3951f8cda6e48888"), strict=True)),
    resources=(Resource(filename="cifar-10-python.tar.gz", md5="c58f30108f718f92721af3b95e74349a",
                        urls=("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",),
                        provides=_CIFAR_FILES, unpacks_to=(BATCHES_FOLDER,)),),
    layout=(f"unpack the official cifar-10-python.tar.gz into {{dir}} (it holds "
            f"{BATCHES_FOLDER}/ with data_batch_1..5, test_batch and batches.meta)"),
    loader=lambda directory, size: load_cifar10_raw(directory),
)


def _drive(file_id: str) -> tuple[str, ...]:
    """CelebA's publisher serves its files from Google Drive (torchvision lists the ids)."""
    return (f"https://drive.usercontent.google.com/download?id={file_id}&export=download"
            "&confirm=t",)


_CELEBA = NamedDataset(
    name="celeba", title="CelebA", class_names=CELEBA_CLASSES,
    required=(IMAGES_FOLDER, ATTRIBUTES_FILE, PARTITION_FILE),
    official_md5={ATTRIBUTES_FILE: "75e246fa4810816ffd6ee81facbd244c",
                  PARTITION_FILE: "d32c9cbf5e040fd4025c592c306e6668"},
    resources=(
        Resource(filename="img_align_celeba.zip", md5="00d2c5bc6d35e252742224ab0c1e8fcb",
                 urls=_drive("0B7EVK8r0v71pZjFTYXZWM3FlRnM"), provides=(IMAGES_FOLDER,),
                 unpacks_to=(IMAGES_FOLDER,)),
        Resource(filename=ATTRIBUTES_FILE, md5="75e246fa4810816ffd6ee81facbd244c",
                 urls=_drive("0B7EVK8r0v71pblRyaVFSWGxPY0U"), provides=(ATTRIBUTES_FILE,)),
        Resource(filename=PARTITION_FILE, md5="d32c9cbf5e040fd4025c592c306e6668",
                 urls=_drive("0B7EVK8r0v71pY0NSMzRuSXJEVkk"), provides=(PARTITION_FILE,)),
    ),
    layout=(f"put the official CelebA files in {{dir}}: {IMAGES_FOLDER}/ (unpacked "
            f"img_align_celeba.zip), {ATTRIBUTES_FILE} and {PARTITION_FILE}"),
    loader=lambda directory, size: load_celeba_raw(directory, size=size),
)

NAMED_DATASETS: dict[str, NamedDataset] = {
    d.name: d for d in (_MNIST, _FASHION_MNIST, _CIFAR10, _CELEBA)
}
"""The named datasets by spec kind."""


def default_data_dir(name: str) -> Path:
    """``$XDG_CACHE_HOME/raydp_synth/datasets/<name>`` (an absolute XDG_CACHE_HOME;
    otherwise ``~/.cache``), absolute."""
    cache = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(cache) if cache and os.path.isabs(cache) else Path.home() / ".cache"
    return Path(os.path.abspath(base / "raydp_synth" / "datasets" / name))


def _lacks(directory: Path, relative: str) -> bool:
    """Whether ``directory`` lacks a required entry: CelebA's image folder (missing or
    empty), or a file (an IDX ``.gz`` file may be present gunzipped)."""
    path = directory / relative
    if relative == IMAGES_FOLDER:
        return not path.is_dir() or next(path.iterdir(), None) is None
    if relative.endswith(".gz") and (directory / relative[: -len(".gz")]).is_file():
        return False
    return not path.is_file()


def missing_files(dataset: NamedDataset, directory: Path) -> list[str]:
    """The required entries of ``dataset`` that ``directory`` lacks (folders with a
    trailing ``/``)."""
    missing: list[str] = []
    for relative in dataset.required:
        if not _lacks(directory, relative):
            continue
        folder, _, _ = relative.rpartition("/")
        if folder and not (directory / folder).is_dir():
            entry = folder + "/"  # a whole folder is missing: name it once
        else:
            entry = relative + ("/" if relative == IMAGES_FOLDER else "")
        if entry not in missing:
            missing.append(entry)
    return missing


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    """One line on stderr, once per process."""
    if message not in _warned:
        _warned.add(message)
        print(f"warning: {message}", file=sys.stderr, flush=True)


def _dataset(name: str) -> NamedDataset:
    try:
        return NAMED_DATASETS[name]
    except KeyError:
        raise DataError(f"unknown named dataset {name!r}; use one of: "
                        f"{', '.join(NAMED_DATASETS)}") from None


def load_named_raw(name: str, directory: str | Path | None, *, size: int) -> RawImages:
    """Read a named dataset from its folder.

    Args:
        name: The dataset (``mnist``, ``fashion-mnist``, ``cifar10``, ``celeba``).
        directory: Its folder; ``None`` is :func:`default_data_dir`.
        size: CelebA's decode size (ignored by the others).

    Returns:
        The training files' images, the standard test split as ``predefined_test``,
        and the declared class names.

    Raises:
        DataError: A required file is missing (one line: which files, which folder,
            and that ``--download`` fetches them; nothing is written then) or
            malformed.
    """
    dataset = _dataset(name)
    root = Path(directory).expanduser() if directory is not None else default_data_dir(name)
    missing = missing_files(dataset, root)
    if missing:
        raise DataError(
            f"{dataset.title} files not found in {root} (missing: {', '.join(missing)}); "
            f"{dataset.layout.format(dir=root)}, or add --download to fetch them "
            "(checksums verified)")
    try:
        checked = md5_mismatches(root, dataset.official_md5, dataset.gunzipped_md5)
    except OSError as exc:
        raise DataError(f"{root}: cannot read the {dataset.title} files ({exc}); check their "
                        "permissions") from exc
    if checked.differ:
        _warn_once(f"{root}: {', '.join(checked.differ)} differ from the official "
                   f"{dataset.title} files (MD5); figures of this run are not comparable with "
                   "published ones")
    if checked.unverified:
        _warn_once(f"{root}: {', '.join(checked.unverified)} cannot be checked against the "
                   f"official {dataset.title} files (their MD5s are published for the .gz "
                   "files); keep the official .gz files beside them to have them checked")
    raw = dataset.loader(root, size)
    return replace(raw, source=f"{dataset.title} ({root})")


def download_named(name: str, directory: str | Path | None) -> Path:
    """Fetch the official files of a named dataset that its folder lacks.

    Every file is verified against its official MD5 and renamed into place only
    then; archives are unpacked (and deleted). Files present are kept as they are
    (a present file that differs from the official one is warned about on load).

    Returns:
        The folder.

    Raises:
        DataError: No mirror served a verified copy, or an archive is corrupt. A
            folder this call created is removed again if it stayed empty.
    """
    dataset = _dataset(name)
    root = Path(directory).expanduser() if directory is not None else default_data_dir(name)
    created = not root.exists()
    root.mkdir(parents=True, exist_ok=True)
    try:
        for resource in dataset.resources:
            if not any(_lacks(root, entry) for entry in resource.provides):
                continue
            target = root / resource.filename
            if target.is_file():  # an archive fetched (or put there) before
                if file_md5(target) != resource.md5:
                    raise DataError(f"{target}: differs from the official file (MD5); delete "
                                    "it and download again")
            else:
                fetch_verified(resource.urls, target, md5=resource.md5)
            if resource.unpacks_to:
                extract_archive(target, members=resource.unpacks_to)
                target.unlink()
    except BaseException:
        if created and root.is_dir() and next(root.iterdir(), None) is None:
            root.rmdir()
        raise
    return root
