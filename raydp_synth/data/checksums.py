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

The check is of the file the loader reads. MNIST-style IDX files may sit in their
folder gunzipped, and the loader then reads the gunzipped one even when the ``.gz``
is beside it; their publishers state MD5s for the ``.gz`` files. So a gunzipped file
is checked against the published MD5 of the ``.gz`` file's content where one is
known (:func:`md5_mismatches`' ``gunzipped``), else against its ``.gz`` sibling's
content when that sibling is the official file; with neither, it cannot be checked
and is reported as such. A ``.gz`` file with other bytes but the official content
(gzip output depends on the compressor) is the official data.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tempfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["CACHE_NAME", "Mismatches", "cached_md5", "file_md5", "md5_mismatches"]

CACHE_NAME = ".raydp_synth-md5.json"
"""The per-folder cache of file checksums."""

_CHUNK = 1 << 20


def file_md5(path: Path, *, gunzip: bool = False) -> str:
    """The MD5 (hex) of a file's bytes, or with ``gunzip`` of its gzip content,
    read in chunks.

    Raises:
        OSError: If the file cannot be read (or, with ``gunzip``, is not gzip).
    """
    digest = hashlib.md5(usedforsecurity=False)  # integrity against a published value
    with (gzip.open(path, "rb") if gunzip else path.open("rb")) as handle:
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


def cached_md5(root: Path, relative: str, *, gunzip: bool = False) -> str:
    """The MD5 of ``root / relative`` (with ``gunzip``: of its gzip content), from
    the folder's cache when the file's size and modification time are those it was
    hashed at.

    Raises:
        OSError: If the file cannot be read (or, with ``gunzip``, is not gzip).
    """
    path = root / relative
    stat = path.stat()
    key = f"{relative}|gunzip" if gunzip else relative
    cache = _read_cache(root)
    entry = cache.get(key)
    if (isinstance(entry, dict) and entry.get("size") == stat.st_size
            and entry.get("mtime_ns") == stat.st_mtime_ns and isinstance(entry.get("md5"), str)):
        return str(entry["md5"])
    md5 = file_md5(path, gunzip=gunzip)
    cache[key] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "md5": md5}
    _write_cache(root, cache)
    return md5


@dataclass(frozen=True)
class Mismatches:
    """The outcome of :func:`md5_mismatches`: files (relative paths, as read) whose
    MD5 differs from the official one, and gunzipped files no official MD5 covers."""

    differ: list[str] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)


def _gunzipped_md5(root: Path, relative: str) -> str | None:
    """The MD5 of ``root / relative``'s gzip content; None where it is not gzip or is
    corrupt (then it holds no official content)."""
    try:
        return cached_md5(root, relative, gunzip=True)
    except (OSError, EOFError, zlib.error):
        return None


def md5_mismatches(root: Path, official: Mapping[str, str],
                   gunzipped: Mapping[str, str] | None = None) -> Mismatches:
    """Check the files that a loader reads under ``root`` against their official MD5s.

    Args:
        root: The dataset's folder.
        official: relative path -> the official file's MD5. Absent files are skipped.
        gunzipped: for ``.gz`` entries of ``official``, the MD5 of the official
            file's gzip content, where its publisher states one.

    Returns:
        ``differ``: each file as read whose MD5 is not the official one. A ``.gz``
        entry is read gunzipped when the gunzipped file is beside it (that file is
        checked against ``gunzipped``, else against the content of an official
        ``.gz`` beside it); a ``.gz`` file whose bytes differ but whose content is
        the official content is not listed. ``unverified``: gunzipped files that
        neither covers.
    """
    gunzipped = gunzipped or {}
    differ: list[str] = []
    unverified: list[str] = []
    for relative, md5 in official.items():
        stem = relative[: -len(".gz")] if relative.endswith(".gz") else None
        if stem is not None and (root / stem).is_file():
            expected = gunzipped.get(relative)
            if (expected is None and (root / relative).is_file()
                    and cached_md5(root, relative) == md5):
                expected = _gunzipped_md5(root, relative)
            if expected is None:
                unverified.append(stem)
            elif cached_md5(root, stem) != expected:
                differ.append(stem)
        elif (root / relative).is_file() and cached_md5(root, relative) != md5:
            if relative not in gunzipped or (_gunzipped_md5(root, relative)
                                             != gunzipped[relative]):
                differ.append(relative)
    return Mismatches(differ, unverified)
