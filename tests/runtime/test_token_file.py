"""Ray's token file is private to its user when we create it, and a readable one is
said (issue: the token was 0644 in a 0755 ~/.ray)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from raydp_synth.runtime.local_cluster import private_token, token_path


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_a_new_token_is_0600_in_a_0700_folder_and_is_rays_format(home: Path) -> None:
    private_token()
    path = token_path()
    assert path.parent == home / ".ray"
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    token = path.read_text()
    assert len(token) == 64 and int(token, 16) >= 0  # 256 bits, hex, as Ray writes it
    private_token()  # an existing token is kept
    assert path.read_text() == token


def test_a_token_others_can_read_is_said_and_left_alone(home: Path, caplog) -> None:
    path = token_path()
    path.parent.mkdir(mode=0o755)
    path.write_text("ab" * 32)
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING):
        private_token()
    assert "chmod 600" in caplog.text and str(path) in caplog.text
    assert path.stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("env", [{"RAY_AUTH_MODE": "disabled"}, {"RAY_AUTH_TOKEN": "x" * 64}])
def test_no_file_where_token_auth_is_off_or_the_token_is_given(home: Path, monkeypatch,
                                                               env: dict) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    private_token()
    assert not token_path().exists()


def test_the_suites_own_token_is_private(home: Path) -> None:
    """The test suite's controller writes the token before its workers start
    (tests/conftest.py); on a fresh machine that write is the user's token from then on,
    so it is as private as the product's (it used to follow the umask: 0644)."""
    from tests.conftest import _one_ray_token_for_every_worker

    _one_ray_token_for_every_worker()
    assert token_path().stat().st_mode & 0o777 == 0o600
    assert token_path().parent.stat().st_mode & 0o777 == 0o700
