"""The public facts of a training split that a privacy plan may depend on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from raydp_synth.data.dataset import DatasetSplits, ImageDataset

__all__ = ["DataInfo", "data_info", "sensitive_records"]


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


def sensitive_records(splits: DatasetSplits) -> int:
    """|D|: the records of the whole sensitive dataset, every split drawn from the
    sensitive source (training, validation, test; a fraction declared public with
    ``--public SPEC:fraction=F`` is out of the training split and not counted). The
    budget's delta is checked against it (delta < 1/|D|), not against n: the
    guarantee is for D (docs/privacy.md, section 1, "Splits that neighbouring
    datasets share"). Curator-side: it is checked, never released."""
    return len(splits.train) + len(splits.val) + len(splits.test)


def data_info(train: ImageDataset, public: ImageDataset | None) -> DataInfo:
    """The public facts of a training split (and of the declared public records)."""
    return DataInfo(num_records=len(train), image_size=train.image_shape[1],
                    channels=train.image_shape[0], num_classes=train.num_classes,
                    public_records=len(public) if public is not None else 0)
