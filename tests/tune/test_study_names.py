"""Names a newcomer reads right: the Optuna study is named after the study (not
"tune" for every study) and its objective is named (not "Objective 0"), as
optuna-dashboard shows them; the statement a study returns is its privacy.json."""

from __future__ import annotations

import warnings
from pathlib import Path

import optuna

from raydp_synth.tune.optuna_journal import (
    OBJECTIVE_NAME,
    create_named_study,
    journal_storage,
    load_optuna_study,
    new_study_name,
)
from raydp_synth.tune.study import StudyRequest
from tests.tune.test_study import TINY


def test_the_optuna_study_is_named_after_the_study_and_its_objective(tmp_path: Path) -> None:
    storage = journal_storage(tmp_path, create=True)
    name = new_study_name(storage, "tune", study="dpaf-night")
    assert name == "dpaf-night:tune"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no experimental-API warning reaches the user
        create_named_study(storage, name)
    create_named_study(storage, name)  # there already: left as it is
    assert optuna.get_all_study_names(storage) == ["dpaf-night:tune"]
    loaded = load_optuna_study(tmp_path, "tune")  # by the experiment's folder, too
    assert loaded.study_name == "dpaf-night:tune"
    assert loaded.metric_names == [OBJECTIVE_NAME] == ["selection score"]
    assert new_study_name(storage, "tune", study="dpaf-night") == "dpaf-night:tune-2"


def test_the_searcher_creates_its_study_with_the_objective_named(tmp_path: Path) -> None:
    """The study's searcher (Ray Tune's OptunaSearch) loads the study it created."""
    from raydp_synth.data import data_info, load_training_data, parse_dataset_spec
    from raydp_synth.methods import get_method
    from raydp_synth.tune.optuna_searcher import optuna_search
    from raydp_synth.tune.search_space import load_search_space

    request = StudyRequest(method="dpaf", epsilon=4.0, delta=1e-5, storage=tmp_path,
                           search_space=TINY, name="s")
    splits, public = load_training_data(parse_dataset_spec("digits"), public=None, seed=0)
    data = data_info(splits.train, public)
    space = load_search_space(TINY, "dpaf", data)
    default = get_method("dpaf").make_config({**space.fixed, "seed": 0}, data)
    storage = journal_storage(tmp_path, create=True)
    name = new_study_name(storage, "tune", study="s")
    search = optuna_search(request, space, default, storage=storage, study_name=name)
    assert search is not None
    assert load_optuna_study(tmp_path).metric_names == ["selection score"]
    assert optuna.get_all_study_names(storage) == ["s:tune"]


def test_per_epoch_lines_say_trial_epsilon_in_a_study(monkeypatch) -> None:
    """A trial's per-epoch line names its own epsilon "trial epsilon" (it restarts in
    each trial; the study's total is on the driver's lines), a run's "run epsilon";
    the key reported to Tune stays ``epsilon_spent`` (the trial allow-list's)."""
    from raydp_synth.log import EPOCH_EPSILON_ENV, epoch_line_label, trial_epoch_lines, worker_env

    monkeypatch.delenv(EPOCH_EPSILON_ENV, raising=False)
    assert epoch_line_label("epsilon_spent") == "run epsilon"
    assert epoch_line_label("g_loss") == "g_loss"
    assert EPOCH_EPSILON_ENV not in worker_env()
    with trial_epoch_lines():
        assert epoch_line_label("epsilon_spent") == "trial epsilon"
        assert worker_env()[EPOCH_EPSILON_ENV] == "trial epsilon"  # to the trials' processes
    assert epoch_line_label("epsilon_spent") == "run epsilon"
