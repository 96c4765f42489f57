"""Trial roles: what the trials of each phase of each search strategy do differently.

A :class:`TrialRole` sizes a trial's plan (from public quantities and the grants so
far) and says whether the trial asks for a grant, reads the ledger's grants first,
trains on subsampled tuning's secret subset, may export its metrics live, or may be
a final run. The study's :class:`~raydp_synth.tune.study_settings.StudySettings`
carries one to every trial, so no trial looks its strategy up by name; the
strategies (:mod:`raydp_synth.tune.strategies`) choose them:

* compose: :data:`COMPOSE_TRIAL` (also every final run that takes the budget left);
* random stopping: :data:`RANDOM_STOPPING_TRIAL` (dominated by E_ref);
* subsampled tuning: :data:`SUBSAMPLED_STUDY` (its own settings),
  :data:`SUBSAMPLED_SEARCH_TRIAL`, :data:`SUBSAMPLED_FINAL_TRIAL`;
* ``--tune-on-public``: :data:`PUBLIC_SEARCH_TRIAL`, then a compose final run.

Everything here is computed from public quantities (configs, dataset size) and from
the ledger's plans: no sensitive data (:mod:`raydp_synth.tune.planning` has the
calibrations and the privacy arguments).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from raydp_synth.errors import PrivacyInvariantError
from raydp_synth.tune.planning import (
    plan_dominated_by,
    plan_for_compose,
    plan_for_subsampled_final,
)

if TYPE_CHECKING:
    import dp_accounting as dpa

    from raydp_synth.data import DataInfo
    from raydp_synth.methods.base import Method
    from raydp_synth.privacy.plan import PrivacyPlan

__all__ = ["COMPOSE_TRIAL", "PUBLIC_SEARCH", "PUBLIC_SEARCH_TRIAL", "RANDOM_STOPPING_TRIAL",
           "SUBSAMPLED_FINAL", "SUBSAMPLED_FINAL_TRIAL", "SUBSAMPLED_SEARCH",
           "SUBSAMPLED_SEARCH_TRIAL", "SUBSAMPLED_STUDY", "TRIAL_ROLES", "TrialRole",
           "trial_plan", "trial_role"]

#: The role of a search's trials on data declared public (``--tune-on-public``):
#: they ask no grant, their plans are single runs at the study's budget, and their
#: score is not a private release.
PUBLIC_SEARCH = "public-search"
#: The role of ``--strategy subsampled``'s tuning trials: random stopping on the
#: secret tuning subset, plans sized for its public size and dominated by E_ref.
SUBSAMPLED_SEARCH = "subsampled-search"
#: The role of its final run: one trial on all the data whose plan is calibrated
#: against the tuning curve composed with it, granted as the final run.
SUBSAMPLED_FINAL = "subsampled-final"


@dataclass(frozen=True, kw_only=True)
class TrialContext:
    """What a trial's plan depends on besides its config: public quantities and the
    grants so far, never a sensitive record (:func:`trial_plan` has the meanings).

    Attributes:
        method: the study's method; data: the public facts of its training split.
        epsilon, delta: the study's budget; trials: its trial count (N_max, K's mean,
            or the grants before a final run plus one).
        score_share: the selection score's share of a trial's budget.
        granted: compose: the ledger's grants so far, in ledger order.
        reference_event: E_ref, which a dominated trial's plan is held to.
        tuning_rdp: subsampled tuning's tuning-phase RDP curve (its final run's).
        trial_data: a dominated trial's own public facts (subsampled tuning's subset).
    """

    method: Method
    data: DataInfo
    epsilon: float
    delta: float
    trials: int
    score_share: float
    granted: Sequence[dpa.DpEvent] = ()
    reference_event: dpa.DpEvent | None = None
    tuning_rdp: Sequence[float] | None = None
    trial_data: DataInfo | None = None


@dataclass(frozen=True)
class TrialRole(ABC):
    """What the trials of one phase of a strategy do differently.

    Contract: an instance holds no state (two instances of one class are equal, so a
    study's settings survive pickling to the trials unchanged); :meth:`plan` is a
    deterministic function of public inputs and of the grants so far.

    Attributes:
        name: the role's name (``StudySettings.role_name``, the plan inputs of
            :class:`~raydp_synth.tune.study_settings.PlannedTrial`, messages).
        held_to_reference: each trial is one of random stopping's K runs, its plan
            dominated by E_ref (a config with no such plan is granted a no-op).
        asks_grant: the trial asks the study's accountant for a grant (a search on
            data declared public does not).
        plans_against_grants: the plan is sized against the ledger's grants so far
            (compose), so the trial reads them before planning.
        granted_as_final: the accountant grants it as subsampled tuning's final run.
        on_subset: the trial trains and scores on the secret tuning subset.
        live_metrics: its trials' metrics may go out as gauges while the study runs
            (a public trial count, every trial priced one by one: docs/privacy.md).
        tuning_curve: the settings carry subsampled tuning's q and tuning curve.
        may_be_final_run: :func:`~raydp_synth.tune.final_run.run_final` may run it.
    """

    name: ClassVar[str]
    held_to_reference: ClassVar[bool] = False
    asks_grant: ClassVar[bool] = True
    plans_against_grants: ClassVar[bool] = False
    granted_as_final: ClassVar[bool] = False
    on_subset: ClassVar[bool] = False
    live_metrics: ClassVar[bool] = False
    tuning_curve: ClassVar[bool] = False
    may_be_final_run: ClassVar[bool] = False

    @abstractmethod
    def plan(self, config: Any, context: TrialContext) -> PrivacyPlan:
        """The plan of a trial of ``config`` in this role, from ``context``
        (:func:`trial_plan` has the arguments).

        Raises:
            ConfigError: no plan of ``config`` fits.
        """


@dataclass(frozen=True)
class ComposeTrial(TrialRole):
    """A compose trial: its plan and the remaining ``trials - len(granted)`` copies
    of it, composed after the grants so far, meet the budget; also a final run
    (``trials`` = the grants before it + 1: it takes the budget left)."""

    name = "compose"
    plans_against_grants = True
    live_metrics = True
    may_be_final_run = True

    def plan(self, config: Any, context: TrialContext) -> PrivacyPlan:
        c = context
        return plan_for_compose(c.method, config, c.data, target_epsilon=c.epsilon,
                                delta=c.delta, granted=c.granted,
                                remaining_trials=c.trials - len(c.granted),
                                score_share=c.score_share)


COMPOSE_TRIAL = ComposeTrial()


@dataclass(frozen=True)
class DominatedTrial(TrialRole):
    """One of random stopping's K runs: its plan as little noised as possible while
    dominated by E_ref (``reference_event``) on the trial's data (``trial_data``, or
    the study's)."""

    name = "random-stopping"
    held_to_reference = True

    def plan(self, config: Any, context: TrialContext) -> PrivacyPlan:
        c = context
        if c.reference_event is None:
            raise PrivacyInvariantError(f"a {self.name} trial without its reference plan E_ref")
        return plan_dominated_by(c.method, config, c.trial_data or c.data,
                                 reference_event=c.reference_event, delta=c.delta,
                                 score_share=c.score_share)


RANDOM_STOPPING_TRIAL = DominatedTrial()


@dataclass(frozen=True)
class SubsampledStudyRole(TrialRole):
    """The subsampled study's own settings (E_ref, q, the tuning curve), from which
    its phases' settings are made; no trial runs in it."""

    name = "subsampled"
    tuning_curve = True

    def plan(self, config: Any, context: TrialContext) -> PrivacyPlan:
        raise PrivacyInvariantError("a subsampled study's trials are its tuning trials and "
                                    "its final run, each in its own role")


@dataclass(frozen=True)
class SubsampledSearchTrial(DominatedTrial):
    """A tuning trial: one of random stopping's K runs on the secret subset, its plan
    sized for the subset's public size and dominated by E_ref."""

    name = SUBSAMPLED_SEARCH
    on_subset = True
    tuning_curve = True


@dataclass(frozen=True)
class SubsampledFinalTrial(TrialRole):
    """The final run: the tuning phase's curve composed with its plan (variant 1)
    meets the study's total; granted as the final run."""

    name = SUBSAMPLED_FINAL
    granted_as_final = True
    tuning_curve = True
    may_be_final_run = True

    def plan(self, config: Any, context: TrialContext) -> PrivacyPlan:
        c = context
        if c.tuning_rdp is None:
            raise PrivacyInvariantError("a subsampled final run without its tuning curve")
        return plan_for_subsampled_final(c.method, config, c.data, tuning_rdp=c.tuning_rdp,
                                         target_epsilon=c.epsilon, delta=c.delta,
                                         score_share=c.score_share)


SUBSAMPLED_STUDY = SubsampledStudyRole()
SUBSAMPLED_SEARCH_TRIAL = SubsampledSearchTrial()
SUBSAMPLED_FINAL_TRIAL = SubsampledFinalTrial()


@dataclass(frozen=True)
class PublicSearchTrial(TrialRole):
    """A trial of the search on public data: one run at the whole budget (its plan
    sets the noise regime of the final run), no grant, no private score."""

    name = PUBLIC_SEARCH
    asks_grant = False
    live_metrics = True

    def plan(self, config: Any, context: TrialContext) -> PrivacyPlan:
        return plan_for_compose(context.method, config, context.data,
                                target_epsilon=context.epsilon, delta=context.delta,
                                granted=[], remaining_trials=1, score_share=0.0)


PUBLIC_SEARCH_TRIAL = PublicSearchTrial()


#: Every trial role, by name (for the callers that name one).
TRIAL_ROLES: dict[str, TrialRole] = {role.name: role for role in (
    COMPOSE_TRIAL, RANDOM_STOPPING_TRIAL, SUBSAMPLED_STUDY, SUBSAMPLED_SEARCH_TRIAL,
    SUBSAMPLED_FINAL_TRIAL, PUBLIC_SEARCH_TRIAL)}


def trial_role(name: str) -> TrialRole:
    """The trial role called ``name``.

    Raises:
        ValueError: no such role (the message lists the table's).
    """
    if name not in TRIAL_ROLES:
        raise ValueError(f"no trial role {name!r}; the roles: {', '.join(TRIAL_ROLES)}")
    return TRIAL_ROLES[name]


def trial_plan(
    method: Method,
    config: Any,
    data: DataInfo,
    *,
    role: TrialRole | str,
    epsilon: float,
    delta: float,
    trials: int,
    score_share: float,
    granted: Sequence[dpa.DpEvent] = (),
    reference_event: dpa.DpEvent | None = None,
    tuning_rdp: Sequence[float] | None = None,
    trial_data: DataInfo | None = None,
) -> PrivacyPlan:
    """The plan of a study's next trial of ``config`` in the role ``role`` (a
    :class:`TrialRole` or its name): what every trial asks the accountant for
    (:func:`raydp_synth.tune.trial.run_trial`), and what the study checks before Ray
    starts (the first trial's,
    :func:`raydp_synth.tune.affordability.check_first_trial_affordable`).

    Args:
        data: the public facts of the study's training split.
        role: ``compose`` (``granted`` composed with the ``trials`` not yet
            granted, :func:`~raydp_synth.tune.planning.plan_for_compose`);
            :data:`PUBLIC_SEARCH` (one run at the whole budget, scored on public
            data); :data:`SUBSAMPLED_FINAL` (the final run after the tuning phase
            whose RDP curve is ``tuning_rdp``,
            :func:`~raydp_synth.tune.planning.plan_for_subsampled_final`); random
            stopping's and subsampled tuning's trials: dominated by
            ``reference_event``, E_ref (:func:`~raydp_synth.tune.planning.plan_dominated_by`).
        granted: compose: the events the ledger granted so far, in ledger order.
        trial_data: a dominated trial's own public facts where they are not
            ``data``'s (subsampled tuning's subset).

    Raises:
        ConfigError: no plan of ``config`` fits (e.g. a budget too small for its
            steps: "no noise multiplier ... reaches epsilon=...").
    """
    role = trial_role(role) if isinstance(role, str) else role
    return role.plan(config, TrialContext(
        method=method, data=data, epsilon=epsilon, delta=delta, trials=trials,
        score_share=score_share, granted=tuple(granted), reference_event=reference_event,
        tuning_rdp=tuning_rdp, trial_data=trial_data))
