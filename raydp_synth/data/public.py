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
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from raydp_synth.data.dataset import DatasetSplits, ImageDataset
from raydp_synth.data.spec import (
    NAMED_KINDS,
    absolute_spec,
    load_dataset,
    load_raw,
    parse_dataset_spec,
)
from raydp_synth.data.splits import record_uniforms
from raydp_synth.data.transforms import resize_uint8, to_unit_range
from raydp_synth.errors import DataError

__all__ = [
    "PublicDeclaration",
    "absolute_public_spec",
    "effective_public",
    "load_public_records",
    "load_training_data",
    "parse_public_spec",
    "public_records",
    "public_with_data_dir",
]

_LOG = logging.getLogger(__name__)

_FRACTION = ":fraction="
_PUBLIC_PERSON = b"raydp-public-v1"


@dataclass(frozen=True, kw_only=True)
class PublicDeclaration:
    """A parsed ``--public`` value.

    Attributes:
        dataset: canonical dataset spec string.
        fraction: the public fraction of it (``None``: all of it).
    """

    dataset: str
    fraction: float | None = None

    def __str__(self) -> str:
        return self.dataset if self.fraction is None else f"{self.dataset}{_FRACTION}{self.fraction:g}"


def parse_public_spec(text: str) -> PublicDeclaration:
    """Parse ``SPEC`` or ``SPEC:fraction=F`` (0 < F < 1).

    Raises:
        DataError: a malformed spec or fraction (one line, with the fix).
    """
    spec, sep, value = str(text).strip().rpartition(_FRACTION)
    if not sep:
        return PublicDeclaration(dataset=str(parse_dataset_spec(text)))
    try:
        fraction = float(value)
    except ValueError:
        fraction = float("nan")
    if not 0.0 < fraction < 1.0:
        raise DataError(f"the public data {text}: fraction must be a number strictly "
                        "between 0 and 1; write e.g. digits:fraction=0.02")
    return PublicDeclaration(dataset=str(parse_dataset_spec(spec)), fraction=fraction)


def absolute_public_spec(text: str | None) -> str | None:
    """``--public`` with a local location made absolute (see
    :func:`~raydp_synth.data.spec.absolute_spec`); ``None`` stays ``None``."""
    if text is None:
        return None
    declared = parse_public_spec(text)
    return str(PublicDeclaration(dataset=absolute_spec(declared.dataset), fraction=declared.fraction))


def _public_part(images: np.ndarray, labels: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """Mask of the records whose keyed hash (of the record alone) is below ``fraction``."""
    return record_uniforms(images, labels, seed, person=_PUBLIC_PERSON) < fraction


def load_training_data(
    dataset: str,
    *,
    public: str | None,
    image_size: int | None = None,
    seed: int = 0,
) -> tuple[DatasetSplits, ImageDataset | None]:
    """The training dataset's splits and the declared public records (or ``None``).

    With ``--public SPEC:fraction=F`` on the training dataset itself, the public
    records are taken out of the training split (validation and test keep theirs).

    Raises:
        DataError: bad specs, an empty public part or private remainder, a public
            dataset of another shape or class count.
    """
    splits = load_dataset(dataset, image_size=image_size, seed=seed)
    if public is None:
        return splits, None
    declared = parse_public_spec(public)
    train = splits.train
    public_spec, training_spec = parse_dataset_spec(declared.dataset), parse_dataset_spec(dataset)
    # The same records, whatever class declaration either spec carries.
    if public_spec.source == training_spec.source:
        if public_spec.num_classes not in (None, train.num_classes):
            raise DataError(f"the public data {public} declares {public_spec.num_classes} "
                            f"classes, the training data {train.num_classes}; declare the class "
                            "count once")
        if declared.fraction is None:
            raise DataError(f"the public data {public} names the training dataset itself (all "
                            f"of it would be public); declare a part with "
                            f"{declared.dataset}:fraction=0.02")
        mask = _public_part(train.images, train.labels, declared.fraction, seed)
        keep = ~mask
        if not mask.any() or not keep.any():
            raise DataError(f"the public data {public}: the public part of the {len(train)} "
                            "training records would be "
                            + ("empty" if not mask.any() else "everything")
                            + "; choose another fraction")
        private = ImageDataset(images=train.images[keep], labels=train.labels[keep],
                               num_classes=train.num_classes, name=train.name)
        records = ImageDataset(images=train.images[mask], labels=train.labels[mask],
                               num_classes=train.num_classes, name=str(declared), public=True)
        return DatasetSplits(train=private, val=splits.val, test=splits.test,
                             class_names=splits.class_names), records
    records = load_public_records(declared.dataset, like=train,
                                  what=f"the public data {public}")
    if declared.fraction is not None:
        mask = _public_part(records.images, records.labels, declared.fraction, seed)
        if not mask.any():
            raise DataError(f"the public data {public}: no record falls in the public fraction; "
                            "raise the fraction")
        records = ImageDataset(images=records.images[mask], labels=records.labels[mask],
                               num_classes=train.num_classes, name=str(declared), public=True)
    return splits, records


def load_public_records(spec: str, *, like: ImageDataset, what: str) -> ImageDataset:
    """Every record of a dataset declared public (unsplit, its own test files too),
    resized like ``like``; ``what`` names the declaration in errors (e.g. "the
    public data digits:fraction=0.3")."""
    # A public dataset that declares no class set is declared like the training data.
    raw = load_raw(parse_dataset_spec(spec), default_classes=like.num_classes)
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
                        num_classes=like.num_classes, name=spec, public=True)


def effective_public(method: Any, dataset: str, public: str | None) -> str | None:
    """The user's ``--public``, or the method's documented default for ``dataset``
    (announced on stdout: declaring data public is the curator's decision)."""
    if public is not None:
        return public
    default = method.default_public.get(str(parse_dataset_spec(dataset)))
    if default is not None:
        _LOG.info(f"{method.name}: no public data declared; using the documented "
                  f"default declaration {default} (see README)")
    return default


def public_records(spec: str, *, like: ImageDataset, seed: int) -> ImageDataset:
    """Every record of a dataset the user declared public, shaped like ``like``."""
    del seed  # a public dataset is used whole
    return load_public_records(spec, like=like, what=f"the public validation data {spec}")


def public_with_data_dir(text: str | None, dataset: str) -> str | None:
    """``--public`` (or ``--public-validation``) with the training dataset's folder
    (``--data-dir``) filled in where it names the same named dataset without one:
    ``--dataset mnist --data-dir D --public mnist:fraction=0.02`` declares a part of
    the records in D, the training records, not of the default folder's copy.
    ``None`` stays ``None``."""
    if text is None:
        return None
    declared = parse_public_spec(text)
    public, training = parse_dataset_spec(declared.dataset), parse_dataset_spec(dataset)
    if (public.kind != training.kind or public.kind not in NAMED_KINDS
            or public.location is not None or training.location is None):
        return text
    filled = replace(public, location=training.location)
    return str(PublicDeclaration(dataset=str(filled), fraction=declared.fraction))
