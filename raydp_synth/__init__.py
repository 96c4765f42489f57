"""raydp_synth: Ray Tune + Opacus differentially private image generators under one
privacy budget for the whole search (README.md).

The public API (docs/api.md), importable from here::

    from raydp_synth import TrainRequest, run_training        # one DP run
    from raydp_synth import StudyRequest, run_study           # a search under one budget
    from raydp_synth import EvaluationSettings, evaluate_run  # the curator's evaluation
    from raydp_synth import TrainedGenerator                  # load a release, sample

Each name loads its module on first use (PEP 562): ``import raydp_synth`` imports
neither torch nor Ray, so the command lines and ``--version`` stay fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from raydp_synth.evaluation.report import EvaluationSettings, evaluate_run
    from raydp_synth.release.generator import TrainedGenerator
    from raydp_synth.train.driver import RunResult, TrainRequest, run_training
    from raydp_synth.tune.study import StudyRequest, StudyResult, run_study

#: The package's version, its single source: pyproject.toml reads it
#: (``[tool.setuptools.dynamic]``), so a checkout and an installed wheel agree.
__version__ = "0.1.0"

__all__ = [
    "EvaluationSettings",
    "RunResult",
    "StudyRequest",
    "StudyResult",
    "TrainRequest",
    "TrainedGenerator",
    "evaluate_run",
    "run_study",
    "run_training",
]

#: Each public name and the module that defines it (loaded on first use).
_EXPORTS = {
    "TrainRequest": "raydp_synth.train.driver",
    "RunResult": "raydp_synth.train.driver",
    "run_training": "raydp_synth.train.driver",
    "StudyRequest": "raydp_synth.tune.study",
    "StudyResult": "raydp_synth.tune.study",
    "run_study": "raydp_synth.tune.study",
    "EvaluationSettings": "raydp_synth.evaluation.report",
    "evaluate_run": "raydp_synth.evaluation.report",
    "TrainedGenerator": "raydp_synth.release.generator",
}


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
