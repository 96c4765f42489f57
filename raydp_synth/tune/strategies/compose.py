"""``--strategy compose``: at most N trials, the study's total the composition of
every granted plan (docs/budget-pricing.md, section 6).

Adaptive composition covers trials chosen in any way, so every sampler may run
(TPE adapts to the scores), the sampler's seed is the public ``--seed``, the
search starts from the method's default config, and the trial count is public
(its trials' metrics may go out as gauges). Each trial's plan is calibrated so
that the plans granted so far, composed with the remaining trials' copies of its
own, meet the budget (:func:`~raydp_synth.tune.planning.plan_for_compose`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from raydp_synth.tune.affordability import ledger_granted_events
from raydp_synth.tune.strategies.base import FirstTrial, Phases, SearchStrategy
from raydp_synth.tune.strategies.roles import COMPOSE_TRIAL
from raydp_synth.tune.tuner import one_experiment, restored_tuner

if TYPE_CHECKING:
    from raydp_synth.tune.prepared_study import PreparedStudy
    from raydp_synth.tune.strategies.base import StudyOptions
    from raydp_synth.tune.study_settings import StudySettings

__all__ = ["DP_HYPO_NEEDS_RANDOM_STOPPING", "Compose"]

#: ``--sampler dp-hypo`` outside random stopping.
DP_HYPO_NEEDS_RANDOM_STOPPING = (
    "--sampler dp-hypo is priced by DP-HyPO's random-stopping bound: "
    "add --strategy random-stopping (and --distribution geometric)")


class Compose(SearchStrategy):
    """At most ``--trials`` trials, priced by composition; resumable (Tune's saved
    experiment is restored, with the trials the ledger has not granted)."""

    name = "compose"
    pricing = "compose"
    role = COMPOSE_TRIAL
    samplers = ("tpe", "random")
    default_sampler = "tpe"
    resumable = True
    secret_sampler_seed = False
    runs_default_first = True
    hides_trial_count = False
    trials_are = "at most"

    def sampler_refusal(self, sampler: str) -> str:
        if sampler == "dp-hypo":
            return DP_HYPO_NEEDS_RANDOM_STOPPING
        return super().sampler_refusal(sampler)

    def first_trial(self, request: StudyOptions, prepared: PreparedStudy) -> FirstTrial | None:
        granted = ledger_granted_events(prepared.study_dir) if request.resume else []
        if len(granted) >= request.trials:
            return None  # no trial is left to buy; the study goes on to its release
        return FirstTrial(role=COMPOSE_TRIAL, trials=request.trials, granted=tuple(granted),
                          phrase=self.trial_phrase(request.trials))

    def trial_phrase(self, trials: int) -> str:
        return f"one of {trials} trials ({self.name})" if trials > 1 else "one trial"

    def num_samples(self, request: StudyOptions, accountant: Any) -> int:
        """At most N_max trials; on ``--resume``, those the ledger has not granted."""
        if not request.resume:
            return request.trials
        import ray  # the accountant is a Ray actor

        return max(0, request.trials - len(ray.get(accountant.granted_events.remote())))

    def resumed_tuner(self, request: StudyOptions, latest: Path | None, trainable: Any,
                      accountant: Any) -> Any:
        return restored_tuner(latest, trainable)

    def phases(self, request: StudyOptions, prepared: PreparedStudy,
               settings: StudySettings, accountant: Any) -> Phases:
        return one_experiment(self, request, prepared, settings, accountant)
