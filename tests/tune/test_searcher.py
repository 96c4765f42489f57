"""BudgetAwareSearch (raydp_synth.tune.searcher): what it tells the user and Optuna
when trials end without training (no Ray cluster needed: the accountant is only
asked in ``suggest``)."""

from __future__ import annotations

import logging

from ray import tune
from ray.tune.search.optuna import OptunaSearch

from raydp_synth.tune.searcher import BudgetAwareSearch


def test_many_draws_that_cannot_run_warn_once(caplog) -> None:
    """Under random stopping a draw that cannot run is granted a no-op (granted 1,
    invalid 1: one of the K runs spent on nothing); when half the finished trials
    are such draws, from the fourth on, the search says so once and how to fix it."""
    inner = OptunaSearch(space={"x": tune.uniform(0, 1)}, metric="score", mode="max", seed=0)
    search = BudgetAwareSearch(inner, "s")
    no_op = {"score": float("-inf"), "granted": 1, "invalid": 1, "reason": "no plan"}
    trained = {"score": 0.5, "granted": 1}
    with caplog.at_level(logging.WARNING, logger="raydp_synth"):
        for i, result in enumerate([no_op, trained, no_op, trained, no_op, no_op]):
            inner.suggest(f"t{i}")
            search.on_trial_complete(f"t{i}", result=dict(result))
    warnings = [r.getMessage() for r in caplog.records if "cannot run" in r.getMessage()]
    assert warnings == ["2 of the 4 trials so far drew a configuration that cannot run at "
                        "this budget (see the 'reason' in their results); each still spends "
                        "one of random stopping's trials: narrow the search space (e.g. its "
                        "batch sizes) or raise --epsilon"]
    assert search.ungranted_in_a_row == 0  # granted no-ops do not stop the search
    values = [t.value for t in inner._ot_study.trials]
    assert values == [-1.0, 0.5, -1.0, 0.5, -1.0, -1.0]  # Optuna wants finite values
