"""The study's budget ledger: an append-only, fsync'd JSON-lines file.

The ledger is the accountant's durable memory (docs/budget-pricing.md, section 7). Every
grant is appended, flushed and fsync'd *before* the grant is returned to the trial,
so a crash of the accountant, of the driver or of a node can lose at most a grant
that no trial ever received; it can never forget budget that a trial may have
spent. The accountant rebuilds its whole state from this file on restart.

Crash consistency: only the last line can be torn (one writer at a time, each
append is one ``write`` followed by ``fsync``). A torn last line (no trailing
newline, or not valid JSON) was never acknowledged to anyone, so :meth:`Ledger.entries`
ignores it and the next :meth:`Ledger.append` truncates it before writing. A corrupt
line anywhere else means the file was damaged or edited: that is never silently
skipped, it raises :class:`~raydp_synth.errors.ConfigError` naming the file and line.

Entry kinds (written by :mod:`raydp_synth.accountant.actor`):

* ``{"kind": "study", ...}``: the header, first line: the study's budget, delta,
  pricing mode, trial count setting, distribution, reference plan and, for random
  stopping, the drawn trial count K (curator-only: never published).
* ``{"kind": "grant", "trial_id", "event", "time"}``: a plan that was granted.
* ``{"kind": "refusal", "trial_id", "reason", "time"}``: a plan that was refused.
* ``{"kind": "draw", "trial_id", "time"}`` (random stopping): the search drew this
  trial, before it proposed its configuration; only the first K drawn are granted.
  The header of such a study has ``"draw_order": true``.
* ``{"kind": "undraw", "trial_ids", "time"}`` (random stopping): draws whose trials
  never asked for a grant (they ended first, or ``--resume`` will not resume them),
  taken back; the search draws afresh in their place.

The ledger is curator-only (docs/architecture.md, section 6): it is created owner-only (0o600),
in a directory created owner-only (0o700) when it does not exist yet.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

from raydp_synth.errors import ConfigError

__all__ = ["Ledger"]

_CHUNK = 65536


def _fsync_dir(path: Path) -> None:
    """Make a directory entry (a new file or sub-directory in ``path``) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _parse_line(raw: bytes) -> dict[str, Any] | None:
    """The entry on one line, or None if the line is not a JSON object."""
    try:
        entry = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        return None
    return entry if isinstance(entry, dict) else None


def _line_start(fd: int, end: int) -> int:
    """Offset just after the last ``\\n`` before ``end`` (0 if there is none)."""
    pos = end
    while pos > 0:
        step = min(_CHUNK, pos)
        pos -= step
        chunk = os.pread(fd, step, pos)
        i = chunk.rfind(b"\n")
        if i >= 0:
            return pos + i + 1
    return 0


class Ledger:
    """An append-only JSON-lines file whose appends are durable when they return.

    Not thread-safe by itself: the accountant actor serialises its calls (Ray runs
    them one at a time). An exclusive ``flock`` around each append also keeps two
    processes that share the file (say, a stale accountant) from interleaving lines.

    Args:
        path: the ledger file (usually ``<study_dir>/ledger.jsonl``).
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r})"

    def exists(self) -> bool:
        return self.path.exists()

    def entries(self) -> list[dict[str, Any]]:
        """Every entry, in the order appended; [] if the file does not exist.

        Raises:
            ConfigError: a line other than the last is not a JSON object.
        """
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        *complete, tail = data.split(b"\n")  # tail: b"" unless the last line is torn
        out: list[dict[str, Any]] = []
        for number, raw in enumerate(complete, start=1):
            entry = _parse_line(raw)
            if entry is None:
                if number == len(complete) and not tail:
                    break  # a torn last line: never acknowledged, ignore it
                raise ConfigError(
                    f"ledger {self.path} is corrupt at line {number}: not a JSON object "
                    f"({raw[:80]!r}). The ledger is the study's record of spent privacy "
                    "budget: restore it from a backup; do not delete or edit it"
                )
            out.append(entry)
        return out

    def append(self, entry: dict[str, Any], *, create: bool = False) -> None:
        """Append one entry and make it durable (write, flush, fsync) before returning.

        A torn last line left by a crash is truncated first. When this call creates
        the file (or its directory), the parent directory is fsync'd too, so the new
        file's name survives a crash as well as its content.

        Args:
            entry: a JSON-serialisable dict with a string ``kind``.
            create: create the file (and its directory) if it does not exist: only
                for a ledger's first entry. Otherwise a missing ledger is an error:
                storage that vanished (deleted, unmounted) must not silently become
                a new, headerless ledger that forgets every earlier grant.

        Raises:
            ConfigError: ``entry`` is not a dict with a string ``kind``, or is not
                JSON-serialisable.
            OSError: the entry could not be made durable (full disk, permissions,
                a missing ledger without ``create``); nothing was appended.
        """
        if not isinstance(entry, dict) or not isinstance(entry.get("kind"), str):
            raise ConfigError(f"a ledger entry must be a dict with a 'kind', got {entry!r:.120}")
        try:
            line = json.dumps(entry, sort_keys=True, separators=(",", ":")).encode() + b"\n"
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"ledger entry is not JSON-serialisable: {exc}") from exc

        directory = self.path.parent
        created = False
        if create:
            if not directory.exists():
                directory.mkdir(mode=0o700, parents=True, exist_ok=True)
                _fsync_dir(directory.parent)
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o600)
                created = True
            except FileExistsError:
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
        else:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._drop_torn_tail(fd)
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)  # also releases the flock
        if created:
            _fsync_dir(directory)

    def _drop_torn_tail(self, fd: int) -> None:
        """Truncate a torn last line (no newline, or not a JSON object)."""
        size = os.fstat(fd).st_size
        if size == 0:
            return
        if os.pread(fd, 1, size - 1) == b"\n":
            start = _line_start(fd, size - 1)
            if _parse_line(os.pread(fd, size - 1 - start, start)) is not None:
                return
        else:
            start = _line_start(fd, size)
        os.ftruncate(fd, start)
        os.fsync(fd)
