"""BudgetAwareSearch (raydp_synth.tune.searcher): what it tells the user and Optuna
when trials end without training (no Ray cluster needed: the accountant is only
asked in ``suggest`` and for a failed trial), and how it draws under random stopping
(with the real accountant actor)."""

from __future__ import annotations

import logging

import pytest
from ray import tune
from ray.tune.search import Searcher
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


@pytest.mark.ray
def test_the_search_proposes_the_first_k_draws_and_draws_again_for_a_failed_trial(
        ray_local, tmp_path) -> None:
    """Random stopping, K = 2 (the ledger's header says so): the search proposes two
    trials, each drawn in the ledger first, then waits (None) while they are out. A
    trial that fails before it asks read nothing: its draw is taken back and the
    search draws again. Once both drawn trials are granted, the search is finished."""
    import ray

    from raydp_synth.accountant import LEDGER_NAME, Ledger
    from tests.accountant.test_actor import random_stopping_accountant

    handle, name, reference = random_stopping_accountant(tmp_path, "search", trial_count=2)
    search = BudgetAwareSearch(
        OptunaSearch(space={"x": tune.uniform(0, 1)}, metric="score", mode="max", seed=0), name)
    try:
        assert isinstance(search.suggest("a"), dict) and isinstance(search.suggest("b"), dict)
        assert search.suggest("c") is None  # K drawn, both out: not now
        search.on_trial_complete("a", error=True)  # failed before it asked
        assert isinstance(search.suggest("d"), dict)
        for trial_id in ("b", "d"):
            assert ray.get(handle.request.remote(trial_id, reference))["granted"]
            search.on_trial_complete(trial_id, result={"score": 0.5, "granted": 1})
        assert search.suggest("e") == Searcher.FINISHED
        entries = Ledger(tmp_path / LEDGER_NAME).entries()[1:]
        assert [(e["kind"], e.get("trial_id") or e["trial_ids"]) for e in entries] == [
            ("draw", "a"), ("draw", "b"), ("undraw", ["a"]), ("draw", "d"),
            ("grant", "b"), ("grant", "d")]
    finally:
        ray.kill(handle, no_restart=True)


@pytest.mark.ray
def test_under_dp_hypo_a_trial_that_fails_before_asking_is_a_no_op_run(
        ray_local, tmp_path) -> None:
    """DP-HyPO (``failures_are_runs``), K = 2: a trial that fails before it asks keeps
    its draw as a no-op grant (one of the K runs) and the search does not draw again in
    its place, so every run's configuration comes from the proposal itself, never from
    the proposal conditioned on not failing (docs/privacy.md, DP-HyPO)."""
    import ray

    from raydp_synth.accountant import LEDGER_NAME, Ledger
    from tests.accountant.test_actor import random_stopping_accountant

    handle, name, reference = random_stopping_accountant(tmp_path, "hypo", trial_count=2)
    search = BudgetAwareSearch(
        OptunaSearch(space={"x": tune.uniform(0, 1)}, metric="score", mode="max", seed=0), name,
        failures_are_runs=True)
    try:
        assert isinstance(search.suggest("a"), dict) and isinstance(search.suggest("b"), dict)
        search.on_trial_complete("a", error=True)  # failed before it asked
        assert search.suggest("c") is None  # no redraw: "b" is still out
        assert ray.get(handle.request.remote("b", reference))["granted"]
        search.on_trial_complete("b", result={"score": 0.5, "granted": 1})
        assert search.suggest("d") == Searcher.FINISHED
        entries = Ledger(tmp_path / LEDGER_NAME).entries()[1:]
        assert [(e["kind"], e.get("trial_id")) for e in entries] == [
            ("draw", "a"), ("draw", "b"), ("grant", "a"), ("grant", "b")]
    finally:
        ray.kill(handle, no_restart=True)
