"""Data the curator declares public (docs/architecture.md, invariant 9):
``--public SPEC[:fraction=F]``.

Anything a method uses without noise (dpGAN's warm start and adaptive clip bounds,
PrivImage's pre-training) must come from a dataset the user *declared* public.
Two forms:

* ``--public SPEC``: every record of another dataset (``folder:DIR``, ...) is public.
  Naming the training dataset itself is refused: that would declare all of it public.
* ``--public SPEC:fraction=F``: the records of SPEC whose keyed hash falls below F
  are public. When SPEC is the training dataset (Zhang, Ji and Wang 2018, dpGAN splits
  MNIST 2% public / 98% private), those records are **removed from the training
  split**: the guarantee then covers the remaining records, and the release says so.

Privacy: the carve-out is a keyed hash of each record's own bytes and label (the
same construction as :mod:`raydp_synth.data.splits`, another key), so adding or
removing one record leaves every other record on its side, and the private
training splits of neighbouring datasets are neighbouring or equal.

Every flag that declares data public (``--public``, ``--public-validation``,
``--tune-on-public``; design invariant 16) refuses the training source
(:func:`same_source`: the same kind and files after normalisation) and a dataset
more than :data:`PUBLIC_OVERLAP_LIMIT` of whose records are byte-identical to
sensitive records (:func:`check_content_overlap`). Overlap below the limit, and any
overlap that is not byte-identical (near duplicates, re-encodings, the same person
photographed twice), is the curator's declaration; the release says so.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from raydp_synth.data.dataset import DatasetSplits, ImageDataset
from raydp_synth.data.spec import (
    NAMED_KINDS,
    DatasetSpec,
    load_dataset,
    load_raw,
    parse_dataset_spec,
)
from raydp_synth.data.splits import record_uniforms
from raydp_synth.data.transforms import resize_uint8, to_unit_range
from raydp_synth.errors import DataError

__all__ = [
    "PUBLIC_OVERLAP_LIMIT",
    "PUBLIC_OVERLAP_NOTE",
    "PublicDeclaration",
    "check_content_overlap",
    "check_public_validation",
    "content_overlap",
    "effective_public",
    "load_public_records",
    "load_training_data",
    "parse_public_spec",
    "public_records",
    "public_with_data_dir",
    "same_source",
    "validation_with_data_dir",
    "whole_public_dataset",
]

_LOG = logging.getLogger(__name__)

_FRACTION = ":fraction="
_PUBLIC_PERSON = b"raydp-public-v1"
_OVERLAP_PERSON = b"raydp-overlap-v1"

PUBLIC_OVERLAP_LIMIT = 0.01
"""The largest share of records that data declared public may have byte-identical to
records of the sensitive dataset (of its own records, and of the sensitive ones).
Independent collections share a few exact duplicates by chance (web-scraped images
recur), and refusing those would make a legitimate declaration fail; a copy of the
sensitive data, or of a sizeable part of it, shares far more. Records below the
limit are used without noise as the curator declared them (``privacy.json`` says so)."""

PUBLIC_OVERLAP_NOTE = (
    "checked before the run: the data declared public is not the training dataset's files, "
    f"and at most {PUBLIC_OVERLAP_LIMIT:.0%} of its records (and of the sensitive records) are "
    "byte-identical to sensitive records as loaded for the model. Overlap below that share, "
    "and any overlap that is not byte-identical after loading (near duplicates, re-encodings, "
    "crops, flips, a copy declared with another :size= or decoded by another loader, the same "
    "person photographed twice), is the curator's declaration: used without noise, not "
    "covered by the guarantee"
)
"""What ``privacy.json`` says next to the declared public data (``public_facts``)."""


@dataclass(frozen=True, kw_only=True)
class PublicDeclaration:
    """A parsed ``--public`` value.

    Attributes:
        dataset: the parsed dataset spec.
        fraction: the public fraction of it (``None``: all of it).
    """

    dataset: DatasetSpec
    fraction: float | None = None

    def __str__(self) -> str:
        """The canonical declaration, ``SPEC`` or ``SPEC:fraction=F``."""
        spec = str(self.dataset)
        return spec if self.fraction is None else f"{spec}{_FRACTION}{self.fraction:g}"

    def absolute(self) -> PublicDeclaration:
        """This declaration with its local location made absolute
        (:meth:`~raydp_synth.data.spec.DatasetSpec.absolute`)."""
        return replace(self, dataset=self.dataset.absolute())


def parse_public_spec(text: str) -> PublicDeclaration:
    """Parse ``SPEC`` or ``SPEC:fraction=F`` (0 < F < 1).

    Raises:
        DataError: a malformed spec or fraction (one line, with the fix).
    """
    spec, sep, value = str(text).strip().rpartition(_FRACTION)
    if not sep:
        return PublicDeclaration(dataset=parse_dataset_spec(text))
    try:
        fraction = float(value)
    except ValueError:
        fraction = float("nan")
    if not 0.0 < fraction < 1.0:
        raise DataError(f"the public data {text}: fraction must be a number strictly "
                        "between 0 and 1; write e.g. digits:fraction=0.02")
    return PublicDeclaration(dataset=parse_dataset_spec(spec), fraction=fraction)


def whole_public_dataset(text: str, *, flag: str) -> DatasetSpec:
    """A flag's whole dataset declared public (``--tune-on-public DATASET``), parsed:
    a spec without a fraction.

    Raises:
        DataError: a malformed spec, or a fraction (one line, with the fix).
    """
    declared = parse_public_spec(text)
    if declared.fraction is not None:
        raise DataError(f"{flag} {text}: name a whole dataset declared public "
                        "(e.g. folder:DIR), not a fraction")
    return declared.dataset


def _public_part(images: np.ndarray, labels: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """Mask of the records whose keyed hash (of the record alone) is below ``fraction``."""
    return record_uniforms(images, labels, seed, person=_PUBLIC_PERSON) < fraction


def same_source(spec: DatasetSpec, other: DatasetSpec) -> bool:
    """Whether two dataset specs name the same records: the same kind and the same
    files after normalisation (absolute, ``~`` expanded, symbolic links resolved, a
    named dataset's default folder spelled out), whatever class declaration or
    CelebA decode size either carries."""
    def files(given: DatasetSpec) -> tuple[str, str | None]:
        parsed = given.absolute()
        location = parsed.location
        if location is not None and "://" not in location:
            location = os.path.realpath(location)
        return parsed.kind, location

    return files(spec) == files(other)


def check_public_validation(spec: DatasetSpec | None, *, dataset: DatasetSpec) -> None:
    """Refuse a ``--public-validation`` that names the sensitive training dataset
    (its score would be exact and free, and in a study it would pick the release).

    Raises:
        DataError: one line, with the fix.
    """
    if spec is not None and same_source(spec, dataset):
        raise DataError(f"--public-validation {spec} names the sensitive training dataset "
                        "(the score would read it without noise); declare another dataset "
                        "public, or drop --public-validation to score on the private "
                        "validation split with noise")


def _image_keys(images: np.ndarray) -> np.ndarray:
    """A keyed hash of each record's image bytes alone (the splits' construction,
    :func:`~raydp_synth.data.splits.record_uniforms`, under its own personalisation).
    The label is left out: the same image under another label is the same record."""
    return record_uniforms(images, np.zeros(len(images), dtype=np.int64), 0,
                           person=_OVERLAP_PERSON)


def content_overlap(public: list[np.ndarray], sensitive: list[np.ndarray]) -> float:
    """The share of byte-identical records between data declared public and the
    sensitive data: the larger of the share of public records equal to a sensitive
    record and the share of sensitive records equal to a public one (so a public set
    that holds the whole sensitive set among many other records counts too).

    Args:
        public, sensitive: the image arrays of each side (e.g. its splits), all of one
            shape and dtype per side; two sides of different shapes are refused.

    Returns:
        A share in ``[0, 1]``; 0 when either side is empty.
    """
    public = [a for a in public if len(a)]
    sensitive = [a for a in sensitive if len(a)]
    if not public or not sensitive:
        return 0.0
    if (public[0].shape[1:], public[0].dtype) != (sensitive[0].shape[1:], sensitive[0].dtype):
        # Fail closed: records of another shape cannot be compared, and "nothing shared"
        # would let any copy through.
        raise DataError(f"cannot compare data declared public ({public[0].shape[1:]}, "
                        f"{public[0].dtype}) with the sensitive data ({sensitive[0].shape[1:]}, "
                        f"{sensitive[0].dtype}) record by record; declare data of the training "
                        "data's image size and channels")
    public_keys = np.concatenate([_image_keys(a) for a in public])
    sensitive_keys = np.concatenate([_image_keys(a) for a in sensitive])
    return max(float(np.isin(public_keys, sensitive_keys).mean()),
               float(np.isin(sensitive_keys, public_keys).mean()))


def check_content_overlap(public: ImageDataset | DatasetSplits, sensitive: DatasetSplits, *,
                          what: str) -> None:
    """Refuse data declared public that shares more than :data:`PUBLIC_OVERLAP_LIMIT`
    of its records (or of the sensitive records, every split) byte for byte with the
    sensitive dataset. Both are compared at the model's size, as loaded (the same
    decoded image gives the same bytes); ``what`` names the declaration.

    Raises:
        DataError: one line, with the fix.
    """
    def arrays(data: ImageDataset | DatasetSplits) -> list[np.ndarray]:
        if isinstance(data, ImageDataset):
            return [data.images]
        return [data.train.images, data.val.images, data.test.images]

    share = content_overlap(arrays(public), arrays(sensitive))
    if share > PUBLIC_OVERLAP_LIMIT:
        raise DataError(f"{what}: {share:.0%} of its records are byte-identical to records of "
                        f"the sensitive dataset (at most {PUBLIC_OVERLAP_LIMIT:.0%} may be): it "
                        "is a copy of the training data; declare a dataset without them public")


def load_training_data(
    dataset: DatasetSpec,
    *,
    public: PublicDeclaration | None,
    image_size: int | None = None,
    seed: int = 0,
    check_overlap: bool = False,
) -> tuple[DatasetSplits, ImageDataset | None]:
    """The training dataset's splits and the declared public records (or ``None``).

    With ``--public SPEC:fraction=F`` on the training dataset itself, the public
    records are taken out of the training split (validation and test keep theirs).
    With ``check_overlap`` (the driver's and the study's load, before Ray starts;
    the workers' loads skip it), another dataset's declared records are checked
    against every split (:func:`check_content_overlap`).

    Raises:
        DataError: bad specs, an empty public part or private remainder, a public
            dataset of another shape or class count, or (with ``check_overlap``)
            one that is a copy of the training data.
    """
    splits = load_dataset(dataset, image_size=image_size, seed=seed)
    if public is None:
        return splits, None
    train = splits.train
    # The same records, whatever class declaration either spec carries.
    if same_source(public.dataset, dataset):
        if public.dataset.num_classes not in (None, train.num_classes):
            raise DataError(f"the public data {public} declares {public.dataset.num_classes} "
                            f"classes, the training data {train.num_classes}; declare the class "
                            "count once")
        if public.fraction is None:
            raise DataError(f"the public data {public} names the training dataset itself (all "
                            f"of it would be public); declare a part with "
                            f"{public.dataset}:fraction=0.02")
        mask = _public_part(train.images, train.labels, public.fraction, seed)
        keep = ~mask
        if not mask.any() or not keep.any():
            raise DataError(f"the public data {public}: the public part of the {len(train)} "
                            "training records would be "
                            + ("empty" if not mask.any() else "everything")
                            + "; choose another fraction")
        private = ImageDataset(images=train.images[keep], labels=train.labels[keep],
                               num_classes=train.num_classes, name=train.name)
        records = ImageDataset(images=train.images[mask], labels=train.labels[mask],
                               num_classes=train.num_classes, name=str(public), public=True)
        return DatasetSplits(train=private, val=splits.val, test=splits.test,
                             class_names=splits.class_names), records
    records = load_public_records(public.dataset, like=train,
                                  what=f"the public data {public}")
    if public.fraction is not None:
        mask = _public_part(records.images, records.labels, public.fraction, seed)
        if not mask.any():
            raise DataError(f"the public data {public}: no record falls in the public fraction; "
                            "raise the fraction")
        records = ImageDataset(images=records.images[mask], labels=records.labels[mask],
                               num_classes=train.num_classes, name=str(public), public=True)
    if check_overlap:
        check_content_overlap(records, splits, what=f"the public data {public}")
    return splits, records


def load_public_records(spec: DatasetSpec, *, like: ImageDataset, what: str) -> ImageDataset:
    """Every record of a dataset declared public (unsplit, its own test files too),
    resized like ``like``; ``what`` names the declaration in errors (e.g. "the
    public data digits:fraction=0.3")."""
    # A public dataset that declares no class set is declared like the training data.
    raw = load_raw(spec, default_classes=like.num_classes,
                   image_size=like.image_shape[1], default_channels=like.image_shape[0])
    images, labels = raw.images, raw.labels
    if raw.predefined_test is not None:
        images = np.concatenate([images, raw.predefined_test[0]])
        labels = np.concatenate([labels, raw.predefined_test[1]])
    if len(images) == 0:
        raise DataError(f"{what}: {spec} holds no image; declare a dataset with records")
    if images.shape[1] != like.image_shape[0] or len(raw.class_names) != like.num_classes:
        raise DataError(
            f"{what} has {images.shape[1]}-channel images and {len(raw.class_names)} classes, "
            f"the training data {like.image_shape[0]} and {like.num_classes}; "
            "declare a public dataset of the same kind")
    return ImageDataset(images=to_unit_range(resize_uint8(images, like.image_shape[1])),
                        labels=np.ascontiguousarray(labels, dtype=np.int64),
                        num_classes=like.num_classes, name=str(spec), public=True)


def effective_public(method: Any, dataset: DatasetSpec,
                     public: PublicDeclaration | None) -> PublicDeclaration | None:
    """The user's ``--public``, or the method's documented default for ``dataset``
    (its declaration text, parsed here; announced on stdout: declaring data public
    is the curator's decision)."""
    if public is not None:
        return public
    default = method.default_public.get(str(dataset))
    if default is None:
        return None
    _LOG.info(f"{method.name}: no public data declared; using the documented "
              f"default declaration {default} (see README)")
    return parse_public_spec(default)


def public_records(spec: DatasetSpec, *, like: ImageDataset, seed: int) -> ImageDataset:
    """Every record of a dataset the user declared public, shaped like ``like``."""
    del seed  # a public dataset is used whole
    return load_public_records(spec, like=like, what=f"the public validation data {spec}")


def _with_training_folder(public: DatasetSpec, training: DatasetSpec) -> DatasetSpec:
    """``public`` with the training dataset's folder filled in where both name the
    same named dataset and only the training spec names a folder."""
    if (public.kind != training.kind or public.kind not in NAMED_KINDS
            or public.location is not None or training.location is None):
        return public
    return replace(public, location=training.location)


def public_with_data_dir(text: str | None, dataset: DatasetSpec) -> PublicDeclaration | None:
    """``--public`` parsed, with the training dataset's folder (``--data-dir``) filled
    in where it names the same named dataset without one: ``--dataset mnist
    --data-dir D --public mnist:fraction=0.02`` declares a part of the records in D,
    the training records, not of the default folder's copy. ``None`` stays ``None``.

    Raises:
        DataError: a malformed declaration.
    """
    if text is None:
        return None
    declared = parse_public_spec(text)
    return replace(declared, dataset=_with_training_folder(declared.dataset, dataset))


def validation_with_data_dir(text: str | None, dataset: DatasetSpec) -> DatasetSpec | None:
    """``--public-validation`` parsed, its folder filled in like
    :func:`public_with_data_dir`'s. ``None`` stays ``None``.

    Raises:
        DataError: a malformed spec.
    """
    if text is None:
        return None
    return _with_training_folder(parse_dataset_spec(text), dataset)
