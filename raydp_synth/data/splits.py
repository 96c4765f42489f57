"""Deterministic, per-record train/validation/test splitting of decoded images.

Every record is assigned to a split by a keyed hash of the record alone: the
raw ``uint8`` image bytes and the label are hashed with BLAKE2b under a key
derived from the public ``seed``, and the 64-bit digest gives a number ``u`` in
``[0, 1)``. Without a predefined test split a record goes to the test split if
``u < test_fraction``, to the validation split if
``u < test_fraction + val_fraction`` and to the training split otherwise. If
the source has its own test split (IDX ``t10k`` files) it is used as is, and a
record of the training files goes to the validation split if
``u < val_fraction`` and to the training split otherwise. Inside each split the
records keep their original order. Every split is then resized and scaled to
``[-1, 1]``.

Privacy: the DP guarantee is for the whole dataset ``D`` under add/remove-one
record. Because a record's split depends only on that record and the public
seed, for neighbouring datasets ``D`` and ``D' = D + {x}`` every record other
than ``x`` lands in the same split in both, so the training splits (and the
validation splits) of ``D`` and ``D'`` are neighbouring or equal, and a
mechanism that is DP on a split is DP with respect to ``D``. (A seeded
permutation of the record indices would not do: adding one record reshuffles
it and moves hundreds of records between splits.) The price is that split
sizes are Binomial rather than fixed; they are treated as public, as the
sampling rate ``q = B / n`` of DP-SGD already does (the release states them:
docs/privacy.md, "What the guarantee assumes public"). Identical duplicate
records land in the same split, which is fine: a neighbour differs in one
record. Classes are the declared ones (``raw.class_names``); a class with no
record in a split is valid.
"""

from __future__ import annotations

import hashlib

import numpy as np

from raydp_synth.data.dataset import DatasetSplits, ImageDataset, RawImages
from raydp_synth.data.transforms import check_image_size, resize_uint8, to_unit_range
from raydp_synth.errors import DataError

__all__ = ["record_uniforms", "split_dataset"]

_HASH_PERSON = b"raydp-split-v1"


def _check_fraction(value: object, *, what: str) -> float:
    """Validate a split fraction.

    Args:
        value: The candidate fraction.
        what: The parameter name, for the error message.

    Returns:
        The fraction as a ``float``.

    Raises:
        DataError: If the value is not a number strictly between 0 and 1.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)):
        raise DataError(f"{what} must be a number between 0 and 1, got {value!r}; pass e.g. 0.1")
    fraction = float(value)
    if not 0.0 < fraction < 1.0:
        raise DataError(f"{what} must be strictly between 0 and 1, got {value!r}; pass e.g. 0.1")
    return fraction


def record_uniforms(
    images: np.ndarray, labels: np.ndarray, seed: int, *, person: bytes = _HASH_PERSON
) -> np.ndarray:
    """Map every record to a number in ``[0, 1)`` that depends on it alone.

    ``u_i`` is the keyed BLAKE2b hash (64-bit digest) of record ``i``'s image
    bytes followed by its label as a little-endian ``int64``, under a key
    derived from ``seed`` and ``person`` (one personalisation per use, so that
    the uses are independent). It does not depend on any other record or on the
    record's position.

    Args:
        images: ``[N, C, H, W]`` images (the splits hash the raw ``uint8``
            images, before resizing).
        labels: ``int64 [N]`` labels.
        seed: The public, non-negative seed.
        person: BLAKE2b personalisation (at most 16 bytes).

    Returns:
        ``float64 [N]`` values in ``[0, 1)``.
    """
    key = hashlib.blake2b(str(int(seed)).encode("ascii"), digest_size=32, person=person).digest()
    base = hashlib.blake2b(key=key, digest_size=8, person=person)
    count = int(images.shape[0])
    rows = np.ascontiguousarray(images).reshape(count, -1).view(np.uint8)
    label_bytes = np.ascontiguousarray(labels, dtype="<i8")
    digests = bytearray()
    for row, label in zip(rows, label_bytes, strict=True):
        h = base.copy()
        h.update(row.data)
        h.update(label.tobytes())
        digests += h.digest()
    values = np.frombuffer(bytes(digests), dtype=">u8").astype(np.uint64)
    # Top 53 bits -> exact doubles in [0, 1).
    return (values >> np.uint64(11)).astype(np.float64) * 2.0**-53


def _check_not_empty(
    mask: np.ndarray, fraction: float, *, split: str, what: str, source: str
) -> None:
    """Refuse an empty split.

    Args:
        mask: Boolean membership of every record in the split.
        fraction: Probability of a record landing in the split.
        split: The split's name (``"val"`` or ``"test"``).
        what: The fraction parameter's name.
        source: Names the dataset in error messages.

    Raises:
        DataError: If no record landed in the split.
    """
    if not mask.any():
        raise DataError(
            f"{source}: {split} split would be empty ({mask.size} images, each in it with "
            f"probability {what}={fraction}); add more images or raise {what}"
        )


def _make_split(
    images: np.ndarray,
    labels: np.ndarray,
    *,
    image_size: int,
    num_classes: int,
    name: str,
    public: bool,
) -> ImageDataset:
    """Resize, scale and wrap one split.

    Args:
        images: ``uint8 [n, C, H, W]`` images of the split.
        labels: ``int64 [n]`` labels of the split.
        image_size: Target side length.
        num_classes: Number of classes of the whole dataset.
        name: Dataset name.
        public: Whether the user declared the dataset public.

    Returns:
        The model-ready split.
    """
    return ImageDataset(
        images=to_unit_range(resize_uint8(images, image_size)),
        labels=np.ascontiguousarray(labels, dtype=np.int64),
        num_classes=num_classes,
        name=name,
        public=public,
    )


def split_dataset(
    raw: RawImages,
    *,
    image_size: int,
    seed: int = 0,
    val_fraction: float = 0.1,
    test_fraction: float = 0.1,
    public: bool = False,
    name: str,
) -> DatasetSplits:
    """Split decoded images into resized train/validation/test datasets.

    Each record's split is a function of that record (its raw image bytes and
    label) and the public ``seed`` only, via a keyed hash ``u`` in ``[0, 1)``
    (see the module docstring). So for neighbouring datasets (one record added
    or removed) every other record keeps its split and the splits are
    neighbouring or equal, which is what lets DP on the training split (DP-SGD)
    and on the validation split (selection) imply DP for the whole dataset.
    Split sizes are Binomial, not fixed, and are treated as public. Records
    keep their original order inside each split; identical duplicate records
    land in the same split.

    Args:
        raw: The decoded images.
        image_size: Side length every split is resized to.
        seed: Public seed of the hash key; equal seeds give equal splits.
        val_fraction: Probability that a record goes to the validation split.
        test_fraction: Probability that a record goes to the test split;
            ignored when ``raw.predefined_test`` is set.
        public: Whether the user declared the dataset public.
        name: Dataset name given to every split (e.g. the spec string).

    Returns:
        The three splits and the class names.

    Raises:
        DataError: If the dataset is empty, a fraction or the image size is
            invalid, the fractions leave nothing for training, or any split is
            empty. A declared class without records is valid in every split.
    """
    source = raw.source
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise DataError(f"seed must be a non-negative integer, got {seed!r}; pass e.g. 0")
    size = check_image_size(image_size)
    if len(raw) == 0:
        raise DataError(f"{source}: dataset is empty; add images before splitting")
    val_frac = _check_fraction(val_fraction, what="val_fraction")
    total = len(raw)

    if raw.predefined_test is not None:
        test_images, test_labels = raw.predefined_test
        if test_images.shape[0] == 0:
            raise DataError(f"{source}: predefined test split is empty; add test images or drop it")
        u = record_uniforms(raw.images, raw.labels, int(seed))
        val_mask = u < val_frac
        train_mask = ~val_mask
        _check_not_empty(val_mask, val_frac, split="val", what="val_fraction", source=source)
    else:
        test_frac = _check_fraction(test_fraction, what="test_fraction")
        if test_frac + val_frac >= 1.0:
            raise DataError(
                f"{source}: train split would be empty (val_fraction + test_fraction = "
                f"{val_frac + test_frac:g} >= 1); lower val_fraction/test_fraction"
            )
        u = record_uniforms(raw.images, raw.labels, int(seed))
        test_mask = u < test_frac
        val_mask = ~test_mask & (u < test_frac + val_frac)
        train_mask = ~(test_mask | val_mask)
        _check_not_empty(test_mask, test_frac, split="test", what="test_fraction", source=source)
        _check_not_empty(val_mask, val_frac, split="val", what="val_fraction", source=source)
        test_idx = np.flatnonzero(test_mask)
        test_images, test_labels = raw.images[test_idx], raw.labels[test_idx]
    val_idx = np.flatnonzero(val_mask)
    train_idx = np.flatnonzero(train_mask)
    if train_idx.size == 0:
        raise DataError(
            f"{source}: train split would be empty ({total} images); add more images or "
            "lower val_fraction/test_fraction"
        )

    # A declared class may have no record in any split: the class set is declared
    # (public), not read off the labels, and refusing an empty class would make
    # whether a run happens depend on the data.
    train_labels = raw.labels[train_idx]

    def make(images: np.ndarray, labels: np.ndarray) -> ImageDataset:
        return _make_split(
            images,
            labels,
            image_size=size,
            num_classes=len(raw.class_names),
            name=name,
            public=public,
        )

    return DatasetSplits(
        train=make(raw.images[train_idx], train_labels),
        val=make(raw.images[val_idx], raw.labels[val_idx]),
        test=make(test_images, test_labels),
        class_names=raw.class_names,
    )
