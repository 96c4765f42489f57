"""The method registry: a static table of method names -> method classes.

Adding a method is one folder under ``raydp_synth/methods/`` and one line in
:data:`METHODS` (see docs/adding-a-method.md).
"""

from __future__ import annotations

from raydp_synth.errors import ConfigError
from raydp_synth.methods.base import Method
from raydp_synth.methods.dpaf import DPAF
from raydp_synth.methods.dpgan import DPGAN
from raydp_synth.methods.dpwgan import DPWGAN
from raydp_synth.methods.privimage import PrivImageD, PrivImageG

__all__ = ["METHODS", "get_method", "method_names"]

#: Every built-in method, by the name users give on the command line.
METHODS: dict[str, type[Method]] = {
    "dpaf": DPAF,
    "dpgan": DPGAN,
    "dpwgan": DPWGAN,
    "privimage-g": PrivImageG,
    "privimage-d": PrivImageD,
}


def get_method(name: str) -> Method:
    """A new instance of the method called ``name`` (methods hold no state).

    Raises:
        ConfigError: unknown name (the message lists the registered ones).
    """
    if name not in METHODS:
        raise ConfigError(
            f"unknown method {name!r}; registered methods: {', '.join(method_names())}"
        )
    return METHODS[name]()


def method_names() -> list[str]:
    """The registered method names, sorted."""
    return sorted(METHODS)
