"""One study: a hyperparameter search under one privacy budget, and its release.

Layout of the study directory (owner-only; docs/architecture.md, section 6)::

    STUDY/ledger.jsonl     the accountant's durable ledger (curator-only)
    STUDY/study.json       the request, the search space, the reference plan
    STUDY/tune/            Ray Tune's experiment (trial results, checkpoints)
    STUDY/optuna.journal   Optuna's studies (one per Tune experiment): what the
                           searcher was told (:mod:`raydp_synth.tune.optuna_journal`)
    STUDY/trials/ID/       each trial's Ray Train run
    STUDY/release/         the best trial's generator, with the privacy statement
                           of the WHOLE search (computed by the accountant)
    STUDY/run.json, score.json, evaluation.json, privacy_utility.png
                           the curator's view of the released trial

The search itself is post-processing of DP outputs: Optuna only sees the trials'
private selection scores (DP releases in their plans), and the accountant prices
every grant (docs/budget-pricing.md, section 6).
"""

from __future__ import annotations

import json
import logging
import math
import os
import shlex
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raydp_synth.accountant import get_or_create_accountant
from raydp_synth.data.public import whole_public_dataset
from raydp_synth.data.spec import DatasetSpec
from raydp_synth.errors import ConfigError, Interrupted, LedgerError
from raydp_synth.paths import require_writable_folder
from raydp_synth.privacy.accounting import parse_distribution, validate_budget
from raydp_synth.runtime.ray_session import ensure_ray
from raydp_synth.runtime.resources import (
    gpus_ray_can_place,
    largest_node_cpus,
    worker_cpu_share,
    worker_gpu_share,
)
from raydp_synth.runtime.shared_storage import require_shared_storage
from raydp_synth.train.request import RequestCore
from raydp_synth.tune.affordability import check_first_trial_affordable
from raydp_synth.tune.defaults import (
    DEFAULT_SHARE,
    DEFAULT_TRIALS,
    DEFAULT_TUNE_FRACTION,
    DEFAULT_TUNE_SHARE,
    SAMPLERS,
    TRIAL_LOOPS,
)
from raydp_synth.tune.optuna_searcher import first_points, optuna_search
from raydp_synth.tune.preparation import prepare
from raydp_synth.tune.prepared_study import PreparedStudy
from raydp_synth.tune.resume_checks import check_re_evaluate_request, request_json
from raydp_synth.tune.search_space.anchored import check_restarts, validate_default_share
from raydp_synth.tune.strategies.registry import get_strategy, requested_strategy
from raydp_synth.tune.study_release import no_release_message, re_evaluate, release_best
from raydp_synth.tune.study_settings import TRIAL_DRIVER_CPUS, PlannedTrial, StudySettings

_LOG = logging.getLogger(__name__)

if TYPE_CHECKING:
    from raydp_synth.tune.strategies.base import SearchStrategy

# check_first_trial_affordable, first_points, optuna_search and no_release_message
# live in their own modules; importers of this one keep finding them here.
__all__ = ["DEFAULT_SHARE", "TRIAL_DRIVER_CPUS", "StudyRequest", "StudyResult",
           "check_first_trial_affordable", "first_points", "no_release_message",
           "optuna_search", "request_json", "run_study"]

#: The samplers whose fixed prior ``--default-share`` puts the default's atom into.
_ANCHORED_SAMPLERS = ("random", "dp-hypo")


@dataclass(frozen=True, kw_only=True)
class StudyRequest(RequestCore):
    """A validated study request (the tune CLI's arguments): the shared fields of
    :class:`~raydp_synth.train.request.RequestCore` (method, budget, dataset, public
    data, score, release, device), and what a study adds.

    Attributes:
        epsilon, delta: the total budget of the whole search.
        trials: N_max (compose) or the mean number of trials (random-stopping).
        strategy: the search strategy's name (``--strategy``, alias ``--selection``:
            a name of :data:`~raydp_synth.tune.strategies.registry.STRATEGIES`; the
            request runs :attr:`search_strategy`). ``study.json`` records it under its
            former key ``"selection"`` (:func:`request_json`).
        distribution: random-stopping's trial-count law (poisson, geometric,
            logarithmic, tnb:ETA).
        sampler: Optuna sampler (``tpe`` adaptive, ``random`` non-adaptive, ``dp-hypo``
            adaptive within a density ratio ``hypo_c`` of a fixed prior: random
            stopping only, priced by DP-HyPO's bound).
        hypo_c: dp-hypo's density-ratio bound c >= 1 (``--hypo-c``).
        default_share: random stopping and subsampled with ``--sampler random``: the
            probability that a trial is the method's default configuration
            (``--default-share``), else a random draw of the space: one fixed prior
            (:mod:`raydp_synth.tune.search_space.anchored`); with ``--sampler
            dp-hypo``: the default's weight in the fixed prior that every proposal
            stays within a factor ``hypo_c`` of
            (:mod:`raydp_synth.tune.search_space.dp_hypo`); 0: the space alone; 1
            (random stopping with ``--sampler random`` only): restarts of the default.
            None (the default) becomes :data:`DEFAULT_SHARE` where it applies and 0
            elsewhere, so that a constructed request holds the share it runs with.
        search_space: YAML file (None: the method's packaged default,
            :meth:`~raydp_synth.methods.base.Method.search_space_file`).
        settings: method settings fixed in every trial (``--set KEY=VALUE``): each
            replaces the space's value and is no longer searched.
        max_concurrent: trials at once.
        workers_per_trial: Ray Train workers per trial.
        gpus_per_trial: the GPUs a trial's workers share (``--gpus-per-trial``; None:
            ``use_gpu`` decides): ``gpus_per_trial / workers_per_trial`` per worker, a
            fraction with one worker packs trials onto a GPU
            (:func:`~raydp_synth.runtime.resources.worker_gpu_share` has the rules);
            ignored, with a note, where Ray has no GPU.
        trial_loop: where a trial runs its loop (``--trial-loop``): ``auto`` (a
            1-worker trial in its own process, more on Ray Train) or ``ray-train``.
        storage: parent folder of study directories (shared storage on a cluster).
        name: study name (folder, accountant actor name).
        resume: continue an interrupted study (same ledger).
        seed: public seed (data split, initialisation; the sampler under compose:
            random stopping's sampler has a secret seed, see :func:`optuna_search`).
        evaluate: evaluate the released trial (curator-only) at the end.
        tune_on_public: a dataset declared public to search on at no privacy cost;
            the study then releases one private run of the best config with the whole
            budget (:mod:`raydp_synth.tune.public_search`); None: a private search.
            Given as text, it is parsed once, here (a whole dataset: no fraction).
        tune_fraction: ``--strategy subsampled``'s q, the Poisson fraction of the
            sensitive records the tuning phase runs on (``--tune-fraction``).
        tune_share: ``--strategy subsampled``: the tuning phase's own epsilon as a
            fraction of ``epsilon`` (``--tune-share``); the final run gets the rest
            (:mod:`raydp_synth.tune.subsampled_search`).
        re_evaluate: with ``resume``, rerun a finished study's evaluation only
            (``--re-evaluate``: no grant, no training, the release untouched;
            :mod:`raydp_synth.tune.resume_checks`).
    """

    trials: int = DEFAULT_TRIALS
    strategy: str = "compose"
    distribution: str = "poisson"
    sampler: str = "tpe"
    hypo_c: float = 1.0
    default_share: float | None = None
    search_space: Path | None = None
    max_concurrent: int = 1
    workers_per_trial: int = 1
    gpus_per_trial: float | None = None
    trial_loop: str = "auto"
    storage: Path = Path("studies")
    name: str | None = None
    resume: bool = False
    tune_on_public: DatasetSpec | None = None
    tune_fraction: float = DEFAULT_TUNE_FRACTION
    tune_share: float = DEFAULT_TUNE_SHARE
    re_evaluate: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.tune_on_public, str):
            object.__setattr__(self, "tune_on_public",
                               whole_public_dataset(self.tune_on_public, flag="--tune-on-public"))
        super().__post_init__()
        validate_budget(self.epsilon, self.delta)
        require_writable_folder(self.storage, "--storage")
        if self.trials < 1:
            raise ConfigError(f"--trials {self.trials} must be >= 1")
        selected = get_strategy(self.strategy)
        if self.sampler not in SAMPLERS:
            raise ConfigError(f"--sampler {self.sampler!r} must be one of {', '.join(SAMPLERS)}")
        selected.check_request(self)  # its own options; which samplers it runs
        if not (isinstance(self.hypo_c, (int, float)) and math.isfinite(self.hypo_c) and self.hypo_c >= 1):
            raise ConfigError(f"--hypo-c {self.hypo_c!r} must be a finite number >= 1 (e.g. 2)")
        if self.sampler == "dp-hypo" and math.isinf(parse_distribution(self.distribution)):
            raise ConfigError("--sampler dp-hypo: DP-HyPO's bound needs a truncated negative "
                              "binomial trial count: --distribution geometric, logarithmic or tnb:ETA")
        self._check_default_share()
        if self.max_concurrent < 1 or self.workers_per_trial < 1:
            raise ConfigError("--max-concurrent and --workers-per-trial must be >= 1")
        if self.trial_loop not in TRIAL_LOOPS:
            raise ConfigError(f"--trial-loop {self.trial_loop!r} must be one of {', '.join(TRIAL_LOOPS)}")
        self.gpus_per_worker()  # validates --gpus-per-trial against the workers, --use-gpu
        if self.search_strategy is not selected:  # chosen by another option (--tune-on-public)
            self.search_strategy.check_request(self)
        check_re_evaluate_request(self)
        if self.name is not None and (not self.name or "/" in self.name or self.name.startswith(".")):
            raise ConfigError(f"--name {self.name!r} must be a plain folder name")

    @property
    def search_strategy(self) -> SearchStrategy:
        """The search strategy the request runs
        (:func:`~raydp_synth.tune.strategies.registry.requested_strategy`)."""
        return requested_strategy(self)

    def _check_default_share(self) -> None:
        """``--default-share``: a probability, for the priors of the strategies that
        take one (random stopping's, subsampled tuning's: the random sampler's,
        dp-hypo's); unset, :data:`DEFAULT_SHARE` where one of them runs, else 0."""
        takes_share = self.search_strategy.takes_default_share
        if self.default_share is None:
            applies = takes_share and self.sampler in _ANCHORED_SAMPLERS
            object.__setattr__(self, "default_share", DEFAULT_SHARE if applies else 0.0)
            return
        validate_default_share(self.default_share)
        if self.default_share == 0:
            return
        if not takes_share:
            raise ConfigError("--default-share is random stopping's way to include the "
                              "default config; a compose search already runs it first: "
                              "drop --default-share, or add --strategy random-stopping")
        if self.sampler not in _ANCHORED_SAMPLERS:
            raise ConfigError(f"--default-share mixes the default config into a fixed prior "
                              f"(the random or dp-hypo sampler's); --sampler {self.sampler} "
                              "has none: use --sampler random or dp-hypo")
        check_restarts(self.default_share, refusal=self.search_strategy.restarts_refusal(),
                       sampler=self.sampler)

    @property
    def restarts(self) -> bool:
        """``--default-share 1``: every trial the default configuration (the request
        refuses it outside random stopping with the random sampler)."""
        return self.default_share == 1

    @property
    def density_ratio(self) -> float:
        """The accountant's density-ratio bound c: ``hypo_c`` under dp-hypo, else 1."""
        return float(self.hypo_c) if self.sampler == "dp-hypo" else 1.0

    @property
    def failures_are_runs(self) -> bool:
        """Whether a drawn trial that ends before it asks keeps its draw as a no-op run
        rather than giving it back (dp-hypo: a redraw after a failure that depends on
        the configuration could take the proposal beyond its density bound)."""
        return self.sampler == "dp-hypo"

    def gpus_per_worker(self) -> float:
        """The GPUs each Ray Train worker asks for (0: CPUs), before asking Ray."""
        return worker_gpu_share(gpus_per_trial=self.gpus_per_trial, use_gpu=self.use_gpu,
                                workers=self.workers_per_trial)


@dataclass(frozen=True)
class StudyResult:
    """What :func:`run_study` returns.

    Attributes:
        study_dir: the study directory (its release in ``study_dir / "release"``).
        statement: the release's privacy statement (``release/privacy.json``).
        best_trial, best_score: the released trial and its score.
        trials: every finished trial of the study (all sessions) and its score.
        result_grid: Ray Tune's ``ResultGrid`` of the search this call ran (the
            public search under ``--tune-on-public``); None when this call ran no
            search (a resumed study with no trial left). Curator-only, like
            ``STUDY/tune/``: it holds every trial's config, metrics and checkpoints.
    """

    study_dir: Path
    statement: dict[str, Any]
    best_trial: str | None
    best_score: float | None
    trials: list[dict[str, Any]]
    result_grid: Any = None


def _owner_only_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)


def run_study(request: StudyRequest) -> StudyResult:
    """Run (or resume) a study and write its release."""
    previous = os.umask(0o077)  # everything a study writes is owner-only
    try:
        return _run_study(request)
    finally:
        os.umask(previous)


def _run_study(request: StudyRequest) -> StudyResult:
    """The study's steps, in this order: everything public is settled and checked
    before Ray starts; the accountant exists before any trial; the searcher (and
    random stopping's secret sampler seed) is built last."""
    storage_given = request.storage  # as the user gave it: relative or not
    request = _with_absolute_paths(request)
    prepared = prepare(request)
    if request.re_evaluate:  # a finished study: its evaluation only, no Ray, no grant
        try:
            release = re_evaluate(request, prepared.study_dir)
        except KeyboardInterrupt:
            raise _interrupted(request, prepared.study_dir, prepared.name) from None
        return StudyResult(study_dir=prepared.study_dir, statement=release.statement,
                           best_trial=release.best_trial, best_score=release.best_score,
                           trials=release.trials)
    planned = check_first_trial_affordable(request, prepared)
    import ray

    total_cpus = ensure_ray()
    require_shared_storage(storage_given, ray.nodes())  # before the study writes anything
    gpus_per_worker, note = gpus_ray_can_place(
        gpus_per_worker=request.gpus_per_worker(), workers=request.workers_per_trial,
        optional=request.gpus_per_trial is not None and not request.use_gpu,
        cluster_gpus=ray.cluster_resources().get("GPU", 0))
    if note is not None:
        _LOG.info(f"note: {note}")
    try:
        return _run_phases(request, prepared, planned, total_cpus=total_cpus,
                           gpus_per_worker=gpus_per_worker)
    except KeyboardInterrupt:
        raise _interrupted(request, prepared.study_dir, prepared.name) from None


def _interrupted(request: StudyRequest, study_dir: Path, name: str) -> Interrupted:
    """What an interrupted study kept and how to go on: before its release, nothing
    is released (its trials' grants stay charged in the ledger) and ``--resume``
    continues it (the CLI writes the exact command, from its own arguments); after,
    the release stays and its evaluation can be rerun."""
    if (study_dir / "release" / "privacy.json").is_file():
        return Interrupted(f"the release in {study_dir / 'release'} stands; rerun its "
                           f"evaluation with: python -m raydp_synth.evaluate "
                           f"{shlex.quote(str(study_dir))}")
    return Interrupted(f"nothing released; resume with --resume --name {shlex.quote(name)} "
                       f"--storage {shlex.quote(str(request.storage))}",
                       resume_name=name, resume_storage=request.storage)


def _run_phases(request: StudyRequest, prepared: PreparedStudy, planned: Any, *,
                total_cpus: float, gpus_per_worker: float) -> StudyResult:
    """The accountant, then the strategy's phases, the release and its evaluation."""
    import ray

    strategy = request.search_strategy
    accountant = _start_accountant(request, prepared)
    settings = _study_settings(request, prepared, total_cpus=total_cpus,
                               gpus_per_worker=gpus_per_worker, planned=planned)
    phases = strategy.phases(request, prepared, settings, accountant)
    _LOG.info(strategy.describe(request, prepared))
    extra, grid = phases()
    ledger_error = ray.get(accountant.status.remote())["ledger_error"]
    if ledger_error is not None:  # the accountant failed closed; the study is interrupted
        raise LedgerError(f"study {prepared.name} stopped: {ledger_error}")
    release = release_best(request, prepared.study_dir, accountant, prepared.name, extra=extra,
                           default=prepared.default, space=prepared.space)
    # The study is over: its detached accountant goes (a --resume rebuilds it from
    # the ledger). An interrupted study keeps it, for the resume.
    ray.kill(accountant, no_restart=True)
    return StudyResult(study_dir=prepared.study_dir, statement=release.statement,
                       best_trial=release.best_trial, best_score=release.best_score,
                       trials=release.trials, result_grid=grid)


def _with_absolute_paths(request: StudyRequest) -> StudyRequest:
    """Trials run in Ray workers, not in the user's working directory."""
    request = request.with_absolute_paths()
    if request.search_space is not None:
        request = replace(request, search_space=Path(request.search_space).expanduser().resolve())
    if request.tune_on_public is not None:
        request = replace(request, tune_on_public=request.tune_on_public.absolute())
    return request


def _start_accountant(request: StudyRequest, prepared: PreparedStudy) -> Any:
    """The study's accountant actor (created, or rebuilt from the ledger) with the
    strategy's pricing settings, checked against the ledger's; a new study also
    writes ``study.json``."""
    import ray

    study_dir, reference = prepared.study_dir, prepared.reference
    _owner_only_dir(study_dir)
    pricing = request.search_strategy.accountant_settings(request, prepared)
    accountant = get_or_create_accountant(
        str(study_dir), prepared.name, **{f.name: getattr(pricing, f.name) for f in fields(pricing)})
    ray.get(accountant.status.remote())  # surfaces a ledger/settings mismatch now
    if not request.resume:
        (study_dir / "study.json").write_text(json.dumps({
            "request": request_json(request),
            "data_info": prepared.data.__dict__, "search_space": str(prepared.space.path),
            "public": None if prepared.public is None else str(prepared.public),
            "reference_plan": reference.to_dict() if reference is not None else None,
        }, indent=2))
    return accountant


def _study_settings(request: StudyRequest, prepared: PreparedStudy, *,
                    total_cpus: float, gpus_per_worker: float,
                    planned: PlannedTrial | None = None) -> StudySettings:
    """What every trial reads from the study (built once, shared by every trial);
    ``gpus_per_worker`` is what Ray can place (0: the trials train on CPUs);
    ``planned``: the budget check's plan (:class:`PlannedTrial`)."""
    cpus_per_worker = worker_cpu_share(total_cpus=total_cpus, largest_node=largest_node_cpus(),
                                       workers=request.workers_per_trial,
                                       concurrent=request.max_concurrent,
                                       driver_cpus=TRIAL_DRIVER_CPUS)
    reference = prepared.reference
    return StudySettings(
        study_name=prepared.name, study_dir=prepared.study_dir, method=prepared.method.name,
        data=prepared.data, dataset=request.dataset, public=prepared.public, seed=request.seed,
        epsilon=request.epsilon, delta=request.delta, role=request.search_strategy.role,
        trials=request.trials,
        reference_event=reference.event() if reference is not None else None,
        space=prepared.space, workers=request.workers_per_trial, use_gpu=gpus_per_worker > 0,
        gpus_per_worker=gpus_per_worker or 1.0, cpus_per_worker=cpus_per_worker,
        score_share=prepared.score_share,
        score_classifier=request.score_classifier, public_validation=request.public_validation,
        trial_loop=request.trial_loop, compile_step=request.compile_step,
        tune_fraction=request.tune_fraction if prepared.tuning_rdp is not None else None,
        tuning_rdp=prepared.tuning_rdp, planned=planned,
        restarts=request.restarts,
    )

