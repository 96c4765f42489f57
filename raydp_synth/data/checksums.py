"""MD5 checksums of a dataset's local files, computed once per file version.

The named datasets (:mod:`raydp_synth.data.named`) publish the MD5 of their
official files. A local file whose MD5 differs is not refused (a curator may
have good reasons, and the tests use small files in the exact formats), but the
figures of a run on it are not comparable with published ones, so the loader
says so. Hashing a large file on every load (the driver and every Ray worker
load the data) would be slow: a file's MD5 is kept in ``.raydp_synth-md5.json``
in the dataset's folder, keyed by the file's size and modification time, and
recomputed only when either changes. The cache is an optimisation: when it
cannot be read or written the MD5 is computed again.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

__all__ = ["CACHE_NAME", "cached_md5", "file_md5", "md5_mismatches"]

CACHE_NAME = ".raydp_synth-md5.json"
"""The per-folder cache of file checksums."""

_CHUNK = 1 << 20


def file_md5(path: Path) -> str:
    """The MD5 of a file's bytes (hex), read in chunks.

    Raises:
        OSError: If the file cannot be read.
    """
    digest = hashlib.md5(usedforsecurity=False)  # integrity against a published value
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _read_cache(root: Path) -> dict[str, dict[str, object]]:
    try:
        loaded = json.loads((root / CACHE_NAME).read_text())
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _write_cache(root: Path, cache: Mapping[str, object]) -> None:
    """Replace the cache atomically; a folder that cannot be written keeps no cache."""
    try:
        fd, tmp = tempfile.mkstemp(dir=root, prefix=f"{CACHE_NAME}.", suffix=".part")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(cache, handle, indent=1, sort_keys=True)
        os.replace(tmp, root / CACHE_NAME)
    except OSError:
        Path(tmp).unlink(missing_ok=True)


def cached_md5(root: Path, relative: str) -> str:
    """The MD5 of ``root / relative``, from the folder's cache when the file's size
    and modification time are those it was hashed at.

    Raises:
        OSError: If the file cannot be read.
    """
    path = root / relative
    stat = path.stat()
    cache = _read_cache(root)
    entry = cache.get(relative)
    if (isinstance(entry, dict) and entry.get("size") == stat.st_size
            and entry.get("mtime_ns") == stat.st_mtime_ns and isinstance(entry.get("md5"), str)):
        return str(entry["md5"])
    md5 = file_md5(path)
    cache[relative] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "md5": md5}
    _write_cache(root, cache)
    return md5


def md5_mismatches(root: Path, official: Mapping[str, str]) -> list[str]:
    """The files of ``official`` (relative path -> official MD5) present under
    ``root`` whose MD5 differs from the official one; absent files are skipped."""
    return [relative for relative, md5 in official.items()
            if (root / relative).is_file() and cached_md5(root, relative) != md5]
