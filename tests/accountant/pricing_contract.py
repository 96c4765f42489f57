"""The contract every pricing strategy of the accountant keeps
(raydp_synth/accountant/strategies), as one function a test runs for each entry of
the table, and for a strategy a test registers at runtime.

What it checks, through the core's request path (decide, append to a real ledger,
record) and its replay:

* the settings: a study of the strategy's example settings starts (its header), and
  the ledger refuses settings other than its own;
* a grant: the example plan is granted, a retry is the same grant and charges
  nothing, a rerun under another attempt and a changed plan are refused;
* a refusal: a plan that is not a DpEvent is refused as invalid, never raised;
* never overspend: the stated epsilon never exceeds the budget, and the statement's
  epsilon is what the budget says it spent;
* the statement tells no secret: no trial count K, no number of refusals;
* replay (what a restarted accountant, ``--resume`` and ``python -m raydp_synth.budget``
  do): the ledger's entries rebuild the same grants, refusals, spent epsilon and
  statement;
* its golden price: the statement's epsilon after the example grants, as pinned.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from raydp_synth.accountant.core import (
    LEDGER_NAME,
    REASON_CHANGED,
    REASON_INVALID,
    REASON_RERUN,
    StudyBudget,
    StudySettings,
    check_ledger,
    new_study_header,
)
from raydp_synth.accountant.ledger import Ledger
from raydp_synth.errors import ConfigError

#: A valid plan no example grants (a granted trial's plan cannot change to it).
OTHER_PLAN = {"type": "GaussianDpEvent", "noise_multiplier": 1000.0}
#: Statement keys that would tell a secret trial count (never in a statement).
SECRET_KEYS = frozenset({"trial_count", "trial_count_secret", "trials_refused", "draws"})


@dataclass(frozen=True)
class PricingExample:
    """One strategy's worked example for the contract.

    Attributes:
        settings: ``StudySettings`` keyword arguments.
        plans: the plans (``event_to_json`` data) of the trials the example grants,
            in order; each must be granted.
        golden_epsilon: the statement's epsilon after every plan is granted (and, for
            a strategy with a final run, ``final``'s grant), to 1e-6 relative.
        final: the final run's plan, for a strategy that has one.
        trial_count: K for a strategy that draws one (set in the header, as a test
            may: the real one is drawn from OS entropy).
    """

    settings: Mapping[str, Any]
    plans: tuple[dict[str, Any], ...]
    golden_epsilon: float
    final: dict[str, Any] | None = None
    trial_count: int | None = None
    other_settings: Mapping[str, Any] = field(default_factory=dict)


def _request(budget: StudyBudget, ledger: Ledger, decide: Callable[[], Any]) -> Any:
    """The actor's path: decide, make the entry durable, then record it."""
    decision = decide()
    if decision.entry is not None:
        ledger.append(decision.entry)
        budget.record(decision)
    return decision


def _draw(budget: StudyBudget, ledger: Ledger, trial_id: str) -> None:
    allowed, entry = budget.decide_draw(trial_id)
    assert allowed, f"the search may draw trial {trial_id}"
    if entry is not None:
        ledger.append(entry)
        budget.take_draws(entry)


def check_pricing_contract(example: PricingExample, folder: Path) -> dict[str, Any]:
    """Run the contract on ``example``; return the final statement."""
    settings = StudySettings(**example.settings)
    strategy = settings.pricing()
    header = new_study_header(settings, name="contract")
    assert ("trial_count" in header) == strategy.draws_trial_count
    if example.trial_count is not None:
        header["trial_count"] = example.trial_count
    ledger = Ledger(folder / LEDGER_NAME)
    ledger.append(header, create=True)
    budget = StudyBudget(settings, header, source=ledger.path)
    assert budget.spent_epsilon() <= settings.epsilon

    # Other settings: the ledger belongs to another study.
    if example.other_settings:
        with pytest.raises(ConfigError, match="belongs to another study"):
            check_ledger(folder, StudySettings(**{**example.settings, **example.other_settings}))

    # A refusal: not a DpEvent.
    invalid = _request(budget, ledger, lambda: budget.decide("garbage", {"type": "Nope"}))
    assert not invalid.granted and invalid.reason.startswith(REASON_INVALID)

    for number, plan in enumerate(example.plans):
        trial = f"t{number}"
        if budget.draws is not None:
            _draw(budget, ledger, trial)
        granted = _request(budget, ledger,
                           lambda t=trial, p=plan: budget.decide(t, p, "a1"))
        assert granted.granted, granted.reason
        spent = budget.spent_epsilon()
        again = budget.decide(trial, plan, "a1")  # a retry: the same grant, no charge
        assert again.granted and again.entry is None and budget.spent_epsilon() == spent
        rerun = budget.decide(trial, plan, "a2")
        assert not rerun.granted and rerun.reason.startswith(REASON_RERUN)
        changed = budget.decide(trial, OTHER_PLAN, "a1")
        assert not changed.granted and changed.reason.startswith(REASON_CHANGED)
        assert budget.spent_epsilon() <= settings.epsilon + 1e-12

    if example.final is not None:
        assert strategy.has_final_run
        final = _request(budget, ledger, lambda: budget.decide("final", example.final, "f",
                                                               final=True))
        assert final.granted, final.reason
    else:
        refused = budget.decide("final", example.plans[0], "f", final=True)
        assert not refused.granted  # no final run outside a strategy that has one

    statement = budget.statement()
    assert statement["mode"] == settings.mode
    assert statement["epsilon"] == pytest.approx(budget.spent_epsilon(), rel=1e-12)
    assert statement["epsilon"] <= settings.epsilon + 1e-12
    assert not SECRET_KEYS & set(statement), "the statement tells a count"
    assert math.isclose(statement["epsilon"], example.golden_epsilon, rel_tol=1e-6), \
        f"golden price {example.golden_epsilon}, stated {statement['epsilon']}"

    # Replay: a restarted accountant, --resume, the budget CLI.
    replayed = StudyBudget.replay(ledger.entries(), settings=settings, source=ledger.path)
    assert dict(replayed.grants) == dict(budget.grants)
    assert replayed.refused == budget.refused
    assert replayed.spent_epsilon() == pytest.approx(budget.spent_epsilon(), rel=1e-12)
    assert _without_time(replayed.statement()) == _without_time(statement)
    assert StudyBudget.replay(ledger.entries(), source=ledger.path).statement()["mode"] \
        == settings.mode  # from the header alone
    return statement


def _without_time(statement: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in statement.items() if k != "time"}
