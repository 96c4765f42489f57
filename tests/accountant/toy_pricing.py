"""A toy pricing strategy, as a new kind of search would write one: compose with a
hard cap on the number of grants (at most ``trials``). Registered at runtime by the
tests that use it (``PRICING[name] = CappedComposePricing``), never by the package."""

from __future__ import annotations

from typing import Any

import dp_accounting as dpa

from raydp_synth.accountant.decisions import Decision
from raydp_synth.accountant.strategies.base import StudyBudget
from raydp_synth.accountant.strategies.compose import ComposePricing

__all__ = ["CappedComposePricing"]


class CappedComposePricing(ComposePricing):
    """Compose, refusing every trial beyond the study's ``trials``. It does not say
    its counts are public, so the gauges fail closed."""

    name = "capped-compose"
    live_counts = False

    def decide(self, budget: StudyBudget, trial_id: str, plan: dpa.DpEvent,
               event_json: dict[str, Any], attempt: str | None) -> Decision:
        if len(budget.grants) >= self.settings.trials:
            return budget.refusal(trial_id, f"the study's cap of {self.settings.trials} "
                                  "trials is reached", event_json)
        return super().decide(budget, trial_id, plan, event_json, attempt)
