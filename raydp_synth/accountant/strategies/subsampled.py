"""Subsampled tuning: random stopping on a Poisson subset, then one final run.

Privacy argument: Koskela & Kulkarni, 2023, "Practical Differentially Private
Hyperparameter Tuning with Subsampling", variant 1
(:mod:`raydp_synth.privacy.subsampled_tuning`). The tuning phase is random stopping
(:mod:`.random_stopping`: K drawn the same way, every tuning plan dominated by E_ref,
where E_ref and the plans are sized for the public subset size ``round(q n)``) on a
Poisson(q) subset of the sensitive records, priced by Zhu & Wang's amplification of
``RepeatAndSelectDpEvent(E_ref, mean, shape)``; then exactly one final run on all the
data (a grant with ``final=True``, only after the K tuning grants), priced by RDP
composition of the tuning curve and the final plan's curve. The final plan is granted
only if that composition is within the budget.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dp_accounting as dpa
import numpy as np

from raydp_synth.accountant.decisions import (
    FINAL_PHASE,
    REASON_BUDGET,
    REASON_FINAL_DONE,
    REASON_INVALID,
    REASON_TRIAL_COUNT,
    REASON_TUNING_UNFINISHED,
    Decision,
)
from raydp_synth.accountant.strategies.base import UNPRICEABLE, StudyBudget, StudySettings
from raydp_synth.accountant.strategies.random_stopping import RandomStoppingPricing
from raydp_synth.errors import ConfigError, PrivacyInvariantError
from raydp_synth.privacy.accounting import rdp_curve
from raydp_synth.privacy.events import event_to_json
from raydp_synth.privacy.pricing import Price, rdp_only_price
from raydp_synth.privacy.subsampled_tuning import (
    amplified_tuning_rdp,
    epsilon_from_rdp,
    variant1_rdp,
)

__all__ = ["FINAL_PHASE", "SUBSAMPLED_BOUND", "SubsampledPricing"]

#: The name of the bound a subsampled statement states.
SUBSAMPLED_BOUND = (
    "Koskela & Kulkarni, NeurIPS 2023, variant 1: the tuning phase's "
    "RepeatAndSelectDpEvent (Papernot & Steinke, ICLR 2022) on a Poisson(q) subset, "
    "amplified by Zhu & Wang's (ICML 2019) Poisson-subsampled RDP bound, composed "
    "(RDP, Mironov 2017) with the final run on all the data "
    "(raydp_synth.privacy.subsampled_tuning)")


class SubsampledPricing(RandomStoppingPricing):
    """Variant 1 of subsampled tuning: the amplified tuning phase, priced up front,
    composed (RDP) with the final run once it is granted."""

    name = "subsampled"
    theorem = SUBSAMPLED_BOUND
    has_final_run = True

    def __init__(self, settings: StudySettings) -> None:
        super().__init__(settings)
        self.tuning = self.tuning_rdp(settings)
        self.final_event: dpa.DpEvent | None = None

    # -- the settings ------------------------------------------------------------

    @classmethod
    def check(cls, settings: StudySettings) -> dict[str, Any]:
        return {**super().check(settings), "tune_fraction": float(settings.tune_fraction or 0)}

    @classmethod
    def _check_options(cls, settings: StudySettings) -> None:
        if settings.density_ratio != 1:
            raise ConfigError(
                "a density-ratio bound c > 1 (dp-hypo) is priced under random stopping only")
        q = settings.tune_fraction
        if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 < q < 1:
            raise ConfigError(f"the tuning fraction {q!r} must be a number in (0, 1), e.g. 0.1")

    @classmethod
    def _check_affordable(cls, settings: StudySettings, cost: float) -> None:
        if not cost < settings.epsilon:
            raise ConfigError(
                f"the tuning phase alone (reference plan, mean {settings.trials} trials, "
                f"q={settings.tune_fraction:g}) costs epsilon={cost:.4g}, leaving nothing of "
                f"the study's epsilon {settings.epsilon:g} for the final run: calibrate the "
                "reference plan to a share of this budget")
        super()._check_affordable(settings, cost)

    @staticmethod
    def tuning_rdp(settings: StudySettings) -> np.ndarray:
        """The tuning phase's RDP curve on ORDERS (random stopping of E_ref amplified
        by the Poisson(q) draw of the subset)."""
        if settings.tune_fraction is None:
            raise ConfigError("only a subsampled study has a tuning phase")
        return amplified_tuning_rdp(settings.reference(), mean=settings.trials,
                                    shape=settings.shape, tune_fraction=settings.tune_fraction)

    @classmethod
    def search_epsilon(cls, settings: StudySettings) -> float:
        """The amplified tuning phase's epsilon (:meth:`tuning_rdp`)."""
        return epsilon_from_rdp(cls.tuning_rdp(settings), settings.delta)

    # -- the state and decisions -------------------------------------------------

    def take_grant(self, event: dpa.DpEvent, entry: Mapping[str, Any], *,
                   state: Any = None) -> None:
        if entry.get("phase") == FINAL_PHASE:
            self.final_event = event

    def _past_the_search(self, budget: StudyBudget) -> str | None:
        return f"{REASON_TRIAL_COUNT}: {REASON_FINAL_DONE}" if self.final_event is not None \
            else None

    def drawing_closed(self) -> bool:
        return self.final_event is not None

    def final_runs(self) -> int:
        return int(self.final_event is not None)

    def decide_final(self, budget: StudyBudget, trial_id: str, plan: dpa.DpEvent,
                     event_json: dict[str, Any], attempt: str | None) -> Decision:
        """After exactly K tuning grants (the theorem prices the best of K), once, and
        only if tuning + final fits the budget."""
        if budget.trial_count is None:
            raise PrivacyInvariantError("a subsampled study without its trial count")
        if self.final_event is not None:
            return budget.refusal(trial_id, REASON_FINAL_DONE, event_json)
        if not budget.search_finished():
            return budget.refusal(
                trial_id, f"{REASON_TUNING_UNFINISHED}: the final run is granted after the "
                "study's random number of tuning trials", event_json)
        settings = self.settings
        try:
            total = epsilon_from_rdp(variant1_rdp(self.tuning, plan), settings.delta)
        except UNPRICEABLE as exc:
            return budget.refusal(trial_id, f"{REASON_INVALID}: RDP cannot price it ({exc})",
                                  event_json)
        if not total <= settings.epsilon:  # NaN-safe
            return budget.refusal(
                trial_id,
                f"{REASON_BUDGET}: the tuning phase composed with this final run would bring "
                f"the study to epsilon={total:.6g} > budget {settings.epsilon:g} "
                f"(tuning phase {budget.spent_epsilon():.6g}, at delta={settings.delta:g})",
                event_json,
            )
        decision = budget.grant(trial_id, event_json, attempt)
        assert decision.entry is not None
        decision.entry["phase"] = FINAL_PHASE
        return decision

    # -- the statement -----------------------------------------------------------

    def epsilons(self) -> dict[str, float | None]:
        """The tuning phase's epsilon alone, the final run's alone (None before its
        grant) and their composition (variant 1; the tuning phase alone before the
        final grant), all by RDP at the study's delta."""
        delta = self.settings.delta
        tuning = epsilon_from_rdp(self.tuning, delta)
        if self.final_event is None:
            return {"tuning": tuning, "final": None, "total": tuning}
        return {
            "tuning": tuning,
            "final": epsilon_from_rdp(rdp_curve(self.final_event), delta),
            "total": epsilon_from_rdp(variant1_rdp(self.tuning, self.final_event), delta),
        }

    def spent_price(self, budget: StudyBudget) -> Price | None:
        """RDP alone: the tuning phase's (priced in full from the start, as random
        stopping's), composed with the final run once it is granted."""
        return rdp_only_price(float(self.epsilons()["total"] or 0.0))

    def statement_fields(self, budget: StudyBudget) -> dict[str, Any]:
        s = self.settings
        eps = self.epsilons()
        return {
            "selection": self.name,
            "variant": 1,
            "tune_fraction": s.tune_fraction,
            "distribution": s.distribution,
            "mean_trials": s.trials,
            "reference_event": s.reference_event,
            "tuning_epsilon": eps["tuning"],
            "final_run_epsilon": eps["final"],
            "total_epsilon": eps["total"],
            "final_event": None if self.final_event is None else event_to_json(self.final_event),
            "theorem": self.theorem,
        }

    def ledger_fields(self, budget: StudyBudget) -> dict[str, Any]:
        eps = self.epsilons()
        return {**super().ledger_fields(budget), "tune_fraction": self.settings.tune_fraction,
                "tuning_epsilon": eps["tuning"], "final_run_epsilon": eps["final"]}

    @classmethod
    def ledger_lines(cls, statement: Mapping[str, Any]) -> list[str]:
        final = statement["final_run_epsilon"]
        return [
            f"  subsampled tuning (Koskela & Kulkarni 2023, variant 1): tuning phase on a "
            f"Poisson q={statement['tune_fraction']:g} subset, {statement['distribution']} "
            f"trial count with mean {statement['mean_trials']}; "
            f"K={statement['trial_count_secret']} (curator-only: never publish K)",
            f"  tuning phase epsilon {statement['tuning_epsilon']:.4f} (amplified, Zhu & Wang "
            "2019); final run (grant*) epsilon "
            + ("not granted yet" if final is None else f"{final:.4f}")
            + f"; composed (RDP) {statement['epsilon']:.4f}",
        ]

    @classmethod
    def search_summary(cls, statement: Mapping[str, Any]) -> str:
        q = statement.get("tune_fraction")
        return (f"whole search (subsampled q={q:g}: tuning phase + final run)"
                if isinstance(q, (int, float)) else "whole search (subsampled)")
