"""A search strategy written here and registered at run time (the table and the
static names patched, no other file touched) passes the strategy contract and runs a
real study end to end: a new strategy is its module, one table line and its name
(issue 44).

The toy, ``fixed-count``: exactly ``--trials`` i.i.d. draws of the random sampler
(the default config first), priced by composition, never resumed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from raydp_synth.accountant.ledger import Ledger
from raydp_synth.tune.strategies import names, registry
from raydp_synth.tune.strategies.base import FirstTrial, Phases, SearchStrategy, StudyOptions
from raydp_synth.tune.strategies.roles import COMPOSE_TRIAL
from raydp_synth.tune.tuner import one_experiment
from tests.tune.test_strategy_contract import (
    check_accountant_settings,
    check_cli_round_trip,
    check_declarations,
    check_validation,
)

TINY = Path(__file__).with_name("tiny_dpaf.yaml")


class FixedCount(SearchStrategy):
    """``--trials`` random draws, each a compose trial (the accountant's pricing)."""

    name = "fixed-count"
    pricing = "compose"
    role = COMPOSE_TRIAL
    samplers = ("random",)
    default_sampler = "random"
    secret_sampler_seed = False
    runs_default_first = True
    hides_trial_count = False
    trials_are = "at most"

    def first_trial(self, request: StudyOptions, prepared: Any) -> FirstTrial | None:
        return FirstTrial(role=COMPOSE_TRIAL, trials=request.trials,
                          phrase=f"one of {request.trials} trials ({self.name})")

    def num_samples(self, request: StudyOptions, accountant: Any) -> int:
        return request.trials

    def phases(self, request: StudyOptions, prepared: Any, settings: Any,
               accountant: Any) -> Phases:
        return one_experiment(self, request, prepared, settings, accountant)


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> SearchStrategy:
    strategy = FixedCount()
    monkeypatch.setitem(registry.STRATEGIES, strategy.name, strategy)
    # Its name where the CLI's parser reads the choices (raydp_synth/tune/strategies/names.py).
    monkeypatch.setattr(names, "STRATEGY_CHOICES", (*names.STRATEGY_CHOICES, strategy.name))
    return strategy


def test_the_toy_passes_the_strategy_contract(toy: SearchStrategy, tmp_path: Path) -> None:
    check_declarations(toy)
    check_validation(toy, tmp_path)
    settings = check_accountant_settings(toy, tmp_path)
    assert (settings.mode, settings.trials) == ("compose", 3)
    check_cli_round_trip(toy, tmp_path)


@pytest.mark.ray
@pytest.mark.slow
def test_a_toy_strategy_runs_a_study_end_to_end(toy: SearchStrategy, ray_local,
                                                tmp_path: Path) -> None:
    """Also: its one 1-worker trial trains in process (tests/tune/test_trial_in_process.py;
    one study serves both, at TINY's own 2 epochs)."""
    from raydp_synth.tune.study import StudyRequest, run_study
    from tests.tune.test_trial_in_process import (
        check_a_one_worker_trial_trained_in_process,
        train_workers,
    )

    workers_before = train_workers()
    result = run_study(StudyRequest(
        method="dpaf", epsilon=6.0, delta=1e-5, trials=1, strategy=toy.name, sampler="random",
        search_space=TINY, storage=tmp_path, name="toy", evaluate=False, synthetic_samples=20))
    study = tmp_path / "toy"
    entries = Ledger(study / "ledger.jsonl").entries()
    header, grants = entries[0], [e for e in entries if e["kind"] == "grant"]
    assert (header["mode"], header["trials"]) == ("compose", 1) and len(grants) == 1
    statement = json.loads((study / "release" / "privacy.json").read_text())
    assert statement["details"]["study"]["mode"] == "compose" and statement["epsilon"] <= 6.0
    assert json.loads((study / "study.json").read_text())["request"]["selection"] == toy.name
    assert result.best_trial == grants[0]["trial_id"] and len(result.trials) == 1
    check_a_one_worker_trial_trained_in_process(study, result, workers_before)
