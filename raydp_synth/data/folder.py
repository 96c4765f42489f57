"""Image folders: one sub-folder per class, any PIL-readable image format.

Layout::

    root/
      cat/ 001.png 002.jpg ...
      dog/ 001.png ...

Class names are the sorted sub-folder names and a class's label is its index.
The sub-folders declare the class set: an empty class folder is a declared class
with no record, which is valid (the class set is a public fact of the privacy
statement and must not depend on which records are present). Hidden entries
(names starting with ``.``) are ignored; every other file in a class folder must
be a decodable image. Files directly inside ``root`` are ignored.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from raydp_synth.data.dataset import RawImages
from raydp_synth.data.decode import decode_image, stack_images
from raydp_synth.errors import DataError

__all__ = ["load_folder_raw"]


def _visible(path: Path) -> bool:
    """Whether a directory entry is not hidden.

    Args:
        path: The entry.

    Returns:
        ``False`` for names starting with ``.``.
    """
    return not path.name.startswith(".")


def load_folder_raw(directory: str | Path, *, size: int | None = None,
                    channels: int | None = None) -> RawImages:
    """Load an image folder with one sub-folder per class.

    With the declared ``size`` and ``channels`` (what a dataset spec loads with,
    :func:`~raydp_synth.data.spec.declared_image`) every image is converted to
    them. Without (a bare call), all images are converted to one mode: grayscale
    (one channel) if every image is grayscale or 1-bit, else RGB (three channels).

    Args:
        directory: The root folder (``~`` is expanded).
        size: The declared side (every image resized to it), or ``None``.
        channels: The declared channels (1 or 3), or ``None``.

    Returns:
        ``RawImages`` with images ordered by class, then by file name.

    Raises:
        DataError: If the folder is missing, has no class sub-folders, no
            class folder has an image, a file cannot be decoded, or (without a
            declared size) the images differ in size.
    """
    root = Path(directory).expanduser()
    if not root.is_dir():
        raise DataError(
            f"{root}: image folder does not exist; pass a folder with one sub-folder per class"
        )
    class_dirs = sorted(
        (p for p in root.iterdir() if p.is_dir() and _visible(p)), key=lambda p: p.name
    )
    if not class_dirs:
        raise DataError(
            f"{root}: no class sub-folders found; put each class's images in its own "
            f"sub-folder, e.g. {root / 'cat' / '001.png'}"
        )
    decoded = []
    labels: list[int] = []
    for label, class_dir in enumerate(class_dirs):
        files = sorted(
            (p for p in class_dir.iterdir() if p.is_file() and _visible(p)), key=lambda p: p.name
        )
        for file in files:
            decoded.append(decode_image(file, origin=str(file)))
            labels.append(label)
    if not decoded:
        raise DataError(
            f"{root}: none of the {len(class_dirs)} class folders contains an image; "
            "add images to the class folders"
        )
    images = stack_images(decoded, source=str(root), size=size, channels=channels)
    return RawImages(
        images=images,
        labels=np.asarray(labels, dtype=np.int64),
        class_names=tuple(p.name for p in class_dirs),
        source=str(root),
    )
