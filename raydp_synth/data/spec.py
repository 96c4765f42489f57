"""Dataset spec strings (``digits``, ``idx:DIR``, ``folder:DIR``, ``parquet:URI``).

A spec names a dataset on the command line or in a config file. Only the text
before the first ``:`` is the kind, so ``parquet:s3://bucket/x.parquet`` keeps
its URI intact. :func:`load_dataset` turns a spec into ready splits; the
dataset's name is the canonical spec string.
"""

from __future__ import annotations

from dataclasses import dataclass

from raydp_synth.data.dataset import DatasetSplits, RawImages
from raydp_synth.data.digits import load_digits_raw
from raydp_synth.data.folder import load_folder_raw
from raydp_synth.data.idx import load_idx_raw
from raydp_synth.data.parquet import load_parquet_raw
from raydp_synth.data.splits import split_dataset
from raydp_synth.data.transforms import default_image_size
from raydp_synth.errors import DataError

__all__ = ["DATASET_KINDS", "DatasetSpec", "load_dataset", "load_raw", "parse_dataset_spec"]

DATASET_KINDS = ("digits", "idx", "folder", "parquet")
"""Valid spec kinds; only ``digits`` takes no location."""

_VALID_FORMS = "digits | idx:DIR | folder:DIR | parquet:URI"


@dataclass(frozen=True, kw_only=True)
class DatasetSpec:
    """A parsed dataset spec.

    Attributes:
        kind: One of ``"digits"``, ``"idx"``, ``"folder"``, ``"parquet"``.
        location: The folder or URI; ``None`` exactly when ``kind`` is
            ``"digits"``.
    """

    kind: str
    location: str | None = None

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
        if self.kind != "digits" and (not isinstance(self.location, str) or not self.location):
            placeholder = "URI" if self.kind == "parquet" else "DIR"
            raise DataError(
                f"dataset kind {self.kind!r} needs a location; write {self.kind}:{placeholder}"
            )

    def __str__(self) -> str:
        """Return the canonical spec string, e.g. ``"idx:/data/mnist"``."""
        return self.kind if self.location is None else f"{self.kind}:{self.location}"


def parse_dataset_spec(spec: str) -> DatasetSpec:
    """Parse a spec string.

    Grammar: ``digits`` | ``idx:DIR`` | ``folder:DIR`` | ``parquet:URI``. The
    kind is case-insensitive and surrounding whitespace is ignored; the
    location is everything after the first ``:``.

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
    kind, sep, location = text.partition(":")
    kind = kind.strip().lower()
    if kind not in DATASET_KINDS:
        raise DataError(f"unknown dataset spec {spec!r}; use one of: {_VALID_FORMS}")
    if kind == "digits":
        if sep:
            raise DataError(
                f"dataset spec {spec!r}: 'digits' takes no location; write just 'digits'"
            )
        return DatasetSpec(kind=kind)
    if not location.strip():
        placeholder = "URI" if kind == "parquet" else "DIR"
        raise DataError(f"dataset spec {spec!r} has no location; write {kind}:{placeholder}")
    return DatasetSpec(kind=kind, location=location.strip())


def load_raw(spec: DatasetSpec) -> RawImages:
    """Load the decoded images a spec names.

    Args:
        spec: The parsed spec.

    Returns:
        The decoded, not yet resized images.

    Raises:
        DataError: If the data cannot be loaded.
    """
    if spec.kind == "digits":
        return load_digits_raw()
    location = spec.location if spec.location is not None else ""
    if spec.kind == "idx":
        return load_idx_raw(location)
    if spec.kind == "folder":
        return load_folder_raw(location)
    return load_parquet_raw(location)


def load_dataset(
    spec: str | DatasetSpec,
    *,
    image_size: int | None = None,
    seed: int = 0,
    public: bool = False,
) -> DatasetSplits:
    """Load, split, resize and scale the dataset a spec names.

    Args:
        spec: A spec string or parsed spec.
        image_size: Side length of the model images; ``None`` picks
            :func:`~raydp_synth.data.transforms.default_image_size` of the
            source's native size (8x8 digits -> 16, 28x28 MNIST -> 32).
        seed: Seed of the deterministic split.
        public: Whether the user declared the dataset public.

    Returns:
        Train/validation/test splits named after the canonical spec string.

    Raises:
        DataError: If the spec is invalid or the data cannot be loaded or split.
    """
    parsed = spec if isinstance(spec, DatasetSpec) else parse_dataset_spec(spec)
    raw = load_raw(parsed)
    size = default_image_size(raw.native_size) if image_size is None else image_size
    return split_dataset(raw, image_size=size, seed=seed, public=public, name=str(parsed))
