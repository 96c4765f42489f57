from __future__ import annotations

import json
import os
import stat

import pytest

from raydp_synth.accountant.ledger import Ledger
from raydp_synth.errors import ConfigError


def _entries(n: int) -> list[dict]:
    noop = {"type": "NoOpDpEvent"}
    return [{"kind": "grant", "trial_id": f"t{i}", "event": noop} for i in range(n)]


def _fsynced_inodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Spy on os.fsync (still calling it): the inode of every fsync'd descriptor."""
    seen: list[int] = []
    real = os.fsync

    def spy(fd: int) -> None:
        seen.append(os.fstat(fd).st_ino)
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    return seen


def test_round_trip_fsync_and_owner_only(tmp_path, monkeypatch):
    ledger = Ledger(tmp_path / "study" / "ledger.jsonl")
    assert ledger.entries() == []
    synced = _fsynced_inodes(monkeypatch)
    first, second, third = _entries(3)
    ledger.append(first, create=True)
    # the file, and the directory that now holds its name, were fsync'd
    assert ledger.path.stat().st_ino in synced
    assert ledger.path.parent.stat().st_ino in synced
    synced.clear()
    ledger.append(second)
    ledger.append(third)
    assert synced == [ledger.path.stat().st_ino] * 2  # one fsync per append, no dir
    assert ledger.entries() == [first, second, third]
    assert Ledger(ledger.path).entries() == [first, second, third]  # a fresh reader
    assert stat.S_IMODE(ledger.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(ledger.path.parent.stat().st_mode) == 0o700
    lines = ledger.path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and all(json.loads(line) for line in lines[:-1])


@pytest.mark.parametrize(
    "torn",
    [
        b'{"kind": "grant", "trial_id": "t9", "ev',  # crash mid-write
        b'{"kind": "grant", "trial_id": "t9"}',  # complete JSON, newline never written
        b"\x00\x00\x00\x00\n",  # size extended, data never written
        b'{"kind": "gr\n',
    ],
)
def test_torn_last_line_is_ignored_and_overwritten(tmp_path, torn):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    first, second, third = _entries(3)
    ledger.append(first, create=True)
    ledger.append(second)
    with open(ledger.path, "ab") as f:
        f.write(torn)
    assert ledger.entries() == [first, second]
    ledger.append(third)
    assert ledger.entries() == [first, second, third]
    assert ledger.path.read_bytes().count(b"\n") == 3
    assert b"t9" not in ledger.path.read_bytes()


def test_corrupt_middle_line_raises_naming_file_and_line(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    for entry in _entries(3):
        ledger.append(entry, create=True)
    lines = ledger.path.read_bytes().split(b"\n")
    lines[1] = b'{"kind": "grant", "tri'
    ledger.path.write_bytes(b"\n".join(lines))
    with pytest.raises(ConfigError, match=r"ledger\.jsonl is corrupt at line 2"):
        ledger.entries()


def test_rejects_entries_that_are_not_kinded_dicts(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    with pytest.raises(ConfigError):
        ledger.append({"trial_id": "t0"})
    with pytest.raises(ConfigError):
        ledger.append({"kind": "grant", "x": object()})
    assert not ledger.path.exists() or ledger.entries() == []


def test_only_the_first_entry_creates_the_ledger(tmp_path):
    """Storage that vanished (deleted, unmounted) is an error, never a fresh ledger
    that would forget the grants before it."""
    ledger = Ledger(tmp_path / "study" / "ledger.jsonl")
    first, second = _entries(2)
    with pytest.raises(FileNotFoundError):
        ledger.append(first)
    assert not ledger.path.parent.exists()
    ledger.append(first, create=True)
    ledger.path.unlink()
    with pytest.raises(FileNotFoundError):
        ledger.append(second)
    assert not ledger.path.exists()


def test_a_full_disk_appends_nothing(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    first, second = _entries(2)
    ledger.append(first, create=True)
    real = tmp_path / "real.jsonl"
    ledger.path.rename(real)
    ledger.path.symlink_to("/dev/full")  # every write fails with ENOSPC
    with pytest.raises(OSError, match="No space left on device"):
        ledger.append(second)
    ledger.path.unlink()
    real.rename(ledger.path)
    assert ledger.entries() == [first]
