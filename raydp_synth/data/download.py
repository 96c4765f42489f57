"""Fetching a dataset's official files: checksum verified, written atomically, unpacked safely.

Only :func:`raydp_synth.data.named.download_named` calls this, and only when the
user asks for it (``--download``): nothing downloads by default, in tests or in
CI. A file is streamed into a temporary file beside its destination while its
MD5 is computed; only a file with the official MD5 is renamed into place, so an
interrupted or corrupted download never leaves a file that looks complete. An
archive is unpacked into a temporary folder beside its destination (tar members
through the ``data`` filter: no absolute paths, no ``..``, no links out of the
folder, no device files; zip member names are sanitised by :mod:`zipfile`) and
its top-level entries are then moved into place.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import tarfile
import tempfile
import urllib.request
import zipfile
from collections.abc import Sequence
from pathlib import Path

from raydp_synth.errors import DataError

__all__ = ["extract_archive", "fetch_verified"]

_CHUNK = 1 << 20
_TIMEOUT_S = 60


def _fetch_once(url: str, dest: Path, md5: str) -> str | None:
    """Stream ``url`` into a temporary file beside ``dest``; rename it to ``dest`` if
    its MD5 is ``md5``. Returns ``None`` on success, else why it failed (nothing left)."""
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    try:
        digest = hashlib.md5(usedforsecurity=False)  # integrity against a published value
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=_TIMEOUT_S) as src:
            while chunk := src.read(_CHUNK):
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != md5:
            return f"{url} served a file with MD5 {digest.hexdigest()}, not the official {md5}"
        os.replace(tmp, dest)
        return None
    except (OSError, ValueError, http.client.HTTPException) as exc:  # URLError is an OSError
        return f"{url}: {' '.join(str(exc).split()) or type(exc).__name__}"
    finally:
        Path(tmp).unlink(missing_ok=True)


def fetch_verified(urls: Sequence[str], dest: Path, *, md5: str) -> None:
    """Fetch a file from the first of ``urls`` (mirrors, in order) that serves a copy
    with the official MD5, and move it to ``dest`` atomically.

    Raises:
        DataError: No URL served a verified copy; nothing is left behind.
    """
    reasons = []
    for url in urls:
        print(f"[raydp_synth] downloading {url}", flush=True)
        reason = _fetch_once(url, dest, md5)
        if reason is None:
            return
        reasons.append(reason)
    raise DataError(f"{dest.name}: no verified copy could be fetched ({'; '.join(reasons)}); "
                    f"check the network, or put the official file in {dest.parent} by hand")


def _unpack(archive: Path, into: Path) -> None:
    if tarfile.is_tarfile(archive):
        with tarfile.open(archive) as tar:
            tar.extractall(into, filter="data")
    elif zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as handle:
            handle.extractall(into)
    else:
        raise DataError(f"{archive}: not a tar or zip archive; delete it and download it again")


def _move_missing(src: Path, dst: Path) -> None:
    """Move ``src`` to ``dst``; when ``dst`` is a folder already, move only what it lacks."""
    if not dst.exists():
        os.replace(src, dst)
        return
    if src.is_dir() and dst.is_dir():
        for child in src.iterdir():
            _move_missing(child, dst / child.name)


def extract_archive(archive: Path, *, members: Sequence[str]) -> None:
    """Unpack ``archive`` beside itself and move its top-level ``members`` into the
    archive's folder (what the folder has already is kept).

    Raises:
        DataError: The archive is corrupt or lacks one of ``members``; the folder is
            left as it was.
    """
    root = archive.parent
    scratch = Path(tempfile.mkdtemp(dir=root, prefix=".extract-"))
    try:
        try:
            _unpack(archive, scratch)
        except (OSError, tarfile.TarError, zipfile.BadZipFile, EOFError) as exc:
            reason = " ".join(str(exc).split()) or type(exc).__name__
            raise DataError(f"{archive}: cannot unpack ({reason}); delete it and download "
                            "it again") from exc
        absent = [name for name in members if not (scratch / name).exists()]
        if absent:
            raise DataError(f"{archive}: the archive has no {', '.join(absent)}; it is not the "
                            "official file, delete it and download it again")
        for name in members:
            _move_missing(scratch / name, root / name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
