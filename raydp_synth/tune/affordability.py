"""Whether a study's budget buys its next trial, checked before Ray starts.

Reads only public facts and, on ``--resume``, the ledger (curator-only).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from raydp_synth.accountant.core import LEDGER_NAME, StudyBudget
from raydp_synth.accountant.ledger import Ledger
from raydp_synth.errors import BudgetExhausted, ConfigError
from raydp_synth.privacy.events import event_from_json
from raydp_synth.tune.optuna_searcher import first_points
from raydp_synth.tune.strategies.roles import trial_plan
from raydp_synth.tune.study_settings import PlannedTrial

if TYPE_CHECKING:
    from raydp_synth.tune.prepared_study import PreparedStudy
    from raydp_synth.tune.strategies.base import StudyOptions

__all__ = ["cannot_buy_a_trial", "check_first_trial_affordable", "ledger_granted_events"]


def check_first_trial_affordable(request: StudyOptions,
                                 prepared: PreparedStudy) -> PlannedTrial | None:
    """Refuse, before Ray starts and before anything is written, a study whose budget
    cannot buy its next trial: the plan of the default configuration (compose's
    first trial) computed by the trial role's plan
    (:func:`~raydp_synth.tune.strategies.roles.trial_plan`), as every trial computes it, with
    the grants the ledger holds (none for a new study). A trial whose plan does not
    fit would fail without a grant, and so would every other trial of a budget that
    small. The strategy names that trial
    (:meth:`~raydp_synth.tune.strategies.base.SearchStrategy.first_trial`); random
    stopping's and subsampled tuning's checks are in their ``prepare``: the
    calibration of E_ref (a trial's plan is E_ref's or below it) and, for subsampled
    tuning, of the final run.

    Reads only public facts and, on ``--resume``, the ledger (curator-only).

    Returns:
        The plan it computed, for the trial with these inputs to reuse (planning is
        deterministic); None where it planned nothing.

    Raises:
        BudgetExhausted: one line naming the budget, the trial count and the fix.
    """
    first = request.search_strategy.first_trial(request, prepared)
    if first is None:
        return None
    config = _first_trial_config(request, prepared)
    try:
        plan = trial_plan(prepared.method, config, prepared.data, role=first.role,
                          epsilon=request.epsilon, delta=request.delta, trials=first.trials,
                          score_share=prepared.score_share,
                          granted=[event_from_json(e) for e in first.granted],
                          reference_event=prepared.reference.event()
                          if prepared.reference is not None else None)
    except ConfigError as err:
        raise BudgetExhausted(cannot_buy_a_trial(request, first.phrase, err)) from None
    return PlannedTrial(
        inputs=(first.role.name, request.epsilon, request.delta, first.trials,
                prepared.score_share, prepared.data),
        config=config, granted=first.granted, plan=plan)


def _first_trial_config(request: StudyOptions, prepared: PreparedStudy) -> Any:
    """The config of compose's first trial where the search fixes all of it (the
    default's point in the space, :func:`~raydp_synth.tune.optuna_searcher.first_points`:
    the trial then reuses the budget check's plan); else the default config, whose
    plan is what the check needs (the same schedule up to the search's scaling of
    relative weights)."""
    points = first_points(request, prepared.space, prepared.default)
    if not points:
        return prepared.default
    try:
        settings = {**prepared.space.settings_from_trial_config(points[0]), "seed": request.seed}
        return prepared.method.make_config(settings, prepared.data)
    except ConfigError:  # the sampler draws part of it: the trial's config is not known
        return prepared.default


def cannot_buy_a_trial(request: StudyOptions, trial: str, err: Exception) -> str:
    """The refusal of a budget that cannot buy ``trial`` (the strategy's
    :meth:`~raydp_synth.tune.strategies.base.SearchStrategy.trial_phrase`)."""
    return (f"the budget epsilon={request.epsilon:g}, delta={request.delta:g} cannot buy "
            f"{trial} of {request.method}'s default configuration: {err}; nothing was "
            "started or written: raise --epsilon, lower --trials, or make a run cheaper "
            "(e.g. --set epochs=...)")


def ledger_granted_events(study_dir: Path) -> list[dict[str, Any]]:
    """The grants of the study's ledger file (replayed without Ray, like
    ``python -m raydp_synth.budget``); none without a ledger."""
    path = study_dir / LEDGER_NAME
    if not path.is_file():
        return []
    return StudyBudget.replay(Ledger(path).entries(), source=path).granted_events()
