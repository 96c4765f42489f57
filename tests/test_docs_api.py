"""docs/api.md's worked example names the API as it is: every raydp_synth and Optuna
import of its Python blocks runs, and the names it uses exist."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_every_import_of_the_worked_example_runs() -> None:
    imports = [line for block in _python_blocks() for line in block.splitlines()
               if re.match(r"(from (raydp_synth|optuna)[\w.]* import |import (optuna|torch)\b)",
                           line)]
    assert len(imports) >= 6
    for line in imports:
        exec(line, {})  # the documentation's own import lines


def test_the_names_the_example_uses_exist() -> None:
    from raydp_synth.release import TrainedGenerator
    from raydp_synth.tune.study import StudyResult

    fields = set(StudyResult.__dataclass_fields__)
    assert {"study_dir", "statement", "best_trial", "best_score", "trials",
            "result_grid"} <= fields
    assert callable(TrainedGenerator.from_release) and callable(TrainedGenerator.balanced)
    text = DOC.read_text()
    for needle in ("result.result_grid", "load_optuna_study(", "optuna.load_study(",
                   "TrainedGenerator.from_release(", "raydp-synth sample", "--config"):
        assert needle in text
