"""The public facts of a training split that a privacy plan may depend on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from raydp_synth.data.dataset import ImageDataset

__all__ = ["DataInfo", "data_info"]


@dataclass(frozen=True, kw_only=True)
class DataInfo:
    """Public facts about the sensitive training split that a plan may depend on.

    Attributes:
        num_records: n, the number of training records: a declared public fact of
            the guarantee (q = B / n publishes it; the relation is zero-out, see
            docs/privacy.md, "What the guarantee assumes public").
        image_size: side of the (square) images the model is built for.
        channels: image channels (1 or 3).
        num_classes: number of labels.
        public_records: records of the data the curator declared public
            (``--public``), which a method may use without noise; 0 when none.
    """

    num_records: int
    image_size: int
    channels: int
    num_classes: int
    public_records: int = 0


def data_info(train: ImageDataset, public: ImageDataset | None) -> DataInfo:
    """The public facts of a training split (and of the declared public records)."""
    return DataInfo(num_records=len(train), image_size=train.image_shape[1],
                    channels=train.image_shape[0], num_classes=train.num_classes,
                    public_records=len(public) if public is not None else 0)
