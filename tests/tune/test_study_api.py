"""The study as a Python API: ``run_study`` returns Tune's ResultGrid with the
release, and Optuna's study is persisted in the study directory (a journal that
``optuna.load_study`` and optuna-dashboard read), holding only what the searcher
was told: each trial's proposed hyperparameters and final score."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from raydp_synth.errors import ConfigError
from raydp_synth.tune.optuna_journal import (
    OPTUNA_JOURNAL,
    journal_storage,
    load_optuna_study,
    new_study_name,
)

#: Journal operations that would carry more than the searcher is told: per-epoch
#: values and user attributes (op codes of optuna.storages.journal).
FORBIDDEN_OPS = {7, 8}


def test_load_optuna_study_names_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="optuna.journal does not exist"):
        load_optuna_study(tmp_path)
    storage = journal_storage(tmp_path, create=True)
    assert stat.S_IMODE((tmp_path / OPTUNA_JOURNAL).stat().st_mode) == 0o600
    optuna.create_study(storage=storage, study_name="tune", direction="maximize")
    assert load_optuna_study(str(tmp_path)).study_name == "tune"
    with pytest.raises(ConfigError, match="holds no Optuna study 'tune-resume-1'; it holds tune"):
        load_optuna_study(tmp_path, "tune-resume-1")
    # A new experiment's searcher never continues an earlier session's Optuna study.
    assert new_study_name(storage, "tune") == "tune-2"
    assert new_study_name(storage, "tune-resume-1") == "tune-resume-1"


def check_result_grid_and_optuna_journal(result: Any, study: Path, trials: int) -> None:
    """``run_study`` returns Tune's ResultGrid with the release, and Optuna's study is
    persisted in the study directory, holding only what the searcher was told.

    Checked on the 3-trial compose study of tests/tune/test_study.py
    (``test_three_trial_compose_study_releases_the_best_trial_with_the_whole_search_statement``):
    one study serves both, CI's time is the suite's."""
    from ray.tune import ResultGrid

    name = study.name
    grid = result.result_grid
    assert isinstance(grid, ResultGrid) and len(grid) == trials and not grid.errors
    best = grid.get_best_result(metric="score", mode="max")
    assert best.metrics["score"] == pytest.approx(result.best_score)
    assert best.metrics["trial_id"] == result.best_trial
    # Optuna's study: in the study directory, owner-only, readable by Optuna itself.
    journal = study / OPTUNA_JOURNAL
    assert stat.S_IMODE(journal.stat().st_mode) == 0o600
    assert optuna.get_all_study_names(JournalStorage(JournalFileBackend(str(journal)))) == [
        f"{name}:tune"]  # named after the study (optuna-dashboard lists it so)
    loaded = optuna.load_study(study_name=f"{name}:tune", storage=JournalStorage(
        JournalFileBackend(str(journal))))
    frame = loaded.trials_dataframe()
    # Optuna names the column after the objective's name, where the study has one.
    value = "value" if loaded.metric_names is None else f"value_{loaded.metric_names[0]}"
    assert len(frame) == trials and set(frame["state"]) == {"COMPLETE"}
    assert sorted(frame[value]) == sorted(t["score"] for t in result.trials)
    params = {c for c in frame.columns if c.startswith("params_")}
    assert params and params <= {"params_mu", "params_lr_d", "params_budget_split.classifier",
                                 "params_budget_split.conv2", "params_budget_split.dpagg"}
    assert not [c for c in frame.columns if c.startswith("user_attrs_")]
    assert load_optuna_study(study).trials_dataframe()[value].tolist() == \
        frame[value].tolist()
    # Nothing beyond the proposals and the final scores: no per-epoch value, no user
    # attribute; every stored value is a score Tune's result.json holds.
    ops = [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]
    assert not {op["op_code"] for op in ops} & FORBIDDEN_OPS
    reported = {json.loads(line).get("score") for path in study.glob("tune/*/result.json")
                for line in path.read_text().splitlines() if line.strip()}
    assert set(frame[value]) <= reported
