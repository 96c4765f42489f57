"""Dataset spec strings (``digits``, ``mnist``, ``celeba:64``, ``idx:DIR``, ...).

A spec names a dataset on the command line or in a config file. Only the text
before the first ``:`` is the kind, so ``parquet:s3://bucket/x.parquet`` keeps
its URI intact. :func:`load_dataset` turns a spec into ready splits; the
dataset's name is the canonical spec string.

The named datasets (``mnist``, ``fashion-mnist``, ``cifar10``, ``celeba``;
:mod:`raydp_synth.data.named`) take their folder as an optional location
(``mnist:/data/mnist``; ``--data-dir``), else the default cache folder, which
:func:`absolute_spec` writes into the spec so that a Ray worker reads the same
folder. CelebA also takes its decode size: ``celeba[:SIZE][:DIR]`` (default 32).

**The class set is declared, never read off the labels present.** It fixes the
model's architecture and is a public fact of the privacy statement, so it must
not depend on which records are in the data (docs/privacy.md, "What the
guarantee assumes public"). It comes from the dataset's own declaration (the
digits loader's 10 classes, a named dataset's, an image folder's class
directories, Parquet schema metadata) or from the user: ``--num-classes K`` on
the CLIs, written into the spec as the suffix ``:classes=K``
(``idx:/data/mnist:classes=10``) so that it travels with the dataset wherever the
spec goes (a study's trials, ``run.json``, the evaluation). Formats that declare
nothing (IDX files, Parquet without class metadata) need it; a declaration that
disagrees with the dataset's own is refused.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from raydp_synth.data.celeba import CELEBA_SIZES
from raydp_synth.data.dataset import DatasetSplits, RawImages
from raydp_synth.data.digits import load_digits_raw
from raydp_synth.data.folder import load_folder_raw
from raydp_synth.data.idx import load_idx_raw
from raydp_synth.data.named import NAMED_DATASETS, default_data_dir, load_named_raw
from raydp_synth.data.parquet import load_parquet_raw
from raydp_synth.data.splits import split_dataset
from raydp_synth.data.transforms import default_image_size
from raydp_synth.errors import DataError

__all__ = [
    "CELEBA_DEFAULT_SIZE",
    "DATASET_KINDS",
    "DIGITS_CLASSES",
    "DatasetSpec",
    "NAMED_KINDS",
    "absolute_spec",
    "load_dataset",
    "load_raw",
    "parse_dataset_spec",
    "with_data_dir",
    "with_num_classes",
]

NAMED_KINDS = tuple(NAMED_DATASETS)
"""The named datasets: ``mnist``, ``fashion-mnist``, ``cifar10``, ``celeba``."""

DATASET_KINDS = ("digits", *NAMED_KINDS, "idx", "folder", "parquet")
"""Valid spec kinds: ``digits`` takes no location, a named dataset an optional
folder, the others a required one."""

DIGITS_CLASSES = 10
"""The digits loader's known class set: the ten digits."""

CELEBA_DEFAULT_SIZE = 32
"""CelebA's decode size when the spec names none."""

_VALID_FORMS = ("digits | mnist | fashion-mnist | cifar10 | celeba[:SIZE] (each [:DIR]) | "
                "idx:DIR | folder:DIR | parquet:URI")
_CLASSES = ":classes="


@dataclass(frozen=True, kw_only=True)
class DatasetSpec:
    """A parsed dataset spec.

    Attributes:
        kind: One of :data:`DATASET_KINDS`.
        location: The folder or URI; ``None`` for ``"digits"`` and for a named
            dataset in its default folder.
        num_classes: The class count the user declared (``--num-classes``,
            suffix ``:classes=K``), or ``None``: the dataset's own declaration.
        size: CelebA's decode size (default 32); ``None`` for every other kind.
    """

    kind: str
    location: str | None = None
    num_classes: int | None = None
    size: int | None = None

    def __post_init__(self) -> None:
        """Check the kind and that a location is given exactly when needed.

        Raises:
            DataError: If the kind is unknown or the location is missing or
                superfluous.
        """
        if self.kind not in DATASET_KINDS:
            raise DataError(f"unknown dataset kind {self.kind!r}; use one of: {_VALID_FORMS}")
        if self.kind == "digits" and self.location is not None:
            raise DataError(
                f"dataset 'digits' takes no location, got {self.location!r}; write just 'digits'"
            )
        if self.kind in NAMED_KINDS:
            if self.location is not None and (not isinstance(self.location, str)
                                              or not self.location):
                raise DataError(f"dataset {self.kind!r}: the folder must be a non-empty path; "
                                f"write {self.kind} or {self.kind}:DIR")
        elif self.kind != "digits" and (not isinstance(self.location, str) or not self.location):
            placeholder = "URI" if self.kind == "parquet" else "DIR"
            raise DataError(
                f"dataset kind {self.kind!r} needs a location; write {self.kind}:{placeholder}"
            )
        if self.kind == "celeba":
            if self.size is None:
                object.__setattr__(self, "size", CELEBA_DEFAULT_SIZE)
            _check_celeba_size(self.size)
        elif self.size is not None:
            raise DataError(f"dataset {self.kind!r} takes no image size (only celeba:SIZE does); "
                            "resize with --set image_size=N")
        if self.num_classes is not None:
            _check_num_classes(self.num_classes)
            known = self.known_classes
            if known is not None and self.num_classes != known:
                raise DataError(
                    f"dataset {self.kind!r} has {known} classes, not {self.num_classes}; "
                    "drop the class count declaration"
                )

    @property
    def known_classes(self) -> int | None:
        """The class count the kind itself declares (digits, a named dataset), or ``None``."""
        if self.kind == "digits":
            return DIGITS_CLASSES
        if self.kind in NAMED_KINDS:
            return len(NAMED_DATASETS[self.kind].class_names)
        return None

    @property
    def data_dir(self) -> str | None:
        """A named dataset's folder (the location, else the default cache folder);
        ``None`` for the other kinds."""
        if self.kind not in NAMED_KINDS:
            return None
        return self.location if self.location is not None else str(default_data_dir(self.kind))

    @property
    def source(self) -> str:
        """Where the records come from (kind and location, without the class
        declaration or CelebA's decode size; a named dataset's default folder
        spelled out): two specs with the same source name the same records."""
        location = self.data_dir if self.kind in NAMED_KINDS else self.location
        return self.kind if location is None else f"{self.kind}:{location}"

    def __str__(self) -> str:
        """Return the canonical spec string, e.g. ``"idx:/data/mnist:classes=10"`` or
        ``"celeba:64:/data/celeba"`` (a kind that declares its classes never shows
        the count)."""
        head = self.kind if self.size is None else f"{self.kind}:{self.size}"
        text = head if self.location is None else f"{head}:{self.location}"
        if self.num_classes is None or self.known_classes is not None:
            return text
        return f"{text}{_CLASSES}{self.num_classes}"


def _check_celeba_size(value: object) -> int:
    """CelebA's decode size: a power of two from 8 to 128.

    Raises:
        DataError: otherwise.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value not in CELEBA_SIZES:
        raise DataError(f"CelebA image size {value!r} is not one of {list(CELEBA_SIZES)}; "
                        "write e.g. celeba:64")
    return value


def _check_num_classes(value: object) -> int:
    """A declared class count: an integer >= 1.

    Raises:
        DataError: otherwise.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DataError(f"the declared class count {value!r} must be a whole number >= 1, e.g. 10")
    return value


def parse_dataset_spec(spec: str) -> DatasetSpec:
    """Parse a spec string.

    Grammar: ``digits`` | ``NAME[:DIR]`` | ``celeba[:SIZE][:DIR]`` | ``idx:DIR`` |
    ``folder:DIR`` | ``parquet:URI``, each optionally followed by ``:classes=K``
    (the declared class count), where NAME is ``mnist``, ``fashion-mnist`` or
    ``cifar10``. The kind is case-insensitive and surrounding whitespace is
    ignored; the location is everything after the first ``:`` (after CelebA's
    size: a first segment of digits) up to a final ``:classes=K``. A CelebA folder
    whose name is all digits is written ``celeba:./64``.

    Args:
        spec: The spec string.

    Returns:
        The parsed spec.

    Raises:
        DataError: If the string does not match the grammar.
    """
    if not isinstance(spec, str):
        raise DataError(
            f"dataset spec must be a string, got {type(spec).__name__}; use one of: {_VALID_FORMS}"
        )
    text = spec.strip()
    head, sep, count = text.rpartition(_CLASSES)
    num_classes = None
    if sep:
        try:
            num_classes = int(count)
        except ValueError:
            raise DataError(
                f"dataset spec {spec!r}: classes={count!r} is not a whole number; "
                "write e.g. idx:DIR:classes=10"
            ) from None
        _check_num_classes(num_classes)
        text = head.strip()
    kind, sep, location = text.partition(":")
    kind = kind.strip().lower()
    if kind not in DATASET_KINDS:
        raise DataError(f"unknown dataset spec {spec!r}; use one of: {_VALID_FORMS}")
    if kind == "digits":
        if sep:
            raise DataError(
                f"dataset spec {spec!r}: 'digits' takes no location; write just 'digits'"
            )
        return DatasetSpec(kind=kind, num_classes=num_classes)
    if kind in NAMED_KINDS:
        return _parse_named(spec, kind, location.strip() if sep else None, num_classes)
    if not location.strip():
        placeholder = "URI" if kind == "parquet" else "DIR"
        raise DataError(f"dataset spec {spec!r} has no location; write {kind}:{placeholder}")
    return DatasetSpec(kind=kind, location=location.strip(), num_classes=num_classes)


def _parse_named(spec: str, kind: str, rest: str | None, num_classes: int | None) -> DatasetSpec:
    """A named dataset's optional ``[SIZE:]DIR`` (the size for CelebA only)."""
    size = None
    if kind == "celeba" and rest is not None:
        head, sep, tail = rest.partition(":")
        if head.strip().isdigit():
            size = int(head)
            rest = tail.strip() if sep else None
    if rest is not None and not rest:
        form = "celeba[:SIZE][:DIR]" if kind == "celeba" else f"{kind}[:DIR]"
        raise DataError(f"dataset spec {spec!r} has an empty folder; write {form}")
    return DatasetSpec(kind=kind, location=rest, num_classes=num_classes, size=size)


def with_data_dir(spec: str, data_dir: str | None) -> str:
    """The spec string with ``--data-dir`` folded in as a named dataset's folder.

    Args:
        spec: A spec string.
        data_dir: ``--data-dir``, or ``None`` (``spec`` is returned as is).

    Raises:
        DataError: a malformed spec, a spec that is not a named dataset, or one that
            already names another folder.
    """
    if data_dir is None:
        return spec
    parsed = parse_dataset_spec(spec)
    if parsed.kind not in NAMED_KINDS:
        where = ("" if parsed.kind == "digits"
                 else f" (write its folder in the spec: {parsed.kind}:DIR)")
        raise DataError(f"--data-dir is the folder of a named dataset ({', '.join(NAMED_KINDS)}), "
                        f"not of {spec}{where}; drop --data-dir")
    if not str(data_dir).strip():
        raise DataError("--data-dir is empty; pass the folder of the dataset's files")
    if parsed.location is not None and _same_path(parsed.location) != _same_path(data_dir):
        raise DataError(f"the dataset spec {spec} already names the folder {parsed.location}, "
                        f"--data-dir another ({data_dir}); give the folder once")
    return str(replace(parsed, location=str(data_dir)))


def _same_path(path: str) -> str:
    """A local path made absolute, ``~`` expanded."""
    return os.path.abspath(os.path.expanduser(path))


def with_num_classes(spec: str, num_classes: int | None) -> str:
    """The spec string with the user's ``--num-classes`` declaration folded in.

    Args:
        spec: A spec string (may already carry ``:classes=K``).
        num_classes: ``--num-classes``, or ``None`` (``spec`` is returned as is).

    Raises:
        DataError: a malformed spec, a count < 1, or a spec that already declares
            another count.
    """
    if num_classes is None:
        return spec
    parsed = parse_dataset_spec(spec)
    _check_num_classes(num_classes)
    if parsed.num_classes is not None and parsed.num_classes != num_classes:
        raise DataError(
            f"the declared class count {num_classes} disagrees with the dataset spec {spec}; "
            "declare the class count once"
        )
    return str(replace(parsed, num_classes=num_classes))


def absolute_spec(spec: str) -> str:
    """The spec with a local location made absolute (``~`` expanded), so that it names
    the same files in a Ray worker, whose working directory (and environment) is
    not the user's: a named dataset without a folder gets its default cache folder
    spelled out. URIs with a scheme (``s3://``, ``gs://``, ``file://``) are left as
    they are.

    Raises:
        DataError: a malformed spec.
    """
    parsed = parse_dataset_spec(spec)
    if parsed.kind in NAMED_KINDS:
        return str(replace(parsed, location=_same_path(str(parsed.data_dir))))
    location = parsed.location
    if location is None or "://" in location:
        return str(parsed)
    return str(replace(parsed, location=_same_path(location)))


def load_raw(spec: DatasetSpec, *, default_classes: int | None = None) -> RawImages:
    """Load the decoded images a spec names, with their declared class set.

    The class set is the dataset's own declaration (digits: 10; a named
    dataset's; an image folder's class directories; Parquet class metadata),
    else the spec's ``:classes=K``, else ``default_classes`` (a caller's declaration for data
    that must be like other data: public records like the training data, a
    test split like a released generator). A class may have no record.

    Args:
        spec: The parsed spec.
        default_classes: The class count to use when neither the dataset nor
            the spec declares one.

    Returns:
        The decoded, not yet resized images.

    Raises:
        DataError: If the data cannot be loaded, declares no class set and none
            is given, a label lies outside the declared classes, or the spec's
            declaration disagrees with the dataset's own.
    """
    declared = spec.num_classes if spec.num_classes is not None else default_classes
    location = spec.location if spec.location is not None else ""
    if spec.kind == "digits":
        raw = load_digits_raw()
    elif spec.kind in NAMED_KINDS:
        raw = load_named_raw(spec.kind, spec.location, size=spec.size or CELEBA_DEFAULT_SIZE)
    elif spec.kind == "idx":
        raw = load_idx_raw(location, num_classes=declared)
    elif spec.kind == "folder":
        raw = load_folder_raw(location)
    else:
        raw = load_parquet_raw(location, num_classes=declared)
    if spec.num_classes is not None and len(raw.class_names) != spec.num_classes:
        raise DataError(
            f"{raw.source}: the dataset declares {len(raw.class_names)} classes "
            f"({_preview(raw.class_names)}) but {spec.num_classes} were declared "
            f"(:classes={spec.num_classes}); drop the declaration or make the two agree"
        )
    return raw


def _preview(names: tuple[str, ...], limit: int = 5) -> str:
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (", ..." if len(names) > limit else "")


def load_dataset(
    spec: str | DatasetSpec,
    *,
    image_size: int | None = None,
    seed: int = 0,
    public: bool = False,
    default_classes: int | None = None,
) -> DatasetSplits:
    """Load, split, resize and scale the dataset a spec names.

    Args:
        spec: A spec string or parsed spec.
        image_size: Side length of the model images; ``None`` picks
            :func:`~raydp_synth.data.transforms.default_image_size` of the
            source's native size (8x8 digits -> 16, 28x28 MNIST -> 32, CelebA:
            its decode size).
        seed: Seed of the deterministic split.
        public: Whether the user declared the dataset public.
        default_classes: The class count for a dataset that declares none (see
            :func:`load_raw`).

    Returns:
        Train/validation/test splits named after the canonical spec string.

    Raises:
        DataError: If the spec is invalid or the data cannot be loaded or split.
    """
    parsed = spec if isinstance(spec, DatasetSpec) else parse_dataset_spec(spec)
    raw = load_raw(parsed, default_classes=default_classes)
    size = default_image_size(raw.native_size) if image_size is None else image_size
    return split_dataset(raw, image_size=size, seed=seed, public=public, name=str(parsed))
