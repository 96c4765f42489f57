"""DP-HyPO: random stopping whose sampler adapts within a density-ratio bound.

Privacy argument: Wang, Gao, Zhang, Su & Shen, 2023, "DP-HyPO: An Adaptive Private
Hyperparameter Optimization Framework", Theorem 1: when every proposal density stays
within [1/c, c] times a fixed prior, the best of K runs (K as in random stopping) is
priced by the bound of :func:`~raydp_synth.privacy.adaptive_tuning.adaptive_random_stopping_epsilon`
over E_ref. Everything else (K secret, every grant dominated by E_ref, draws recorded
in order) is random stopping's (:mod:`.random_stopping`). The ledger names it
``random-stopping`` with its ``density_ratio``, so a ledger written before this class
existed replays unchanged.
"""

from __future__ import annotations

from typing import Any, ClassVar

from raydp_synth.accountant.strategies.base import StudyBudget, StudySettings
from raydp_synth.accountant.strategies.random_stopping import RandomStoppingPricing
from raydp_synth.privacy.adaptive_tuning import adaptive_random_stopping_epsilon

__all__ = ["DpHypoPricing"]


class DpHypoPricing(RandomStoppingPricing):
    """Random stopping with proposals within [1/c, c] x a fixed prior (c > 1)."""

    theorem: ClassVar[str] = ""  # the statement names c (statement_fields)

    @classmethod
    def search_epsilon(cls, settings: StudySettings) -> float:
        return adaptive_random_stopping_epsilon(
            settings.reference(), mean=settings.trials, shape=settings.shape,
            delta=settings.delta, density_ratio=settings.density_ratio)

    def statement_fields(self, budget: StudyBudget) -> dict[str, Any]:
        c = self.settings.density_ratio
        return {
            **super().statement_fields(budget),
            "theorem": f"Wang, Gao, Zhang, Su & Shen, NeurIPS 2023 (DP-HyPO, Theorem 1), "
                       f"proposals within [1/{c:g}, {c:g}] x prior, over Papernot & Steinke's "
                       "RepeatAndSelectDpEvent (raydp_synth.privacy.adaptive_tuning)",
            "density_ratio": c,
        }

    def ledger_fields(self, budget: StudyBudget) -> dict[str, Any]:
        return {**super().ledger_fields(budget), "density_ratio": self.settings.density_ratio}
