"""Shared command-line plumbing: user errors become one line and exit code 2."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from raydp_synth.errors import ConfigError, UserError

__all__ = ["parse_settings", "run_cli"]


def parse_settings(items: Sequence[str]) -> dict[str, str]:
    """``["mu=8", "layer_split=C2-C1-x"]`` -> ``{"mu": "8", ...}``."""
    settings: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r} is not of the form key=value (e.g. --set mu=8)")
        settings[key.strip()] = value.strip()
    return settings


def run_cli(main: Callable[[list[str] | None], int], argv: list[str] | None = None) -> None:
    """Run ``main``; a :class:`UserError` prints ``error: ...`` and exits with 2."""
    try:
        code = main(argv)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(code)
