"""Parquet image datasets: an ``image`` bytes column and an integer ``label`` column.

Schema read by :func:`load_parquet_raw` and written by :func:`write_parquet`:

* ``image``: encoded image bytes (PNG, JPEG, ...), either a binary column (files
  written before the Hugging Face layout) or a struct column with a ``bytes``
  field (as Hugging Face ``datasets`` writes its ``Image`` feature:
  ``struct<bytes: binary, path: string>``).
* ``label``: an integer column.
* Optional schema metadata ``b"raydp_synth.class_names"``: a JSON list of class
  names indexed by label. Without it, Hugging Face ``ClassLabel`` names (schema
  metadata ``b"huggingface"``) are used if present. Without either, the file
  declares no class set and the caller must (``--num-classes K``: labels
  ``0..K-1``, named ``"0"`` .. ``str(K-1)``). The labels present never define
  the classes: a declared class may have no row (docs/privacy.md, "What the
  guarantee assumes public").

:func:`write_parquet` writes the Hugging Face layout: the ``image`` struct column
(PNG bytes, null path), an ``int64`` ``label`` column, and both declarations of the
class names: ours, and the schema metadata ``b"huggingface"`` that ``datasets``
reads its features from (:func:`hugging_face_features`), so that
``datasets.load_dataset("parquet", data_files=...)`` decodes ``image`` as an
``Image`` and ``label`` as a ``ClassLabel``.

Locations are local paths or any URI that :func:`pyarrow.fs.FileSystem.from_uri`
understands (``file:///...``, ``s3://...``, ``gs://...``); a directory is read
as one dataset of all its Parquet files.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.fs as pa_fs
import pyarrow.parquet as pq
from PIL import Image

from raydp_synth.data.dataset import RawImages
from raydp_synth.data.decode import decode_image, stack_images
from raydp_synth.errors import DataError

if TYPE_CHECKING:  # pyarrow.dataset imports pandas (~0.3 s); load it only when reading
    import pyarrow.dataset as pa_dataset

__all__ = ["CLASS_NAMES_KEY", "HF_IMAGE_TYPE", "HF_METADATA_KEY", "hugging_face_features",
           "load_parquet_raw", "write_parquet"]

CLASS_NAMES_KEY = b"raydp_synth.class_names"
"""Schema metadata key holding the JSON list of class names."""

IMAGE_COLUMN = "image"
LABEL_COLUMN = "label"
_HF_KEY = b"huggingface"
HF_METADATA_KEY = _HF_KEY
"""Schema metadata key of Hugging Face ``datasets``' features (JSON ``{"info": {"features": ...}}``)."""

HF_IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
"""The Arrow storage of Hugging Face ``datasets``' ``Image`` feature."""


def hugging_face_features(class_names: Sequence[str]) -> dict[str, dict[str, object]]:
    """The ``datasets`` features of a file :func:`write_parquet` writes, as
    ``Features.to_dict`` serialises them (``datasets`` fills in the fields left out
    with their defaults: ``Image(decode=True)``, ``ClassLabel(names=...)``)."""
    return {"image": {"_type": "Image"},
            "label": {"names": list(class_names), "_type": "ClassLabel"}}


def _one_line(exc: BaseException) -> str:
    """Collapse an exception's message onto one line.

    Args:
        exc: Any exception.

    Returns:
        Its message with all whitespace runs replaced by single spaces.
    """
    return " ".join(str(exc).split()) or type(exc).__name__


def _resolve(uri: str | Path) -> tuple[pa_fs.FileSystem, str]:
    """Turn a local path or filesystem URI into a pyarrow filesystem and path.

    Args:
        uri: A local path (``~`` is expanded) or a URI with a scheme.

    Returns:
        ``(filesystem, path within it)``.

    Raises:
        DataError: If the URI's filesystem is unknown or unreachable.
    """
    text = str(uri)
    if "://" not in text:
        return pa_fs.LocalFileSystem(), str(Path(text).expanduser().absolute())
    try:
        filesystem, path = pa_fs.FileSystem.from_uri(text)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise DataError(
            f"{text}: cannot open filesystem ({_one_line(exc)}); pass a local path or a "
            "URI such as file:///abs/path.parquet or s3://bucket/key.parquet"
        ) from exc
    return filesystem, str(path)


def _class_names_from_metadata(metadata: dict[bytes, bytes], uri: str) -> tuple[str, ...] | None:
    """Read class names from schema metadata, ours first, then Hugging Face's.

    Args:
        metadata: The Parquet schema metadata (may be empty).
        uri: Names the dataset in error messages.

    Returns:
        The class names, or ``None`` if the metadata declares none.

    Raises:
        DataError: If our metadata key is present but malformed.
    """
    raw = metadata.get(CLASS_NAMES_KEY)
    if raw is not None:
        try:
            names = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise DataError(
                f"{uri}: schema metadata {CLASS_NAMES_KEY.decode()} is not valid JSON "
                f"({_one_line(exc)}); store a JSON list of class-name strings"
            ) from exc
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise DataError(
                f"{uri}: schema metadata {CLASS_NAMES_KEY.decode()} must be a non-empty JSON "
                'list of strings; store e.g. ["cat", "dog"]'
            )
        return tuple(names)
    hf = metadata.get(_HF_KEY)
    if hf is None:
        return None
    try:
        feature = json.loads(hf)["info"]["features"][LABEL_COLUMN]
        names = feature["names"]
    except (ValueError, UnicodeDecodeError, KeyError, TypeError):
        return None
    if isinstance(names, list) and names and all(isinstance(n, str) for n in names):
        return tuple(names)
    return None


def _image_bytes(column: pa.ChunkedArray, uri: str) -> list[bytes]:
    """Extract the encoded bytes of every row of the ``image`` column.

    Args:
        column: The ``image`` column (binary, or struct with a ``bytes`` field).
        uri: Names the dataset in error messages.

    Returns:
        One ``bytes`` object per row.

    Raises:
        DataError: If the column type is unsupported or a row has no bytes.
    """
    kind = column.type
    is_binary = pa.types.is_binary(kind) or pa.types.is_large_binary(kind)
    is_struct = pa.types.is_struct(kind) and kind.get_field_index("bytes") >= 0
    if is_struct:
        field = kind.field(kind.get_field_index("bytes")).type
        is_struct = pa.types.is_binary(field) or pa.types.is_large_binary(field)
    if not (is_binary or is_struct):
        raise DataError(
            f"{uri}: column {IMAGE_COLUMN!r} has type {kind}; store encoded image bytes "
            "(binary) or a struct with a binary 'bytes' field"
        )
    rows = column.to_pylist()
    out: list[bytes] = []
    for index, row in enumerate(rows):
        data = row.get("bytes") if isinstance(row, dict) else row
        if not data:
            raise DataError(
                f"{uri}: row {index} of column {IMAGE_COLUMN!r} has no image bytes; "
                "embed the encoded image in every row"
            )
        out.append(data)
    return out


def _labels(column: pa.ChunkedArray, uri: str) -> np.ndarray:
    """Convert the ``label`` column to ``int64``.

    Args:
        column: The ``label`` column.
        uri: Names the dataset in error messages.

    Returns:
        ``int64 [N]`` label values as stored.

    Raises:
        DataError: If the column is not integer or has nulls.
    """
    if not pa.types.is_integer(column.type):
        raise DataError(
            f"{uri}: column {LABEL_COLUMN!r} has type {column.type}; store integer class labels"
        )
    if column.null_count:
        first = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        raise DataError(
            f"{uri}: row {first} of column {LABEL_COLUMN!r} is null; give every row a label"
        )
    return np.asarray(column.to_numpy(), dtype=np.int64)


def _open_dataset(uri: str | Path) -> pa_dataset.Dataset:
    """Open a Parquet file or directory as a pyarrow dataset.

    Args:
        uri: Local path or filesystem URI.

    Returns:
        The dataset (at least one file).

    Raises:
        DataError: If the location is missing, empty or not Parquet.
    """
    import pyarrow.dataset as pa_dataset

    text = str(uri)
    filesystem, path = _resolve(uri)
    try:
        info = filesystem.get_file_info(path)
    except (pa.ArrowException, OSError) as exc:
        raise DataError(
            f"{text}: cannot access ({_one_line(exc)}); check the path and credentials"
        ) from exc
    if info.type == pa_fs.FileType.NotFound:
        raise DataError(f"{text}: Parquet file or directory does not exist; check the path")
    try:
        dataset = pa_dataset.dataset(path, filesystem=filesystem, format="parquet")
        _ = dataset.schema
    except (pa.ArrowException, OSError) as exc:
        raise DataError(
            f"{text}: not a readable Parquet file ({_one_line(exc)}); pass a .parquet file "
            "or a directory of them"
        ) from exc
    if not dataset.files:
        raise DataError(f"{text}: directory contains no Parquet files; add .parquet files")
    return dataset


def load_parquet_raw(uri: str | Path, *, num_classes: int | None = None,
                     size: int | None = None, channels: int | None = None) -> RawImages:
    """Load images and labels from a Parquet file or directory.

    Args:
        uri: Local path or pyarrow filesystem URI of a ``.parquet`` file or a
            directory of them.
        num_classes: The declared class count, used when the schema declares no
            class names (a schema declaration takes precedence; the caller
            checks that the two agree).
        size: The declared side (every image resized to it, what a dataset spec
            loads with: :func:`~raydp_synth.data.spec.declared_image`), or ``None``.
        channels: The declared channels (1 or 3; every image converted), or ``None``.

    Returns:
        ``RawImages`` in row order, in the declared channels; without a
        declaration grayscale if every image is grayscale else RGB.

    Raises:
        DataError: If the location is missing or not Parquet, a column is
            missing or mistyped, the table is empty, a row cannot be decoded,
            no class set is declared, a label is out of range for the declared
            classes, or (without a declared size) the images differ in size.
    """
    text = str(uri)
    dataset = _open_dataset(uri)
    schema = dataset.schema
    for column in (IMAGE_COLUMN, LABEL_COLUMN):
        if schema.get_field_index(column) < 0:
            raise DataError(
                f"{text}: missing column {column!r} (found {schema.names}); store encoded "
                f"images in {IMAGE_COLUMN!r} and integer labels in {LABEL_COLUMN!r}"
            )
    try:
        table = dataset.to_table(columns=[IMAGE_COLUMN, LABEL_COLUMN])
    except (pa.ArrowException, OSError) as exc:
        raise DataError(
            f"{text}: cannot read Parquet data ({_one_line(exc)}); check that all files "
            "share one schema and are not corrupt"
        ) from exc
    if table.num_rows == 0:
        raise DataError(f"{text}: Parquet table has no rows; add at least one image")

    encoded = _image_bytes(table.column(IMAGE_COLUMN), text)
    values = _labels(table.column(LABEL_COLUMN), text)
    declared = _class_names_from_metadata(schema.metadata or {}, text)
    if declared is None:
        if num_classes is None:
            raise DataError(
                f"{text}: the Parquet schema declares no class names "
                f"({CLASS_NAMES_KEY.decode()} or Hugging Face ClassLabel metadata); "
                "declare the class count K for labels 0..K-1 in the dataset spec "
                "(parquet:URI:classes=K)"
            )
        declared = tuple(str(k) for k in range(num_classes))
    bad = np.flatnonzero((values < 0) | (values >= len(declared)))
    if bad.size:
        row = int(bad[0])
        raise DataError(
            f"{text}: row {row} has label {int(values[row])} outside the {len(declared)} "
            f"declared classes; use labels 0..{len(declared) - 1} or declare more classes"
        )
    labels, class_names = values, declared

    decoded = [
        decode_image(data, origin=f"{text}: row {index}") for index, data in enumerate(encoded)
    ]
    return RawImages(
        images=stack_images(decoded, source=text, size=size, channels=channels),
        labels=labels,
        class_names=class_names,
        source=text,
    )


def _encode_png(image: np.ndarray) -> bytes:
    """Encode one ``uint8 [C, H, W]`` image as PNG.

    Args:
        image: A grayscale (``C = 1``) or RGB (``C = 3``) image.

    Returns:
        The PNG bytes.
    """
    pixels = image[0] if image.shape[0] == 1 else image.transpose(1, 2, 0)
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(pixels)).save(buffer, format="PNG")
    return buffer.getvalue()


def write_parquet(
    path: str | Path,
    images_uint8: np.ndarray,
    labels: np.ndarray,
    class_names: Sequence[str],
    *,
    metadata: Mapping[str, str] | None = None,
) -> None:
    """Write images and labels as a Parquet file that :func:`load_parquet_raw` reads.

    Images are stored as PNG bytes in the ``image`` struct column (Hugging Face's
    ``Image`` storage, :data:`HF_IMAGE_TYPE`), labels as ``int64`` in ``label``,
    and the class names as JSON in the schema metadata, under our key and as
    Hugging Face ``ClassLabel`` names (:func:`hugging_face_features`).

    Args:
        path: Destination file: local path (parent folders are created) or a
            pyarrow filesystem URI.
        images_uint8: ``uint8 [N, C, H, W]`` images with ``C`` in ``{1, 3}``.
        labels: Integer labels ``[N]`` in ``[0, len(class_names))``.
        class_names: One unique name per class.
        metadata: More schema metadata (e.g. how the rows were drawn), under keys
            other than the class-name keys.

    Raises:
        DataError: If the inputs are malformed or the file cannot be written.
    """
    text = str(path)
    label_array = np.asarray(labels)
    if label_array.ndim != 1 or not np.issubdtype(label_array.dtype, np.integer):
        raise DataError(
            f"{text}: labels must be a 1-D integer array, got {label_array.dtype} of shape "
            f"{label_array.shape}; pass integer class indices"
        )
    if isinstance(class_names, str):
        raise DataError(f"{text}: class_names must be a sequence of strings, not one string")
    raw = RawImages(
        images=images_uint8,
        labels=label_array.astype(np.int64),
        class_names=tuple(class_names),
        source=text,
    )
    if len(raw) == 0:
        raise DataError(f"{text}: no images to write; pass at least one image")
    hf_info = {"info": {"features": hugging_face_features(raw.class_names)}}
    extra = {key.encode("utf-8"): value.encode("utf-8") for key, value in (metadata or {}).items()}
    if CLASS_NAMES_KEY in extra or _HF_KEY in extra:
        raise DataError(f"{text}: metadata may not replace the class-name keys")
    schema = pa.schema(
        [(IMAGE_COLUMN, HF_IMAGE_TYPE), (LABEL_COLUMN, pa.int64())],
        metadata={CLASS_NAMES_KEY: json.dumps(list(raw.class_names)).encode("utf-8"),
                  _HF_KEY: json.dumps(hf_info).encode("utf-8"), **extra},
    )
    table = pa.table(
        {
            IMAGE_COLUMN: pa.array([{"bytes": _encode_png(image), "path": None}
                                    for image in raw.images], type=HF_IMAGE_TYPE),
            LABEL_COLUMN: pa.array(raw.labels, type=pa.int64()),
        },
        schema=schema,
    )
    filesystem, target = _resolve(path)
    try:
        if isinstance(filesystem, pa_fs.LocalFileSystem):
            Path(target).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, target, filesystem=filesystem)
    except (pa.ArrowException, OSError) as exc:
        raise DataError(
            f"{text}: cannot write Parquet file ({_one_line(exc)}); check the path"
        ) from exc
