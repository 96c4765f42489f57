"""The search-strategy contract, run over every line of the strategy table (as Optuna
runs one suite over every sampler): a strategy added to
:data:`~raydp_synth.tune.strategies.registry.STRATEGIES` is tested the moment it is
registered. Fast: no Ray, no data loaded.

Each ``check_*`` function takes one strategy, so that a strategy registered at run
time (tests/tune/test_toy_strategy.py) runs the same suite.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from dp_accounting import dp_event

from raydp_synth.accountant.core import StudySettings as AccountantSettings
from raydp_synth.accountant.strategies.registry import PRICING
from raydp_synth.errors import ConfigError
from raydp_synth.tune.strategies.base import SearchStrategy
from raydp_synth.tune.strategies.names import STRATEGY_CHOICES, STRATEGY_NAMES
from raydp_synth.tune.strategies.registry import (
    STRATEGIES,
    get_strategy,
    requested_strategy,
    strategy_names,
)
from raydp_synth.tune.strategies.roles import TRIAL_ROLES, TrialRole
from raydp_synth.tune.study import SAMPLERS, StudyRequest

#: The value that chooses a strategy, by the request field it is chosen by.
CHOOSING_VALUE = {"strategy": lambda s: s.name, "tune_on_public": lambda s: "folder:/public/x"}


def choosing(strategy: SearchStrategy) -> dict[str, Any]:
    """The request options that choose ``strategy``."""
    return {strategy.selects: CHOOSING_VALUE[strategy.selects](strategy)}


def request_for(strategy: SearchStrategy, tmp_path: Path, **options: Any) -> StudyRequest:
    return StudyRequest(method="dpaf", epsilon=10.0, delta=1e-5, storage=tmp_path,
                        **{"sampler": strategy.default_sampler, **choosing(strategy), **options})


def check_declarations(strategy: SearchStrategy) -> None:
    """Its name is its table key; its pricing is a line of the accountant's table; its
    samplers are known, its default among them; its role is a trial role; what it
    declares about resume and the trial count is a bool."""
    assert STRATEGIES[strategy.name] is strategy
    assert strategy.pricing in PRICING
    assert set(strategy.samplers) <= set(SAMPLERS) and strategy.default_sampler in strategy.samplers
    assert isinstance(strategy.role, TrialRole)
    assert strategy.selects in CHOOSING_VALUE
    for flag in ("resumable", "uses_reference", "takes_default_share", "secret_sampler_seed",
                 "runs_default_first", "hides_trial_count", "releases_after_all_draws"):
        assert isinstance(getattr(strategy, flag), bool), flag
    assert strategy.trials_are in ("mean", "at most")


def check_validation(strategy: SearchStrategy, tmp_path: Path) -> None:
    """Its default request is valid and runs it; a sampler it cannot run, and a
    resume where it is not resumable, are each one line."""
    request = request_for(strategy, tmp_path)
    assert request.search_strategy is strategy
    for sampler in sorted(set(SAMPLERS) - set(strategy.samplers)):
        with pytest.raises(ConfigError) as err:
            request_for(strategy, tmp_path, sampler=sampler)
        assert "\n" not in str(err.value) and str(err.value)
    if strategy.resumable:
        assert request_for(strategy, tmp_path, resume=True, name="s").resume
    else:
        with pytest.raises(ConfigError, match="--resume") as err:
            request_for(strategy, tmp_path, resume=True, name="s")
        assert "\n" not in str(err.value)


def check_accountant_settings(strategy: SearchStrategy, tmp_path: Path) -> AccountantSettings:
    """What it asks of the accountant is valid accountant settings of its pricing,
    with a reference plan exactly where it declares one."""
    request = request_for(strategy, tmp_path)
    reference = SimpleNamespace(event=lambda: dp_event.GaussianDpEvent(40.0))
    prepared: Any = SimpleNamespace(reference=reference if strategy.uses_reference else None)
    settings = strategy.accountant_settings(request, prepared)
    assert isinstance(settings, AccountantSettings)
    assert settings.mode == strategy.pricing
    assert (settings.reference_event is not None) == strategy.uses_reference
    assert settings.epsilon == request.epsilon and settings.delta == request.delta
    return settings


def check_cli_round_trip(strategy: SearchStrategy, tmp_path: Path) -> None:
    """The CLI chooses it: by ``--strategy NAME`` (one of the parser's choices), or by
    the option that selects it."""
    from raydp_synth.tune.__main__ import build_parser, study_request

    parser = build_parser()
    flag = "--" + strategy.selects.replace("_", "-")
    if strategy.selects == "strategy":
        choices = next(a.choices for a in parser._actions if a.dest == "strategy")
        assert strategy.name in choices and strategy.name in strategy_names()
        assert get_strategy(strategy.name) is strategy
    args = parser.parse_args(["dpaf", flag, CHOOSING_VALUE[strategy.selects](strategy),
                              "--storage", str(tmp_path)])
    request = study_request(args)
    assert request.search_strategy is strategy and requested_strategy(request) is strategy
    assert request.sampler == strategy.default_sampler or strategy.selects != "strategy"


ALL = pytest.mark.parametrize("strategy", list(STRATEGIES.values()), ids=list(STRATEGIES))


@ALL
def test_declarations(strategy: SearchStrategy) -> None:
    check_declarations(strategy)


@ALL
def test_validation(strategy: SearchStrategy, tmp_path: Path) -> None:
    check_validation(strategy, tmp_path)


@ALL
def test_accountant_settings(strategy: SearchStrategy, tmp_path: Path) -> None:
    check_accountant_settings(strategy, tmp_path)


@ALL
def test_cli_round_trip(strategy: SearchStrategy, tmp_path: Path) -> None:
    check_cli_round_trip(strategy, tmp_path)


@pytest.mark.parametrize("role", list(TRIAL_ROLES.values()), ids=list(TRIAL_ROLES))
def test_a_trial_role_travels_to_the_trials_unchanged(role: TrialRole) -> None:
    """StudySettings carry the role to the trials (pickled): it arrives equal."""
    assert pickle.loads(pickle.dumps(role)) == role and TRIAL_ROLES[role.name] is role


def test_the_static_names_are_the_tables() -> None:
    """What the CLI's parser offers without loading the strategies is the table's."""
    assert STRATEGY_NAMES == tuple(STRATEGIES)
    assert STRATEGY_CHOICES == strategy_names()


def test_an_unknown_strategy_names_the_choices() -> None:
    with pytest.raises(ConfigError, match="must be one of compose, random-stopping, subsampled"):
        get_strategy("grid")
    with pytest.raises(ConfigError, match="must be one of"):
        get_strategy("public-then-private")  # chosen by --tune-on-public, not --strategy


def test_the_accountant_settings_are_todays(tmp_path: Path) -> None:
    """The ledger header's values, per strategy, as before the strategies were plug-ins
    (the ledger format must not change)."""
    got = {name: check_accountant_settings(s, tmp_path) for name, s in STRATEGIES.items()}
    assert {n: (s.mode, s.trials, s.tune_fraction) for n, s in got.items()} == {
        "compose": ("compose", 3, None),
        "random-stopping": ("random-stopping", 3, None),
        "subsampled": ("subsampled", 3, 0.1),
        "public-then-private": ("compose", 1, None),  # the final run
    }
    assert all(s.distribution == "poisson" and s.density_ratio == 1.0 for s in got.values())
