"""The search strategy's contract, and what a strategy reads of a study's request.

A :class:`SearchStrategy` is how a study searches and what its accountant prices:
it refuses the request options it cannot run, prepares its reference plan before
Ray starts, asks the accountant for its pricing, checks that the first trial is
affordable, says how Tune samples and resumes, and runs its phases. Its pricing is
the accountant's own table's (:mod:`raydp_synth.accountant.strategies`), named by
:attr:`SearchStrategy.pricing`.

A strategy hands its trials a :class:`~raydp_synth.tune.strategies.roles.TrialRole`
(how a plan is sized, whether the trial asks for a grant, which records it reads):
the study's :class:`~raydp_synth.tune.study_settings.StudySettings` carries it to
every trial, so a trial never looks its strategy up by name.

A strategy reads the request through :class:`StudyOptions` (the study's
:class:`~raydp_synth.tune.study.StudyRequest` is one), so that the request, which
validates itself with its strategy, and the strategies import no module of each
other's.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from raydp_synth.accountant.core import StudySettings as AccountantSettings
from raydp_synth.errors import ConfigError
from raydp_synth.privacy.events import event_to_json
from raydp_synth.tune.strategies.roles import TrialRole

if TYPE_CHECKING:
    from raydp_synth.data import DatasetSplits
    from raydp_synth.data.public import PublicDeclaration
    from raydp_synth.data.spec import DatasetSpec
    from raydp_synth.tune.prepared_study import PreparedStudy
    from raydp_synth.tune.study_settings import StudySettings

__all__ = ["FirstTrial", "Phases", "SearchStrategy", "StudyOptions"]

#: What a strategy's phases give the release: the ``statement`` and ``run`` extras
#: of privacy.json and run.json (or None), and Tune's ``ResultGrid`` of the search.
Phases = Callable[[], tuple[dict[str, Any] | None, Any]]


class StudyOptions(Protocol):
    """What a strategy and the study's steps read of a study's request (read-only;
    :class:`~raydp_synth.tune.study.StudyRequest` has the meanings)."""

    @property
    def method(self) -> str: ...
    @property
    def epsilon(self) -> float: ...
    @property
    def delta(self) -> float: ...
    @property
    def trials(self) -> int: ...
    @property
    def strategy(self) -> str: ...
    @property
    def distribution(self) -> str: ...
    @property
    def sampler(self) -> str: ...
    @property
    def hypo_c(self) -> float: ...
    @property
    def default_share(self) -> float | None: ...
    @property
    def search_space(self) -> Path | None: ...
    @property
    def settings(self) -> Mapping[str, Any]: ...
    @property
    def max_concurrent(self) -> int: ...
    @property
    def dataset(self) -> DatasetSpec: ...
    @property
    def storage(self) -> Path: ...
    @property
    def name(self) -> str | None: ...
    @property
    def resume(self) -> bool: ...
    @property
    def seed(self) -> int: ...
    @property
    def score_share(self) -> float: ...
    @property
    def public(self) -> PublicDeclaration | None: ...
    @property
    def public_validation(self) -> DatasetSpec | None: ...
    @property
    def evaluate(self) -> bool: ...
    @property
    def synthetic_samples(self) -> int: ...
    @property
    def fid_weights(self) -> Path | None: ...
    @property
    def tune_on_public(self) -> DatasetSpec | None: ...
    @property
    def tune_fraction(self) -> float: ...
    @property
    def tune_share(self) -> float: ...
    @property
    def restarts(self) -> bool: ...
    @property
    def density_ratio(self) -> float: ...
    @property
    def failures_are_runs(self) -> bool: ...
    @property
    def search_strategy(self) -> SearchStrategy: ...
    def gpus_per_worker(self) -> float: ...


@dataclass(frozen=True)
class FirstTrial:
    """The trial whose plan the study checks before Ray starts.

    Attributes:
        role: the role it runs in; trials: the study's trial count it plans with;
        granted: the ledger's grants (``event_to_json``) it is sized against;
        phrase: what it is, for the refusal ("one of 3 trials (compose)").
    """

    role: TrialRole
    trials: int
    phrase: str
    granted: tuple[dict[str, Any], ...] = field(default=())


class SearchStrategy(ABC):
    """How a study searches and prices its search (one instance per kind, in
    :data:`~raydp_synth.tune.strategies.registry.STRATEGIES`).

    Contract:

    * Stateless: one shared instance serves every study; everything per study is
      in the request and the prepared study.
    * Refusals come before Ray starts and before anything is written, as one-line
      :class:`~raydp_synth.errors.ConfigError` (or ``BudgetExhausted``) naming the
      flag and the fix: :meth:`check_request` (options), :meth:`prepare` (plans).
    * :meth:`accountant_settings` are exactly what the accountant prices and the
      ledger header holds: never change them for an existing strategy.
    * Secrets (K, the sampler's seed, a tuning subset) stay in the accountant, the
      sampler, memory or Ray's object store: never in the settings, logs or files.

    Attributes:
        name: the strategy's name (the table's key; ``--strategy NAME`` where
            :attr:`selects` is ``"strategy"``).
        pricing: the accountant's pricing mode (its table's key, the ledger's mode).
        role: the trial role of the study's own settings.
        samplers: the samplers it may run (the first is not implied a default).
        default_sampler: the CLI's sampler when ``--sampler`` is not given.
        selects: the request field that chooses it: ``"strategy"`` (its value is
            :attr:`name`) or ``"tune_on_public"`` (a dataset declared public).
        resumable: ``--resume`` may continue its studies.
        uses_reference: its accountant prices against a reference plan E_ref.
        takes_default_share: ``--default-share`` mixes the default config into its
            samplers' fixed prior.
        secret_sampler_seed: its sampler's seed is drawn from OS entropy (the
            trials must be i.i.d. draws nobody can replay), not ``--seed``.
        runs_default_first: the search runs the method's default config first.
        hides_trial_count: how many trials ran is secret (never in a message).
        trials_are: how ``--trials`` bounds the trials ("at most", "mean").
        release_scope: what the released statement covers.
        releases_after_all_draws: nothing is released before every draw is decided
            (the theorem covers the best of exactly K trials).
    """

    name: ClassVar[str]
    pricing: ClassVar[str]
    role: ClassVar[TrialRole]
    samplers: ClassVar[tuple[str, ...]]
    default_sampler: ClassVar[str]
    selects: ClassVar[str] = "strategy"
    resumable: ClassVar[bool] = False
    uses_reference: ClassVar[bool] = False
    takes_default_share: ClassVar[bool] = False
    secret_sampler_seed: ClassVar[bool] = True
    runs_default_first: ClassVar[bool] = False
    hides_trial_count: ClassVar[bool] = True
    trials_are: ClassVar[str] = "mean"
    release_scope: ClassVar[str] = "the whole search"
    releases_after_all_draws: ClassVar[bool] = False

    def __repr__(self) -> str:
        return f"<search strategy {self.name}>"

    # -- the request, before anything loads ---------------------------------------

    def check_request(self, request: StudyOptions) -> None:
        """Refuse the request's options this strategy cannot run (the default: a
        sampler outside :attr:`samplers`, ``--resume`` unless :attr:`resumable`).

        Raises:
            ConfigError: one line naming the flag and the fix.
        """
        if request.sampler not in self.samplers:
            raise ConfigError(self.sampler_refusal(request.sampler))
        if request.resume and not self.resumable:
            raise ConfigError(f"--strategy {self.name} cannot --resume; start a new study "
                              "with another --name (the unfinished study's grants stay spent)")

    def sampler_refusal(self, sampler: str) -> str:
        """Why ``sampler`` cannot run under this strategy, with the fix."""
        return (f"--strategy {self.name} runs --sampler {' or '.join(self.samplers)}, "
                f"not {sampler}")

    def restarts_refusal(self) -> str | None:
        """Why ``--default-share 1`` (restarts of the default only) makes no sense
        here, or None where it does."""
        return None

    def check_resumed(self, request: StudyOptions, study_dir: Path) -> None:
        """On ``--resume`` of the study in ``study_dir``: refuse changed settings
        that this strategy needs kept (its study.json holds the request it was
        started with). The default keeps none."""
        return None

    # -- before Ray: plans ---------------------------------------------------------

    def prepare(self, request: StudyOptions, prepared: PreparedStudy, *,
                splits: DatasetSplits, shape: float) -> PreparedStudy:
        """``prepared`` with this strategy's reference plan (and whatever else it
        settles before Ray starts, from public facts); ``shape``: the trial-count
        law's. The default: none.

        Raises:
            ConfigError, BudgetExhausted: the budget cannot pay for the search.
        """
        return prepared

    def first_trial(self, request: StudyOptions, prepared: PreparedStudy) -> FirstTrial | None:
        """The trial whose plan the study checks before Ray starts
        (:func:`~raydp_synth.tune.affordability.check_first_trial_affordable`), or
        None where :meth:`prepare` checked the budget (or no trial is left)."""
        return None

    def trial_phrase(self, trials: int) -> str:
        """What ``trials`` are, for a refusal ("a mean of 3 trials (...)")."""
        return f"a mean of {trials} trials ({self.name})"

    def priced_trials(self, request: StudyOptions) -> int:
        """The accountant's trial count (N_max, or K's mean)."""
        return request.trials

    def tune_fraction(self, request: StudyOptions) -> float | None:
        """The accountant's tuning fraction q (subsampled tuning's), or None."""
        return None

    def accountant_settings(self, request: StudyOptions,
                            prepared: PreparedStudy) -> AccountantSettings:
        """What the study's accountant prices with (validated by the accountant's own
        settings class; the ledger header records them)."""
        reference = prepared.reference
        return AccountantSettings(
            epsilon=request.epsilon, delta=request.delta, mode=self.pricing,
            trials=self.priced_trials(request), distribution=request.distribution,
            reference_event=event_to_json(reference.event()) if reference is not None else None,
            density_ratio=request.density_ratio, tune_fraction=self.tune_fraction(request),
        )

    # -- on Ray: the phases --------------------------------------------------------

    def describe(self, request: StudyOptions, prepared: PreparedStudy) -> str:
        """The study's first log line."""
        return (f"study {prepared.name}: {prepared.method.name} on {request.dataset}, "
                f"epsilon={request.epsilon:g} delta={request.delta:g} for the whole search "
                f"({request.strategy}, {self.trials_are} {request.trials} "
                f"{'restarts of the default config' if request.restarts else 'trials'})")

    def num_samples(self, request: StudyOptions, accountant: Any) -> int:
        """Tune's ``num_samples`` of a new experiment: -1, no cap (the searcher
        finishes when the accountant draws no more: random stopping's exactly K)."""
        return -1

    def resumed_tuner(self, request: StudyOptions, latest: Path | None, trainable: Any,
                      accountant: Any) -> Any:
        """On ``--resume``: the Tune experiment that continues the search, or None
        for a new one (:func:`~raydp_synth.tune.tuner.study_tuner`)."""
        return None

    @abstractmethod
    def phases(self, request: StudyOptions, prepared: PreparedStudy,
               settings: StudySettings, accountant: Any) -> Phases:
        """The search's phases, built now (a resumed experiment is restored before the
        study's first line is logged) and run once it is
        (:func:`~raydp_synth.tune.tuner.one_experiment`: one Tune experiment of the
        study's trials)."""
