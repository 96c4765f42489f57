"""``--strategy random-stopping``: the best of a secret random number K of i.i.d.
trials (Papernot & Steinke 2022, "Hyperparameter Tuning with Renyi Differential
Privacy"; with ``--sampler dp-hypo``, DP-HyPO's bound for proposals within a density
ratio c of a fixed prior).

K is drawn by the accountant (OS entropy) and never leaves it; the sampler's seed is
secret too (:func:`~raydp_synth.tune.optuna_searcher.optuna_search`). The reference
plan E_ref (the default config's plan) is calibrated so that the whole search meets
the budget (:func:`~raydp_synth.tune.planning.reference_plan`); every trial's plan is
dominated by E_ref (:func:`~raydp_synth.tune.planning.plan_dominated_by`), and a
draw with no such plan is granted a no-op, one of the K runs.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raydp_synth.errors import BudgetExhausted, ConfigError
from raydp_synth.privacy.adaptive_tuning import adaptive_random_stopping_floor
from raydp_synth.tune.affordability import cannot_buy_a_trial
from raydp_synth.tune.planning import reference_plan
from raydp_synth.tune.strategies.base import Phases, SearchStrategy
from raydp_synth.tune.strategies.roles import RANDOM_STOPPING_TRIAL
from raydp_synth.tune.tuner import (
    one_experiment,
    restored_tuner,
    take_back_draws_that_will_not_ask,
    unfinished_trials,
)

if TYPE_CHECKING:
    from raydp_synth.data import DatasetSplits
    from raydp_synth.tune.prepared_study import PreparedStudy
    from raydp_synth.tune.strategies.base import StudyOptions
    from raydp_synth.tune.study_settings import StudySettings

__all__ = ["RandomStopping"]

#: A random-stopping study's settings that decide how its trials are drawn, by flag.
_TRIAL_DISTRIBUTION = (("sampler", "--sampler"), ("default_share", "--default-share"),
                       ("hypo_c", "--hypo-c"))


class RandomStopping(SearchStrategy):
    """Exactly K (secret, mean ``--trials``) i.i.d. trials, the best released."""

    name = "random-stopping"
    pricing = "random-stopping"
    role = RANDOM_STOPPING_TRIAL
    samplers = ("random", "dp-hypo")
    default_sampler = "random"
    resumable = True
    uses_reference = True
    takes_default_share = True
    releases_after_all_draws = True

    def sampler_refusal(self, sampler: str) -> str:
        return (f"--strategy random-stopping needs i.i.d. trials, but --sampler {sampler} "
                "adapts to earlier scores without a bound; use --sampler random or dp-hypo, or "
                "--strategy compose (valid for every sampler)")

    def check_resumed(self, request: StudyOptions, study_dir: Path) -> None:
        """A resumed random-stopping study draws its remaining trials as it drew the
        first.

        Random stopping prices K i.i.d. trials; a resume with another sampler,
        default share or density ratio would draw the rest from another
        distribution (and a restarts study's would lose their own initialisations).
        The ledger checks the pricing's settings; this checks the distribution's,
        against ``study.json``.

        Raises:
            ConfigError: one line naming the flag and the value the study was started with.
        """
        started = json.loads((study_dir / "study.json").read_text()).get("request", {})
        for name, flag in _TRIAL_DISTRIBUTION:
            if name in started and started[name] != getattr(request, name):
                raise ConfigError(f"--resume: study {study_dir.name} was started with {flag} "
                                  f"{started[name]}, not {getattr(request, name)}; resume with "
                                  f"the same {flag} (random stopping's trials must all be drawn "
                                  "from one distribution)")

    def prepare(self, request: StudyOptions, prepared: PreparedStudy, *,
                splits: DatasetSplits, shape: float) -> PreparedStudy:
        """E_ref, the default config's plan calibrated so that the whole search
        meets the budget (what every trial's plan is held to)."""
        _check_adaptivity_affordable(request, shape)
        try:
            reference = reference_plan(
                prepared.method, prepared.default, prepared.data, target_epsilon=request.epsilon,
                delta=request.delta, mean_trials=float(request.trials), shape=shape,
                score_share=prepared.score_share, density_ratio=request.density_ratio)
        except ConfigError as err:  # E_ref is what every trial's plan is held to
            raise BudgetExhausted(cannot_buy_a_trial(
                request, self.trial_phrase(request.trials), err)) from None
        return replace(prepared, reference=reference)

    def trial_phrase(self, trials: int) -> str:
        return f"a mean of {trials} trials (random stopping)"

    def resumed_tuner(self, request: StudyOptions, latest: Path | None, trainable: Any,
                      accountant: Any) -> Any:
        """Tune's experiment restored only for the trials it resumes, which keep their
        draws and ask. With none, a new experiment draws afresh: a restored search
        that had finished (K drawn) would never draw again in place of the draws
        taken back (:func:`~raydp_synth.tune.tuner.take_back_draws_that_will_not_ask`)."""
        keep = unfinished_trials(latest) if latest is not None else set()
        tuner = restored_tuner(latest, trainable) if keep else None
        take_back_draws_that_will_not_ask(accountant, keep=keep if tuner is not None else set(),
                                          as_no_ops=request.failures_are_runs)
        return tuner

    def phases(self, request: StudyOptions, prepared: PreparedStudy,
               settings: StudySettings, accountant: Any) -> Phases:
        return one_experiment(self, request, prepared, settings, accountant)


def _check_adaptivity_affordable(request: StudyOptions, shape: float) -> None:
    """``--sampler dp-hypo``: refuse, before anything starts, a budget that the price
    of the adaptivity alone (DP-HyPO's Theorem 1 for trials that release nothing)
    already meets, naming that price and random stopping's.

    Raises:
        BudgetExhausted: one line with both floors and the fixes.
    """
    if request.density_ratio == 1:
        return
    floors = [adaptive_random_stopping_floor(mean=float(request.trials), shape=shape,
                                             delta=request.delta, density_ratio=c)
              for c in (request.density_ratio, 1.0)]
    if floors[0] < request.epsilon:
        return
    raise BudgetExhausted(
        f"--sampler dp-hypo at --hypo-c {request.density_ratio:g} with a mean of "
        f"{request.trials} trials costs epsilon {floors[0]:.3g} at delta "
        f"{request.delta:g} before any trial trains (random stopping's price of K plus "
        f"that of its adaptivity), "
        f"which the budget epsilon={request.epsilon:g} cannot pay; nothing was started "
        f"or written: lower --hypo-c, raise --epsilon, or use --sampler random "
        f"(random stopping costs {floors[1]:.2g} before any trial trains)")
