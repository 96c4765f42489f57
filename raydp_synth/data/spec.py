"""Dataset spec strings (``digits``, ``mnist``, ``celeba:64``, ``idx:DIR``, ...).

A spec names a dataset on the command line or in a config file. Only the text
before the first ``:`` is the kind, so ``parquet:s3://bucket/x.parquet`` keeps
its URI intact. :func:`load_dataset` turns a spec into ready splits; the
dataset's name is the canonical spec string.

The named datasets (``mnist``, ``fashion-mnist``, ``cifar10``, ``celeba``;
:mod:`raydp_synth.data.named`) take their folder as an optional location
(``mnist:/data/mnist``; ``--data-dir``), else the default cache folder, which
:meth:`DatasetSpec.absolute` writes into the spec so that a Ray worker reads the
same folder. CelebA also takes its decode size: ``celeba[:SIZE][:DIR]`` (default 32).

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

**So are the image size and channels.** They fix the architecture too and are
public facts of the statement. The digits, the named datasets and IDX files
declare them by their format (digits 8x8, MNIST 28x28, CIFAR-10 32x32 RGB, CelebA
its decode size; IDX: the header's dimensions, grayscale). An image folder or a
Parquet file declares nothing, so the user may: ``:size=S`` (each record is
resized to S x S) and ``:channels=C`` (1: grayscale, 3: RGB; each record is
converted), e.g. ``folder:/data/pets:size=64:channels=3``. Undeclared, the size
is the model's image size the data is resized to (``--set image_size``, else
:data:`DECLARED_DEFAULT_SIZE`) and the channels are
:data:`DECLARED_DEFAULT_CHANNELS` (RGB). A record of another size or mode is
converted to the declared facts, never the other way round: one colour image
does not make a grayscale dataset RGB, and one image of another size does not
change the size. A declaration that disagrees with a format's own is refused.
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
    "DECLARED_DEFAULT_CHANNELS",
    "DECLARED_DEFAULT_SIZE",
    "DIGITS_CLASSES",
    "DatasetSpec",
    "NAMED_KINDS",
    "declared_dataset",
    "declared_image",
    "load_dataset",
    "load_raw",
    "parse_dataset_spec",
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

DECLARED_KINDS = ("folder", "parquet")
"""Kinds whose format declares no image size or channels: the user may (``:size=S``,
``:channels=C``)."""

DECLARED_DEFAULT_SIZE = 32
"""An image folder's or Parquet file's record size when neither the spec
(``:size=S``) nor the model (``--set image_size``) declares one."""

DECLARED_DEFAULT_CHANNELS = 3
"""An image folder's or Parquet file's channels when the spec declares none (RGB;
grayscale records are replicated)."""

_KNOWN_CHANNELS = {"digits": 1, "mnist": 1, "fashion-mnist": 1, "idx": 1, "cifar10": 3,
                   "celeba": 3}

_VALID_FORMS = ("digits | mnist | fashion-mnist | cifar10 | celeba[:SIZE] (each [:DIR]) | "
                "idx:DIR | folder:DIR | parquet:URI")
_CLASSES = ":classes="
_CHANNELS = ":channels="
_SIZE = ":size="


@dataclass(frozen=True, kw_only=True)
class DatasetSpec:
    """A parsed dataset spec.

    Attributes:
        kind: One of :data:`DATASET_KINDS`.
        location: The folder or URI; ``None`` for ``"digits"`` and for a named
            dataset in its default folder.
        num_classes: The class count the user declared (``--num-classes``,
            suffix ``:classes=K``), or ``None``: the dataset's own declaration.
        size: CelebA's decode size (default 32); for a folder or Parquet file the
            declared record size (suffix ``:size=S``) or ``None`` (the model's
            image size, else :data:`DECLARED_DEFAULT_SIZE`); ``None`` for the other
            kinds (their format declares it).
        channels: A folder's or Parquet file's declared channels (suffix
            ``:channels=C``, 1 or 3), or ``None``: :data:`DECLARED_DEFAULT_CHANNELS`
            (the other kinds' formats declare theirs; a matching declaration is
            accepted and dropped).
    """

    kind: str
    location: str | None = None
    num_classes: int | None = None
    size: int | None = None
    channels: int | None = None

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
        elif self.kind in DECLARED_KINDS:
            if self.size is not None:
                _check_declared_size(self.size)
        elif self.size is not None:
            raise DataError(f"dataset {self.kind!r} declares its own image size (only celeba:SIZE, "
                            "folder and parquet take one); resize with --set image_size=N")
        if self.channels is not None:
            _check_channels(self.channels)
            known = _KNOWN_CHANNELS.get(self.kind)
            if known is not None and self.channels != known:
                raise DataError(f"dataset {self.kind!r} has {known}-channel images, not "
                                f"{self.channels}; drop the channels declaration")
            if known is not None:
                object.__setattr__(self, "channels", None)  # the format's own: nothing to carry
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

    def with_num_classes(self, num_classes: int | None) -> DatasetSpec:
        """This spec with the user's ``--num-classes`` declaration folded in (``None``:
        this spec).

        Raises:
            DataError: a count < 1, or a spec that already declares another count.
        """
        if num_classes is None:
            return self
        _check_num_classes(num_classes)
        if self.num_classes is not None and self.num_classes != num_classes:
            raise DataError(
                f"the declared class count {num_classes} disagrees with the dataset spec {self}; "
                "declare the class count once"
            )
        return replace(self, num_classes=num_classes)

    def with_data_dir(self, data_dir: str | None) -> DatasetSpec:
        """This spec with ``--data-dir`` folded in as a named dataset's folder
        (``None``: this spec).

        Raises:
            DataError: a spec that is not a named dataset, an empty folder, or one
                that already names another folder.
        """
        if data_dir is None:
            return self
        if self.kind not in NAMED_KINDS:
            where = ("" if self.kind == "digits"
                     else f" (write its folder in the spec: {self.kind}:DIR)")
            raise DataError(f"--data-dir is the folder of a named dataset ({', '.join(NAMED_KINDS)}), "
                            f"not of {self}{where}; drop --data-dir")
        if not str(data_dir).strip():
            raise DataError("--data-dir is empty; pass the folder of the dataset's files")
        if self.location is not None and _same_path(self.location) != _same_path(data_dir):
            raise DataError(f"the dataset spec {self} already names the folder {self.location}, "
                            f"--data-dir another ({data_dir}); give the folder once")
        return replace(self, location=str(data_dir))

    def absolute(self) -> DatasetSpec:
        """This spec with a local location made absolute (``~`` expanded), so that it
        names the same files in a Ray worker, whose working directory (and
        environment) is not the user's: a named dataset without a folder gets its
        default cache folder spelled out. URIs with a scheme (``s3://``, ``gs://``,
        ``file://``) are left as they are."""
        if self.kind in NAMED_KINDS:
            return replace(self, location=_same_path(str(self.data_dir)))
        if self.location is None or "://" in self.location:
            return self
        return replace(self, location=_same_path(self.location))

    def __str__(self) -> str:
        """Return the canonical spec string, e.g. ``"idx:/data/mnist:classes=10"`` or
        ``"celeba:64:/data/celeba"`` (a kind that declares its classes never shows
        the count)."""
        head = self.kind if self.size is None or self.kind != "celeba" else f"{self.kind}:{self.size}"
        text = head if self.location is None else f"{head}:{self.location}"
        if self.kind in DECLARED_KINDS and self.size is not None:
            text = f"{text}{_SIZE}{self.size}"
        if self.channels is not None:
            text = f"{text}{_CHANNELS}{self.channels}"
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


def _check_declared_size(value: object) -> int:
    """A folder's or Parquet file's declared record size: an integer >= 1.

    Raises:
        DataError: otherwise.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DataError(f"the declared image size {value!r} must be a whole number >= 1; "
                        "write e.g. folder:DIR:size=32")
    return value


def _check_channels(value: object) -> int:
    """Declared channels: 1 (grayscale) or 3 (RGB).

    Raises:
        DataError: otherwise.
    """
    if isinstance(value, bool) or value not in (1, 3):
        raise DataError(f"the declared channels {value!r} must be 1 (grayscale) or 3 (RGB); "
                        "write e.g. folder:DIR:channels=1")
    return int(value)  # type: ignore[call-overload]


def _declared_suffixes(spec: str, text: str) -> tuple[str, dict[str, int]]:
    """Strip the trailing declarations ``:classes=K``, ``:size=S``, ``:channels=C`` (any
    order, each at most once) off ``text``; return the rest and the values.

    Raises:
        DataError: a value that is not a whole number, or a declaration given twice.
    """
    values: dict[str, int] = {}
    while True:
        for suffix in (_CLASSES, _SIZE, _CHANNELS):
            head, sep, value = text.rpartition(suffix)
            if sep and ":" not in value and "/" not in value:
                break
        else:
            return text, values
        name = suffix.strip(":=")
        if name in values:
            raise DataError(f"dataset spec {spec!r} declares {name} twice; declare it once")
        try:
            values[name] = int(value)
        except ValueError:
            example = {"classes": 10, "size": 32, "channels": 3}[name]
            raise DataError(
                f"dataset spec {spec!r}: {name}={value!r} is not a whole number; "
                f"write e.g. folder:DIR{suffix}{example}"
            ) from None
        text = head.strip()


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
    text, declared = _declared_suffixes(spec, spec.strip())
    num_classes = declared.get("classes")
    if num_classes is not None:
        _check_num_classes(num_classes)
    size, channels = declared.get("size"), declared.get("channels")
    kind, sep, location = text.partition(":")
    kind = kind.strip().lower()
    if kind not in DATASET_KINDS:
        raise DataError(f"unknown dataset spec {spec!r}; use one of: {_VALID_FORMS}")
    if size is not None and kind not in DECLARED_KINDS:
        raise DataError(f"dataset spec {spec!r}: only folder and parquet take :size=S "
                        "(their format declares no size); resize with --set image_size=N")
    if kind == "digits":
        if sep:
            raise DataError(
                f"dataset spec {spec!r}: 'digits' takes no location; write just 'digits'"
            )
        return DatasetSpec(kind=kind, num_classes=num_classes, channels=channels)
    if kind in NAMED_KINDS:
        return replace(_parse_named(spec, kind, location.strip() if sep else None, num_classes),
                       channels=channels)
    if not location.strip():
        placeholder = "URI" if kind == "parquet" else "DIR"
        raise DataError(f"dataset spec {spec!r} has no location; write {kind}:{placeholder}")
    return DatasetSpec(kind=kind, location=location.strip(), num_classes=num_classes,
                       size=size, channels=channels)


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


def declared_dataset(text: str, *, num_classes: int | None = None,
                     data_dir: str | None = None) -> DatasetSpec:
    """A command line's ``--dataset`` parsed once, with its ``--num-classes`` and
    ``--data-dir`` declarations folded in: the spec a run or a study carries, typed,
    to its trials and workers (its canonical string, :meth:`DatasetSpec.__str__`, is
    what files record).

    Raises:
        DataError: a malformed spec, or a declaration that does not fit it.
    """
    return parse_dataset_spec(text).with_num_classes(num_classes).with_data_dir(data_dir)


def _same_path(path: str) -> str:
    """A local path made absolute, ``~`` expanded."""
    return os.path.abspath(os.path.expanduser(path))


def load_raw(spec: DatasetSpec, *, default_classes: int | None = None,
             image_size: int | None = None, default_channels: int | None = None) -> RawImages:
    """Load the decoded images a spec names, with their declared class set, image
    size and channels.

    The class set is the dataset's own declaration (digits: 10; a named
    dataset's; an image folder's class directories; Parquet class metadata),
    else the spec's ``:classes=K``, else ``default_classes`` (a caller's declaration for data
    that must be like other data: public records like the training data, a
    test split like a released generator). A class may have no record.

    A folder's or Parquet file's records are converted to the declared size and
    channels (:func:`declared_image`), never the facts to the records.

    Args:
        spec: The parsed spec.
        default_classes: The class count to use when neither the dataset nor
            the spec declares one.
        image_size: The model's image size, a folder's or Parquet file's record
            size when the spec declares none.
        default_channels: A folder's or Parquet file's channels when the spec
            declares none (a caller's declaration, like ``default_classes``: public
            records like the training data); ``None``: :data:`DECLARED_DEFAULT_CHANNELS`.

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
        raw = load_folder_raw(location, **declared_image(spec, image_size=image_size,
                                                         default_channels=default_channels))
    else:
        raw = load_parquet_raw(location, num_classes=declared,
                               **declared_image(spec, image_size=image_size,
                                                default_channels=default_channels))
    if spec.num_classes is not None and len(raw.class_names) != spec.num_classes:
        raise DataError(
            f"{raw.source}: the dataset declares {len(raw.class_names)} classes "
            f"({_preview(raw.class_names)}) but {spec.num_classes} were declared "
            f"(:classes={spec.num_classes}); drop the declaration or make the two agree"
        )
    return raw


def declared_image(spec: DatasetSpec, *, image_size: int | None = None,
                   default_channels: int | None = None) -> dict[str, int]:
    """A folder's or Parquet file's declared record ``size`` and ``channels``: the
    spec's (``:size=S``, ``:channels=C``), else the model's ``image_size`` (else
    :data:`DECLARED_DEFAULT_SIZE`) and the caller's ``default_channels`` (else
    :data:`DECLARED_DEFAULT_CHANNELS`). Public facts, never read off the records.

    Raises:
        DataError: a kind whose format declares its own (not a folder or Parquet).
    """
    if spec.kind not in DECLARED_KINDS:
        raise DataError(f"dataset {spec.kind!r} declares its own image size and channels")
    size = spec.size if spec.size is not None else (
        DECLARED_DEFAULT_SIZE if image_size is None else _check_declared_size(image_size))
    channels = next(c for c in (spec.channels, default_channels, DECLARED_DEFAULT_CHANNELS)
                    if c is not None)
    _check_channels(channels)
    return {"size": size, "channels": channels}


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
            source's declared size (8x8 digits -> 16, 28x28 MNIST -> 32, CelebA:
            its decode size; a folder or Parquet file: its ``:size=S``, else
            :data:`DECLARED_DEFAULT_SIZE`).
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
    raw = load_raw(parsed, default_classes=default_classes, image_size=image_size)
    size = default_image_size(raw.native_size) if image_size is None else image_size
    return split_dataset(raw, image_size=size, seed=seed, public=public, name=str(parsed))
