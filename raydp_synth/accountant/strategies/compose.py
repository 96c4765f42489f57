"""Compose: the search is the adaptive composition of every granted plan.

Privacy argument: the study's output is the adaptive composition of every granted
plan, priced by :mod:`raydp_synth.privacy.pricing`: the smaller of RDP's epsilon (RDP
composes additively at every order, also when a later plan is chosen from earlier DP
outputs: Mironov, 2017, "Renyi Differential Privacy", Proposition 1) and PLD's (the
PLD composition of all grants, pessimistic estimates; PLD composition is adaptive
too). Both are upper bounds, so their minimum is. A plan is granted only if the
composition of all grants plus this plan is within the budget, so the stated total
never exceeds the budget. Composition only grows, so a refused plan could not have
fit later either.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dp_accounting as dpa

from raydp_synth.accountant.decisions import REASON_BUDGET, REASON_INVALID, Decision
from raydp_synth.accountant.strategies.base import (
    UNPRICEABLE,
    PricingStrategy,
    StudyBudget,
    StudySettings,
    trials_phrase,
)
from raydp_synth.privacy.pricing import Composition, Price

__all__ = ["ComposePricing"]


class ComposePricing(PricingStrategy):
    """Every grant composed (RDP and PLD, the smaller epsilon); the number of trials
    is public, so the counts are published while the study runs."""

    name = "compose"
    live_counts = True
    theorem = "adaptive composition of every grant (RDP: Mironov 2017; PLD)"

    def __init__(self, settings: StudySettings) -> None:
        super().__init__(settings)
        self.composition = Composition()  # every grant, in ledger order

    def take_grant(self, event: dpa.DpEvent, entry: Mapping[str, Any], *,
                   state: Any = None) -> None:
        self.composition = state if state is not None else self.composition.plus(event)

    def decide(self, budget: StudyBudget, trial_id: str, plan: dpa.DpEvent,
               event_json: dict[str, Any], attempt: str | None) -> Decision:
        try:
            composed = self.composition.plus(plan)
        except UNPRICEABLE as exc:
            return budget.refusal(trial_id, f"{REASON_INVALID}: RDP cannot price it ({exc})",
                                  event_json)
        settings = self.settings
        total = composed.epsilon(settings.delta)
        if not total <= settings.epsilon:  # NaN-safe: NaN is refused
            return budget.refusal(
                trial_id,
                f"{REASON_BUDGET}: granting this plan would bring the study to "
                f"epsilon={total:.6g} > budget {settings.epsilon:g} "
                f"(spent so far {budget.spent_epsilon():.6g}, at "
                f"delta={settings.delta:g})",
                event_json,
            )
        return budget.grant(trial_id, event_json, attempt, state=composed)

    def can_grant(self, budget: StudyBudget) -> bool:
        return budget.spent_epsilon() < self.settings.epsilon

    def spent_price(self, budget: StudyBudget) -> Price | None:
        return self.composition.price(self.settings.delta) if budget.grants else None

    def statement_fields(self, budget: StudyBudget) -> dict[str, Any]:
        return {"trials_granted": len(budget.grants), "events": budget.granted_events()}

    @classmethod
    def search_summary(cls, statement: Mapping[str, Any]) -> str:
        granted = statement.get("trials_granted")
        return (f"whole search ({cls.name}, {trials_phrase(granted)})" if granted is not None
                else f"whole search ({cls.name})")
