"""Data layer: load image datasets, split them and prepare model-ready arrays.

Typical use::

    from raydp_synth.data import load_dataset

    splits = load_dataset("digits")          # or "mnist", "celeba:64:DIR", "idx:DIR", ...
    splits.train.images                      # float32 [N, C, H, W] in [-1, 1]
"""

from __future__ import annotations

from raydp_synth.data.dataset import DatasetSplits, ImageDataset, RawImages
from raydp_synth.data.info import DataInfo, data_info, sensitive_records
from raydp_synth.data.parquet import write_parquet
from raydp_synth.data.public import PublicDeclaration, load_training_data, parse_public_spec
from raydp_synth.data.spec import DatasetSpec, load_dataset, load_raw, parse_dataset_spec
from raydp_synth.data.transforms import default_image_size

__all__ = [
    "DataInfo",
    "DatasetSpec",
    "DatasetSplits",
    "ImageDataset",
    "PublicDeclaration",
    "RawImages",
    "data_info",
    "default_image_size",
    "load_dataset",
    "load_training_data",
    "load_raw",
    "parse_dataset_spec",
    "parse_public_spec",
    "sensitive_records",
    "write_parquet",
]
