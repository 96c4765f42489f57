"""What every trial of a study reads from the study: one frozen value, built once.

The study's driver builds a :class:`StudySettings` from the validated request and the
public facts it settled (the data's :class:`~raydp_synth.methods.base.DataInfo`, the
fitted search space, the reference plan), and Ray Tune hands the same value to every
trial (``tune.with_parameters``). A trial's own part, the config Tune samples for it,
travels separately.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raydp_synth.data import DataInfo
from raydp_synth.data.public import PublicDeclaration
from raydp_synth.data.spec import DatasetSpec
from raydp_synth.tune.defaults import TRIAL_LOOPS
from raydp_synth.tune.strategies.roles import (
    PUBLIC_SEARCH,
    SUBSAMPLED_FINAL,
    SUBSAMPLED_SEARCH,
    TrialRole,
)

if TYPE_CHECKING:
    import dp_accounting as dpa

    from raydp_synth.privacy.plan import PrivacyPlan
    from raydp_synth.tune.search_space import SearchSpace

__all__ = ["PUBLIC_SEARCH", "PlannedTrial", "SUBSAMPLED_FINAL", "SUBSAMPLED_SEARCH",
           "TRIAL_DRIVER_CPUS", "StudySettings"]

# PUBLIC_SEARCH, SUBSAMPLED_SEARCH, SUBSAMPLED_FINAL: the names of trial roles
# (raydp_synth.tune.strategies.roles), kept here for their importers; a trial reads
# its role (StudySettings.role), never a name. The option defaults and choices
# (TRIAL_LOOPS, ...) are raydp_synth.tune.defaults's, which the CLI's parser reads
# without loading this module.

#: CPUs of a trial's driver process beyond its loop's (a 1-worker trial runs its loop
#: itself and asks for the worker's share too: raydp_synth.tune.trial.trial_resources).
TRIAL_DRIVER_CPUS = 0.01


@dataclass(frozen=True)
class PlannedTrial:
    """A trial plan the driver computed before Ray started (the budget check,
    ``study.check_first_trial_affordable``), for the trial that would compute it again.

    Planning is a deterministic function of public inputs (the config, the budget,
    the study's settings, the grants so far), so a trial whose inputs are these gets
    this plan and skips seconds of calibration; any other trial plans as always.

    Attributes:
        inputs: the study's settings the plan was computed with
            (:meth:`StudySettings.plan_inputs`).
        config: the method's config the plan is for.
        granted: the ledger's granted events (``event_to_json``) it was sized against.
        plan: the plan, as ``roles.trial_plan`` returned it.
    """

    inputs: tuple[Any, ...]
    config: Any
    granted: tuple[dict[str, Any], ...]
    plan: PrivacyPlan


@dataclass(frozen=True, kw_only=True)
class StudySettings:
    """The study-wide settings of every trial.

    Everything here is public or curator-only, never secret: the request's settings,
    public facts of the data, the search space and the reference plan's event (public
    arithmetic). Random stopping's secrets (the trial count K, drawn by the
    accountant, and the sampler's seed, held by the sampler alone) never enter it: a
    trial learns whether it may run from the accountant's grant.

    Attributes:
        study_name: the study's name (its folder, and its accountant actor's name).
        study_dir: the study directory (absolute; trials write under ``trials/``).
        method: registered method name.
        data: public facts of the training split the study planned for.
        dataset: dataset spec, absolute paths (each trial loads it again).
        public: the effective public-data declaration (the user's ``--public`` or
            the method's documented default), or None.
        seed: the public seed (data split, initialisation; a restart draws its own
            initialisation, :meth:`trial_seed`).
        epsilon, delta: the total budget of the whole search.
        role: what the trials do differently under the study's search strategy
            (:class:`~raydp_synth.tune.strategies.roles.TrialRole`: how a plan is
            sized, whether it asks for a grant, ...); its name is :attr:`role_name`.
            The public search's (``--tune-on-public``) holds that data as
            ``dataset``, never the sensitive dataset.
        trials: N_max (compose) or the mean number of trials (random-stopping).
        reference_event: random stopping's reference plan E_ref, which every trial's
            plan must be dominated by; None under compose.
        space: the search space, fitted to ``data``.
        workers: Ray Train workers per trial.
        use_gpu: the workers train on GPUs.
        gpus_per_worker: GPUs each worker asks for with ``use_gpu``: one, or a
            fraction that packs 1-worker trials onto one GPU
            (:func:`~raydp_synth.runtime.resources.worker_gpu_share`).
        cpus_per_worker: CPUs each Ray Train worker asks for.
        score_share: budget fraction of each trial's private selection score (0 when
            it scores on public validation data).
        score_classifier: classifier trained on synthetic data for the score.
        public_validation: a dataset declared public to score on, or None.
        trial_loop: where a trial runs its loop
            (:data:`~raydp_synth.tune.defaults.TRIAL_LOOPS`).
        tune_fraction: ``--strategy subsampled``'s q (None otherwise).
        tuning_rdp: its tuning phase's RDP curve on ORDERS (public arithmetic of E_ref,
            the trial-count law and q), which the final run's plan composes with.
        planned: a compose trial's plan the driver already computed, or None.
        restarts: ``--default-share 1`` (every trial the default configuration): each
            trial draws its own public seed (:meth:`trial_seed`).
        compile_step: each trial's per-record gradients compiled (``--compile-step``).
    """

    study_name: str
    study_dir: Path
    method: str
    data: DataInfo
    dataset: DatasetSpec
    public: PublicDeclaration | None
    seed: int
    epsilon: float
    delta: float
    role: TrialRole
    trials: int
    reference_event: dpa.DpEvent | None
    space: SearchSpace
    workers: int
    use_gpu: bool
    gpus_per_worker: float = 1.0
    cpus_per_worker: float
    score_share: float
    score_classifier: str
    public_validation: DatasetSpec | None
    trial_loop: str = "auto"
    tune_fraction: float | None = None
    tuning_rdp: tuple[float, ...] | None = None
    planned: PlannedTrial | None = None
    restarts: bool = False
    compile_step: bool = False

    @property
    def role_name(self) -> str:
        """The trial role's name (what the trials' plans record as their inputs)."""
        return self.role.name

    @property
    def held_to_reference(self) -> bool:
        """Whether each trial is one of random stopping's K runs, its plan dominated by
        E_ref: random stopping and subsampled tuning's trials."""
        return self.role.held_to_reference

    def trial_seed(self) -> int:
        """The public seed of one trial's configuration: its initial weights and the
        latent draws of its training. The data split, the selection score's classifier
        and the release's synthetic samples use :attr:`seed`.

        :attr:`seed` for every trial, except in a restarts study, whose trials are all
        the default configuration: there each trial draws its own seed from OS
        entropy, so that the restarts differ in their initialisation as well as in
        their secret DP draws (with one shared initialisation, a seed that trains
        poorly makes every restart poor: bench/results/strategies/NOTES.md, section 4.3).

        Privacy: each draw depends neither on the data, nor on any other trial, nor on
        the secret DP seed (drawn separately), so the trials stay i.i.d. runs of one
        randomised mechanism, which is what random stopping's pricing needs. The
        released trial's seed is part of that trial's output, like its weights: being
        the selected one, it depends on the data and on K as they do, and the
        repeat-and-select theorem covers it as it covers them.
        """
        return secrets.randbelow(2**31) if self.restarts else self.seed

    def plan_inputs(self) -> tuple[Any, ...]:
        """What a compose trial's plan depends on besides its config and the grants."""
        return (self.role_name, self.epsilon, self.delta, self.trials, self.score_share,
                self.data)

    def __post_init__(self) -> None:
        if self.trial_loop not in TRIAL_LOOPS:
            raise ValueError(f"trial_loop={self.trial_loop!r} must be one of {TRIAL_LOOPS}")
        if not 0 < self.gpus_per_worker <= 1:
            raise ValueError(f"gpus_per_worker={self.gpus_per_worker} must be in (0, 1]: a "
                             "worker trains on one GPU or a share of one")
        if not self.study_dir.is_absolute():
            raise ValueError(f"study_dir={self.study_dir} must be absolute (trials run elsewhere)")
        if not isinstance(self.role, TrialRole):
            raise ValueError(f"role={self.role!r} must be a TrialRole "
                             "(raydp_synth.tune.strategies)")
        dominated = self.held_to_reference
        if (self.reference_event is not None) != dominated and (
                not self.role.tuning_curve or dominated):
            raise ValueError(
                f"role={self.role_name!r} needs a reference event exactly under "
                "random-stopping (and subsampled tuning's trials)"
            )
        if self.role.tuning_curve != (self.tune_fraction is not None
                                      and self.tuning_rdp is not None):
            raise ValueError(f"role={self.role_name!r} needs a tuning fraction and curve "
                             "exactly under subsampled tuning")
