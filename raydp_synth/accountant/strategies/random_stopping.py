"""Random stopping: the best of a secret random number K of runs of one mechanism.

Privacy argument: Papernot & Steinke, 2022, "Hyperparameter Tuning with Renyi
Differential Privacy", Theorems 2 and 6. The number of trials K is drawn once, from OS
entropy, when the study's header is written
(:func:`~raydp_synth.accountant.core.new_study_header`), so before any trial touches
data: K must be independent of the data and of every trial's output, and unknown to
anyone who sees the release, which is why it is drawn from ``secrets`` (not from a
user seed), stored only in the curator-only ledger, and never put into the statement.
Every granted plan must be dominated by the study's reference plan E_ref at every RDP
order; the whole study then costs ``RepeatAndSelectDpEvent(E_ref, mean, shape)``. A
granted trial counts as one of the K runs even if it crashes (score -inf). The K runs
are the first K configurations the search *drew*, whatever order their trials ask
in: the search records each draw in the ledger before it proposes the configuration
(:meth:`~raydp_synth.accountant.core.StudyBudget.decide_draw`), stops at K draws, and
only drawn trials are granted. With several trials at once, granting the first K to
*ask* would select configurations by how fast they plan (the theorem needs i.i.d.
draws). RDP alone prices the search: the theorem is an RDP theorem.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dp_accounting as dpa

from raydp_synth.accountant.decisions import (
    REASON_INVALID,
    REASON_NOT_DOMINATED,
    REASON_NOT_DRAWN,
    REASON_TRIAL_COUNT,
    Decision,
)
from raydp_synth.accountant.strategies.base import (
    UNPRICEABLE,
    PricingStrategy,
    StudyBudget,
    StudySettings,
    trials_phrase,
)
from raydp_synth.errors import ConfigError, PrivacyInvariantError
from raydp_synth.privacy.accounting import dominates, parse_distribution, random_stopping_epsilon
from raydp_synth.privacy.pricing import Price, rdp_only_price

__all__ = ["RandomStoppingPricing"]


class RandomStoppingPricing(PricingStrategy):
    """Papernot & Steinke's random stopping: K secret, every grant dominated by E_ref,
    the search priced up front. Nothing is published while the study runs."""

    name = "random-stopping"
    draws_trial_count = True
    theorem = "Papernot & Steinke, ICLR 2022 (RepeatAndSelectDpEvent)"

    def __init__(self, settings: StudySettings) -> None:
        super().__init__(settings)
        self.reference = settings.reference()
        self.search_cost = type(self).search_epsilon(settings)

    # -- the settings ------------------------------------------------------------

    @classmethod
    def check(cls, settings: StudySettings) -> dict[str, Any]:
        cls._check_options(settings)
        parse_distribution(settings.distribution)
        if settings.reference_event is None:
            raise ConfigError(
                "random-stopping pricing needs the study's reference plan "
                "(reference_event): every trial is checked against it")
        cls._check_affordable(settings, cls.search_epsilon(settings))
        return {"distribution": settings.distribution.strip().lower()}

    @classmethod
    def _check_options(cls, settings: StudySettings) -> None:
        if settings.tune_fraction is not None:
            raise ConfigError("a tuning fraction is priced under --strategy subsampled only")

    @classmethod
    def _check_affordable(cls, settings: StudySettings, cost: float) -> None:
        if not cost <= settings.epsilon:
            raise ConfigError(
                f"the reference plan repeated {settings.trials} times on average "
                f"({settings.distribution}) costs epsilon={cost:.4g} > the study's epsilon "
                f"{settings.epsilon:g}: calibrate the reference plan to this budget")

    @classmethod
    def search_epsilon(cls, settings: StudySettings) -> float:
        """Epsilon of ``RepeatAndSelectDpEvent(E_ref, trials, shape)`` at ``delta``."""
        return random_stopping_epsilon(settings.reference(), mean=settings.trials,
                                       shape=settings.shape, delta=settings.delta)

    # -- decisions ---------------------------------------------------------------

    def decide(self, budget: StudyBudget, trial_id: str, plan: dpa.DpEvent,
               event_json: dict[str, Any], attempt: str | None) -> Decision:
        if budget.trial_count is None:
            raise PrivacyInvariantError(f"a {self.name} study without its trial count")
        refusal = self._past_the_search(budget)
        if refusal is not None:
            return budget.refusal(trial_id, refusal, event_json)
        if budget.tuning_grants() >= budget.trial_count:
            return budget.refusal(trial_id, REASON_TRIAL_COUNT, event_json)
        if budget.draws is not None and trial_id not in budget.draws:
            return budget.refusal(
                trial_id, f"{REASON_NOT_DRAWN}: grants go to the first K trials the search "
                "drew, in the order it drew them, not to the first to ask", event_json)
        try:
            covered = dominates(self.reference, plan)
        except UNPRICEABLE as exc:
            return budget.refusal(trial_id, f"{REASON_INVALID}: RDP cannot price it ({exc})",
                                  event_json)
        if not covered:
            return budget.refusal(
                trial_id,
                f"{REASON_NOT_DOMINATED} at every RDP order: calibrate the trial against "
                "the reference plan (more noise, fewer steps or a lower sample rate)",
                event_json,
            )
        return budget.grant(trial_id, event_json, attempt)

    def fits(self, budget: StudyBudget, plan: dpa.DpEvent) -> bool:
        """Dominated by E_ref at every order (the search's price is fixed; whether K
        still allows a trial is the search's secret, not answered here)."""
        try:
            return dominates(self.reference, plan)
        except UNPRICEABLE:
            return False

    def _past_the_search(self, budget: StudyBudget) -> str | None:
        """Why no tuning trial can be granted any more beyond K (None: it may)."""
        return None

    def can_grant(self, budget: StudyBudget) -> bool:
        return not budget.search_finished()

    # -- the statement -----------------------------------------------------------

    def spent_price(self, budget: StudyBudget) -> Price | None:
        return rdp_only_price(self.search_cost)

    def statement_fields(self, budget: StudyBudget) -> dict[str, Any]:
        s = self.settings
        return {"distribution": s.distribution, "mean_trials": s.trials,
                "reference_event": s.reference_event, "theorem": self.theorem}

    def ledger_fields(self, budget: StudyBudget) -> dict[str, Any]:
        s = self.settings
        return {"distribution": s.distribution, "mean_trials": s.trials,
                "trial_count_secret": budget.trial_count}

    @classmethod
    def ledger_lines(cls, statement: Mapping[str, Any]) -> list[str]:
        lines = [f"  random stopping: {statement['distribution']} with mean "
                 f"{statement['mean_trials']}; K={statement['trial_count_secret']} "
                 "(curator-only: never publish K)"]
        if "density_ratio" in statement:  # DP-HyPO (dp_hypo.py)
            c = statement["density_ratio"]
            lines.append(f"  adaptive (dp-hypo): proposals within [1/{c:g}, {c:g}] x the "
                         "prior, priced by DP-HyPO's bound")
        return lines

    @classmethod
    def search_summary(cls, statement: Mapping[str, Any]) -> str:
        mean, law = statement.get("mean_trials"), statement.get("distribution")
        return (f"whole search (random stopping, {law}, mean {trials_phrase(mean)})"
                if isinstance(mean, (int, float)) else "whole search (random stopping)")
