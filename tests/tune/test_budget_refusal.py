"""A budget that cannot buy one trial is refused before Ray starts (one line, exit 2,
nothing written), by the plan every trial computes (``roles.trial_plan``); a study
that releases nothing says what its ledger holds."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from raydp_synth.accountant.actor import BudgetAccountant
from raydp_synth.cli import run_cli
from raydp_synth.errors import BudgetExhausted
from raydp_synth.tune.__main__ import main
from raydp_synth.tune.preparation import prepare as _prepare
from raydp_synth.tune.study import (
    StudyRequest,
    _with_absolute_paths,
    check_first_trial_affordable,
    no_release_message,
)
from tests.accountant.test_core import Study, _compose, _plan, _random_stopping


@pytest.fixture
def ray_connections(monkeypatch) -> list[int]:
    """Every time the code under test connects to Ray (``ensure_ray``, which a study
    calls right before it starts or joins a cluster): a refused study never does.
    (``ray.is_initialized()`` cannot tell: the suite's shared local cluster may be up.)"""
    from raydp_synth.runtime import ray_session
    from raydp_synth.tune import study

    calls: list[int] = []

    def refuse(*args, **kwargs):
        calls.append(1)
        raise RuntimeError("the study connected to Ray")

    monkeypatch.setattr(ray_session, "ensure_ray", refuse)
    monkeypatch.setattr(study, "ensure_ray", refuse)  # the study's own name for it
    return calls


@pytest.mark.parametrize("selection", ["compose", "random-stopping"])
def test_an_unaffordable_study_is_refused_before_ray(selection, capsys, tmp_path,
                                                     ray_connections) -> None:
    storage = tmp_path / "studies"
    with pytest.raises(SystemExit) as exit_info:
        run_cli(main, ["dpaf", "--epsilon", "0.001", "--trials", "50", "--strategy", selection,
                       "--storage", str(storage), "--no-eval"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the budget epsilon=0.001, delta=1e-05 cannot buy ")
    assert err.count("\n") == 1 and "raise --epsilon" in err
    assert not storage.exists(), "a refused study wrote files"
    assert not ray_connections


def _prepared(tmp_path: Path, **kwargs):
    request = _with_absolute_paths(StudyRequest(method="dpaf", delta=1e-5,
                                                storage=tmp_path, name="s", **kwargs))
    return request, _prepare(request)


def test_the_check_refuses_with_the_trials_plan_error(tmp_path, ray_connections) -> None:
    """The refusal is trial_plan's calibration error, as the first trial would get it."""
    request, prepared = _prepared(tmp_path, epsilon=1e-4, trials=2, settings={"epochs": "1"})
    with pytest.raises(BudgetExhausted, match=r"one of 2 trials \(compose\).*no noise multiplier"):
        check_first_trial_affordable(request, prepared)
    assert not any(tmp_path.iterdir()) and not ray_connections


@pytest.mark.slow  # a calibration that succeeds: about 4 s
def test_a_budget_that_buys_the_first_trial_passes(tmp_path, ray_connections) -> None:
    request, prepared = _prepared(tmp_path, epsilon=0.5, trials=2, settings={"epochs": "1"})
    check_first_trial_affordable(request, prepared)
    assert not any(tmp_path.iterdir()) and not ray_connections


def test_a_resume_with_every_trial_granted_has_nothing_to_buy(tmp_path) -> None:
    """On --resume the check composes the ledger's grants, as a trial would: here both
    trials were granted, so no trial is left to buy (and the tiny budget is no error)."""
    request, prepared = _prepared(tmp_path, epsilon=1e-4, trials=2, settings={"epochs": "1"})
    prepared.study_dir.mkdir()
    study = Study(prepared.study_dir, _compose(1e-4, trials=2))
    assert study.request("t0", _plan(1e6, None, 1)).granted
    assert study.request("t1", _plan(1e6, None, 1)).granted
    check_first_trial_affordable(replace(request, resume=True), prepared)


def _status(directory: Path, settings) -> dict:
    """The accountant's status, rebuilt from the ledger file (the actor's own code)."""
    return BudgetAccountant(
        str(directory), epsilon=settings.epsilon, delta=settings.delta, mode=settings.mode,
        trials=settings.trials, distribution=settings.distribution,
        reference_event=settings.reference_event).status()


def test_the_final_message_states_the_ledger(tmp_path) -> None:
    settings = _compose(3.0)
    study = Study(tmp_path, settings)
    study.request("t0", _plan(6.0, None, 1))
    study.request("t1", _plan(6.0, None, 1))
    study.request("t2", {"type": "Nope"})  # refused: not a valid plan
    status = _status(tmp_path, settings)
    message = no_release_message("s", tmp_path, status)
    assert "the ledger holds 2 grants and 1 refusal" in message
    assert f"epsilon {study.budget.spent_epsilon():.4f} of 3 spent and not refunded" in message
    assert "\n" not in message


def test_the_final_message_with_no_grant_says_nothing_was_spent(tmp_path) -> None:
    settings = _compose(3.0)
    study = Study(tmp_path, settings)
    study.request("t0", {"type": "Nope"})
    message = no_release_message("s", tmp_path, _status(tmp_path, settings))
    assert "the ledger holds no grant (1 refusal): nothing was spent" in message
    assert "stays spent" not in message


@pytest.mark.parametrize("mode", ["random-stopping", "subsampled"])
def test_the_final_message_keeps_random_stoppings_count_out(tmp_path, mode) -> None:
    """Subsampled tuning's K is random stopping's: its status has the same counts
    (here the random-stopping study's, under the subsampled mode's name)."""
    settings = _random_stopping(_plan(6.0, None, 1), trials=2)
    study = Study(tmp_path, settings, trial_count=3)
    for trial_id in ("t0", "t1", "t2"):
        study.request(trial_id, _plan(6.0, None, 1))
    status = {**_status(tmp_path, settings), "mode": mode}
    message = no_release_message("s", tmp_path, status)
    ledger_part = message.split("the ledger holds", 1)[1].split("(python")[0]
    assert "grants, epsilon" in ledger_part
    # The count is secret under random stopping: no number of grants is
    # stated (the path and the epsilons are the only digits allowed).
    assert not re.search(r"holds \d", "the ledger holds" + ledger_part)
    assert "3 grants" not in message
