"""How the one-line errors and notes of search spaces write values."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["kind_of", "one_line", "show"]


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) made one space."""
    return " ".join(text.split())


def kind_of(value: Any) -> str:
    """What a YAML value is, for "expected a mapping, got a list"."""
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, str):
        return "a string"
    return type(value).__name__


def show(value: Any) -> str:
    """A setting's value as a config error writes it (``0.001``, ``(0.1, 0.5)``)."""
    if isinstance(value, tuple):
        return "(" + ", ".join(show(v) for v in value) + ")"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
