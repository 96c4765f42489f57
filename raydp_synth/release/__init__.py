"""The release bundle: what a curator may publish.

The names below load on first use (PEP 562): ``raydp_synth.release.layout``, the
release's file names, can then be read without torch, which every other module
here imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from raydp_synth.release.bundle import privacy_statement, sample_grid, write_release
    from raydp_synth.release.generator import TrainedGenerator

__all__ = ["TrainedGenerator", "privacy_statement", "sample_grid", "write_release"]

#: Each public name and the module that defines it.
_EXPORTS = {
    "TrainedGenerator": "raydp_synth.release.generator",
    "privacy_statement": "raydp_synth.release.bundle",
    "sample_grid": "raydp_synth.release.bundle",
    "write_release": "raydp_synth.release.bundle",
}


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
