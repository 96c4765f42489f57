"""The folders a command writes, checked at the edge: before Ray starts or anything is
written, a folder the user cannot write to is one line and exit 2, not a traceback
after Ray's start."""

from __future__ import annotations

import os
from pathlib import Path

from raydp_synth.errors import ConfigError

__all__ = ["require_writable_folder"]


def require_writable_folder(path: Path, flag: str) -> None:
    """``path`` is, or can be made as, a folder this process can write in: its nearest
    existing ancestor is a folder with write and search permission (and a read-only
    file system counts as not writable).

    Raises:
        ConfigError: naming ``flag`` (e.g. ``--out``), the folder in the way and the fix.
    """
    path = Path(path).expanduser().absolute()
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is None:  # pragma: no cover - "/" exists
        return
    if not existing.is_dir():
        raise ConfigError(f"{flag} {path}: {existing} is a file, not a folder; pass a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {path}: {existing} is not writable by this user (or is on a "
                          f"read-only file system); pass a folder you can write to")
