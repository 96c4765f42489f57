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
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raydp_synth.errors import BudgetExhausted, ConfigError, Interrupted, LedgerError
from raydp_synth.evaluation.selection import DEFAULT_SCORE_CLASSIFIER
from raydp_synth.paths import require_writable_folder
from raydp_synth.privacy.secret_rng import secret_seed_words
from raydp_synth.privacy.selection_score import DEFAULT_SCORE_SHARE
from raydp_synth.release.bundle import DEFAULT_SYNTHETIC_SAMPLES
from raydp_synth.tune.study_settings import (
    DEFAULT_SHARE,
    DEFAULT_TRIALS,
    TRIAL_LOOPS,
    PlannedTrial,
    StudySettings,
)
from raydp_synth.tune.subsampled_search import DEFAULT_TUNE_FRACTION, DEFAULT_TUNE_SHARE

_LOG = logging.getLogger(__name__)

if TYPE_CHECKING:
    from raydp_synth.data import DataInfo
    from raydp_synth.methods.base import Method
    from raydp_synth.privacy.plan import PrivacyPlan
    from raydp_synth.tune.search_space import SearchSpace

__all__ = ["SELECTIONS", "StudyRequest", "StudyResult", "check_first_trial_affordable",
           "first_points", "no_release_message", "optuna_search", "request_json", "run_study"]

#: CPUs of a trial's driver process beyond its loop's (a 1-worker trial runs its loop
#: itself and asks for the worker's share too: raydp_synth.tune.trial.trial_resources).
TRIAL_DRIVER_CPUS = 0.01

SELECTIONS = ("compose", "random-stopping", "subsampled")
SAMPLERS = ("tpe", "random", "dp-hypo")
#: The samplers whose fixed prior ``--default-share`` puts the default's atom into.
_ANCHORED_SAMPLERS = ("random", "dp-hypo")


@dataclass(frozen=True, kw_only=True)
class StudyRequest:
    """A validated study request (the tune CLI's arguments).

    Attributes:
        method: registered method name.
        epsilon, delta: the total budget of the whole search.
        trials: N_max (compose) or the mean number of trials (random-stopping).
        selection: how the search is priced (``compose`` | ``random-stopping``).
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
        use_gpu: one whole GPU per worker.
        gpus_per_trial: the GPUs a trial's workers share (``--gpus-per-trial``; None:
            ``use_gpu`` decides): ``gpus_per_trial / workers_per_trial`` per worker, a
            fraction with one worker packs trials onto a GPU
            (:func:`~raydp_synth.runtime.resources.worker_gpu_share` has the rules);
            ignored, with a note, where Ray has no GPU.
        trial_loop: where a trial runs its loop (``--trial-loop``): ``auto`` (a
            1-worker trial in its own process, more on Ray Train) or ``ray-train``.
        dataset: dataset spec.
        storage: parent folder of study directories (shared storage on a cluster).
        name: study name (folder, accountant actor name).
        resume: continue an interrupted study (same ledger).
        seed: public seed (data split, initialisation; the sampler under compose:
            random stopping's sampler has a secret seed, see :func:`optuna_search`).
        public: data declared public, used without noise by the method (see
            :mod:`raydp_synth.data.public`); not covered by the guarantee.
        score_share, score_classifier, public_validation: the selection score.
        evaluate: evaluate the released trial (curator-only) at the end.
        synthetic_samples: rows of ``release/synthetic.parquet`` (a user choice, not n).
        fid_weights: the FID Inception-v3 weights of the evaluation (None: the
            torch hub cache's, if there).
        tune_on_public: a dataset declared public to search on at no privacy cost;
            the study then releases one private run of the best config with the whole
            budget (:mod:`raydp_synth.tune.public_search`); None: a private search.
        tune_fraction: ``--selection subsampled``'s q, the Poisson fraction of the
            sensitive records the tuning phase runs on (``--tune-fraction``).
        tune_share: ``--selection subsampled``: the tuning phase's own epsilon as a
            fraction of ``epsilon`` (``--tune-share``); the final run gets the rest
            (:mod:`raydp_synth.tune.subsampled_search`).
        compile_step: each trial's per-record gradients compiled (``--compile-step``).
    """

    method: str
    epsilon: float
    delta: float
    trials: int = DEFAULT_TRIALS
    selection: str = "compose"
    distribution: str = "poisson"
    sampler: str = "tpe"
    hypo_c: float = 1.0
    default_share: float | None = None
    search_space: Path | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    max_concurrent: int = 1
    workers_per_trial: int = 1
    use_gpu: bool = False
    gpus_per_trial: float | None = None
    trial_loop: str = "auto"
    dataset: str = "digits"
    storage: Path = Path("studies")
    name: str | None = None
    resume: bool = False
    seed: int = 0
    score_share: float = DEFAULT_SCORE_SHARE
    score_classifier: str = DEFAULT_SCORE_CLASSIFIER
    public: str | None = None
    public_validation: str | None = None
    evaluate: bool = True
    synthetic_samples: int = DEFAULT_SYNTHETIC_SAMPLES
    fid_weights: Path | None = None
    tune_on_public: str | None = None
    tune_fraction: float = DEFAULT_TUNE_FRACTION
    tune_share: float = DEFAULT_TUNE_SHARE
    compile_step: bool = False

    def __post_init__(self) -> None:
        from raydp_synth.evaluation.selection import validate_score_settings
        from raydp_synth.privacy.accounting import parse_distribution, validate_budget
        from raydp_synth.release.bundle import validate_synthetic_samples

        validate_synthetic_samples(self.synthetic_samples)
        if self.fid_weights is not None:
            from raydp_synth.evaluation.inception import resolve_weights

            resolve_weights(self.fid_weights)

        validate_budget(self.epsilon, self.delta)
        require_writable_folder(self.storage, "--storage")
        if self.trials < 1:
            raise ConfigError(f"--trials {self.trials} must be >= 1")
        if self.selection not in SELECTIONS:
            raise ConfigError(f"--selection {self.selection!r} must be one of {', '.join(SELECTIONS)}")
        if self.sampler not in SAMPLERS:
            raise ConfigError(f"--sampler {self.sampler!r} must be one of {', '.join(SAMPLERS)}")
        if self.selection == "subsampled":
            self._check_subsampled()
        if self.selection == "random-stopping" and self.sampler not in ("random", "dp-hypo"):
            raise ConfigError(
                f"--selection random-stopping needs i.i.d. trials, but --sampler {self.sampler} "
                "adapts to earlier scores without a bound; use --sampler random or dp-hypo, or "
                "--selection compose (valid for every sampler)"
            )
        if self.sampler == "dp-hypo" and self.selection != "random-stopping":
            raise ConfigError("--sampler dp-hypo is priced by DP-HyPO's random-stopping bound: "
                              "add --selection random-stopping (and --distribution geometric)")
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
        validate_score_settings(self.score_share, self.score_classifier)
        if self.public is not None:
            from raydp_synth.data import parse_public_spec

            parse_public_spec(self.public)
        if self.public_validation is not None:
            from raydp_synth.data.public import check_public_validation

            check_public_validation(self.public_validation, dataset=self.dataset)
        if self.tune_on_public is not None:
            from raydp_synth.tune.public_search import check_tune_on_public

            check_tune_on_public(self.tune_on_public, dataset=self.dataset,
                                 selection=self.selection, resume=self.resume)
        if self.name is not None and (not self.name or "/" in self.name or self.name.startswith(".")):
            raise ConfigError(f"--name {self.name!r} must be a plain folder name")

    def _check_default_share(self) -> None:
        """``--default-share``: a probability, for random stopping's and subsampled
        tuning's priors (the random sampler's, dp-hypo's); unset,
        :data:`DEFAULT_SHARE` where one of them runs, else 0."""
        from raydp_synth.tune.search_space.anchored import (
            check_restarts,
            validate_default_share,
        )

        if self.default_share is None:
            applies = (self.selection in ("random-stopping", "subsampled")
                       and self.sampler in _ANCHORED_SAMPLERS and self.tune_on_public is None)
            object.__setattr__(self, "default_share", DEFAULT_SHARE if applies else 0.0)
            return
        validate_default_share(self.default_share)
        if self.default_share == 0:
            return
        if self.selection == "compose" or self.tune_on_public is not None:
            raise ConfigError("--default-share is random stopping's way to include the "
                              "default config; a compose search already runs it first: "
                              "drop --default-share, or add --selection random-stopping")
        if self.sampler not in _ANCHORED_SAMPLERS:
            raise ConfigError(f"--default-share mixes the default config into a fixed prior "
                              f"(the random or dp-hypo sampler's); --sampler {self.sampler} "
                              "has none: use --sampler random or dp-hypo")
        check_restarts(self.default_share, selection=self.selection, sampler=self.sampler)

    def _check_subsampled(self) -> None:
        """``--selection subsampled``'s own refusals (one line each, with the fix)."""
        from raydp_synth.tune.subsampled_search import check_tune_fraction, check_tune_share

        check_tune_fraction(self.tune_fraction)
        check_tune_share(self.tune_share)
        if self.tune_on_public is not None:
            raise ConfigError("--selection subsampled tunes on a private subset; "
                              "--tune-on-public tunes on public data: choose one")
        if self.resume:
            raise ConfigError("--selection subsampled cannot --resume (its secret tuning "
                              "subset is not kept); start a new study with another --name "
                              "(the unfinished study's grants stay spent)")
        if self.sampler != "random":
            raise ConfigError(f"--selection subsampled needs i.i.d. tuning trials, but --sampler "
                              f"{self.sampler} adapts (dp-hypo's density-ratio bound is not "
                              "priced with subsampling); use --sampler random")

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
        from raydp_synth.runtime.resources import worker_gpu_share

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
    prepared = _prepare(request)
    planned = check_first_trial_affordable(request, prepared)
    import ray

    from raydp_synth.runtime.ray_session import ensure_ray
    from raydp_synth.runtime.resources import gpus_ray_can_place
    from raydp_synth.runtime.shared_storage import require_shared_storage

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


def _run_phases(request: StudyRequest, prepared: _PreparedStudy, planned: Any, *,
                total_cpus: float, gpus_per_worker: float) -> StudyResult:
    """The accountant, then the search's phases, the release and its evaluation."""
    import ray

    accountant = _start_accountant(request, prepared)
    settings = _study_settings(request, prepared, total_cpus=total_cpus,
                               gpus_per_worker=gpus_per_worker, planned=planned)
    subsampled = request.selection == "subsampled"
    tuner = None if prepared.public_search or subsampled else _tuner(
        request, prepared, settings, accountant)
    _LOG.info(f"study {prepared.name}: {prepared.method.name} on {request.dataset}, "
          f"epsilon={request.epsilon:g} delta={request.delta:g} for the whole search "
          f"({request.selection}, "
          f"{'mean ' if request.selection != 'compose' else 'at most '}{request.trials} "
          f"{'restarts of the default config' if request.restarts else 'trials'})"
          if prepared.public_search is None else
          f"study {prepared.name}: {prepared.method.name}, {request.trials} trials "
          f"on the public {request.tune_on_public}, then one run on {request.dataset} at "
          f"epsilon={request.epsilon:g} delta={request.delta:g}")
    extra = None
    grid = None
    if prepared.public_search is not None:
        from raydp_synth.tune.optuna_journal import journal_storage, new_study_name
        from raydp_synth.tune.public_search import PUBLIC_EXPERIMENT, search_then_final_run

        search = prepared.public_search
        storage = journal_storage(prepared.study_dir, create=True)
        extra = search_then_final_run(
            request, settings, search, accountant, driver_cpus=TRIAL_DRIVER_CPUS,
            searcher=optuna_search(request, search.space, search.default, storage=storage,
                                   study_name=new_study_name(storage, PUBLIC_EXPERIMENT)))
        grid = extra.pop("result_grid", None)
    elif subsampled:
        from raydp_synth.tune import subsampled_search

        # X1: secret (OS entropy), held in memory and Ray's object store only.
        extra = subsampled_search.search_then_final_run(
            request, settings,
            subsampled_search.secret_tuning_subset(prepared.data.num_records, prepared.num_val,
                                                   request.tune_fraction),
            accountant, driver_cpus=TRIAL_DRIVER_CPUS,
            searcher=optuna_search(request, prepared.space, prepared.default))
        grid = extra.pop("result_grid", None)
    elif tuner is not None:
        grid = tuner.fit()
    ledger_error = ray.get(accountant.status.remote())["ledger_error"]
    if ledger_error is not None:  # the accountant failed closed; the study is interrupted
        raise LedgerError(f"study {prepared.name} stopped: {ledger_error}")
    result = _release_best(request, prepared.study_dir, accountant, prepared.name, extra=extra,
                           result_grid=grid)
    # The study is over: its detached accountant goes (a --resume rebuilds it from
    # the ledger). An interrupted study keeps it, for the resume.
    ray.kill(accountant, no_restart=True)
    return result


@dataclass(frozen=True, kw_only=True)
class _PreparedStudy:
    """What the driver settles before Ray starts, from the request and public facts.

    Attributes:
        name: the study's name; study_dir: its directory (absolute).
        method: the method tuned.
        data: public facts of the training split.
        public: the effective public-data declaration, or None.
        space: the search space, fitted to ``data``.
        default: the method's default config with the space's fixed values: random
            stopping's reference plan, and compose's first trial.
        reference: random stopping's reference plan E_ref; None under compose.
        score_share: the selection score's budget fraction (0: public validation).
        public_search: ``--tune-on-public``'s public facts, or None.
        tuning_rdp: ``--selection subsampled``'s tuning-phase RDP curve (from
            ``reference``, public arithmetic), or None.
        num_val: the validation split's size (the tuning subset is drawn from it too).
    """

    name: str
    study_dir: Path
    method: Method
    data: DataInfo
    public: str | None
    space: SearchSpace
    default: Any
    reference: PrivacyPlan | None
    score_share: float
    public_search: Any = None
    tuning_rdp: tuple[float, ...] | None = None
    num_val: int = 0


def _with_absolute_paths(request: StudyRequest) -> StudyRequest:
    """Trials run in Ray workers, not in the user's working directory."""
    from raydp_synth.train.driver import with_absolute_paths

    request = with_absolute_paths(request)
    if request.search_space is not None:
        request = replace(request, search_space=Path(request.search_space).expanduser().resolve())
    if request.tune_on_public is not None:
        from raydp_synth.data.spec import absolute_spec

        request = replace(request, tune_on_public=absolute_spec(request.tune_on_public))
    return request


def _prepare(request: StudyRequest) -> _PreparedStudy:
    """Load the data's public facts and the search space, check the study directory
    and the public validation data, and price random stopping's reference plan."""
    from raydp_synth.data import data_info, load_training_data, sensitive_records
    from raydp_synth.data.public import effective_public
    from raydp_synth.methods import get_method
    from raydp_synth.privacy.accounting import parse_distribution, validate_delta
    from raydp_synth.tune.planning import reference_plan
    from raydp_synth.tune.search_space import load_search_space

    method = get_method(request.method)
    shape = parse_distribution(request.distribution)
    declared = effective_public(method, request.dataset, request.public)
    splits, public = load_training_data(request.dataset, public=declared, seed=request.seed,
                                        check_overlap=True)
    if request.public_validation:  # loads, and is not a copy of the sensitive data
        from raydp_synth.data.public import check_content_overlap, public_records

        check_content_overlap(
            public_records(request.public_validation, like=splits.train, seed=request.seed),
            splits, what=f"--public-validation {request.public_validation}")
    data = data_info(splits.train, public)
    validate_delta(request.delta, dataset_size=sensitive_records(splits))  # |D|, not n
    space = load_search_space(request.search_space, method.name, data).with_fixed(
        request.settings)
    name = request.name or f"{method.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    study_dir = (request.storage / name).resolve()
    _check_study_dir(request, study_dir)
    score_share = 0.0 if request.public_validation else request.score_share
    default = method.make_config({**space.fixed, "seed": request.seed}, data)
    if request.restarts:
        from raydp_synth.config import config_to_dict
        from raydp_synth.tune.search_space.anchored import check_restarts_point

        check_restarts_point(space.params, space.default_point(config_to_dict(default)))
    reference = None
    if request.selection == "random-stopping":
        _check_adaptivity_affordable(request, shape)
        try:
            reference = reference_plan(method, default, data, target_epsilon=request.epsilon,
                                       delta=request.delta, mean_trials=float(request.trials),
                                       shape=shape, score_share=score_share,
                                       density_ratio=request.density_ratio)
        except ConfigError as err:  # E_ref is what every trial's plan is held to
            raise BudgetExhausted(_cannot_buy_a_trial(request, request.trials, err)) from None
    tuning_rdp = None
    if request.selection == "subsampled":
        reference, tuning_rdp = _subsampled_plans(request, method, data, space, score_share, shape,
                                                  num_val=len(splits.val))
    public_search = None
    if request.tune_on_public is not None:
        from raydp_synth.tune.public_search import prepare_public_search

        public_search = prepare_public_search(
            spec=request.tune_on_public, dataset=request.dataset, method=method,
            sensitive=data, sensitive_splits=splits, public=declared,
            search_space=request.search_space, settings=request.settings,
            seed=request.seed)
        space = public_search.space  # the space searched (fitted to the public data)
    for note in space.notes:
        _LOG.info(f"search space: {note}")
    return _PreparedStudy(name=name, study_dir=study_dir, method=method, data=data,
                          public=declared, space=space, default=default, reference=reference,
                          score_share=score_share, public_search=public_search,
                          tuning_rdp=tuning_rdp, num_val=len(splits.val))


def _subsampled_plans(request: StudyRequest, method: Method, data: DataInfo, space: Any,
                      score_share: float, shape: float,
                      num_val: int) -> tuple[PrivacyPlan, tuple[float, ...]]:
    """``--selection subsampled``'s E_ref (the default config scaled to the subset,
    on its public size m, calibrated so the amplified tuning phase costs
    ``tune_share x epsilon``) and the tuning curve; and the check, before Ray starts,
    that the rest of the budget buys the default config's final run (the
    accountant's own variant-1 price; a ConfigError, one line, otherwise). A warning
    says so when E_ref's selection score, on the subset's ``round(q n_val)``
    validation records, is too noisy to rank trials (:func:`_warn_noisy_tuning_score`)."""
    from raydp_synth.privacy.subsampled_tuning import amplified_tuning_rdp, epsilon_from_rdp
    from raydp_synth.tune.extrapolation import subset_config, subset_data
    from raydp_synth.tune.planning import plan_for_subsampled_final, subsampled_reference_plan

    q = request.tune_fraction
    settings = {**space.fixed, "seed": request.seed}
    try:
        reference = subsampled_reference_plan(
            method, subset_config(method, settings, data, q), subset_data(data, q),
            target_epsilon=request.tune_share * request.epsilon, delta=request.delta,
            mean_trials=float(request.trials), shape=shape, tune_fraction=q,
            score_share=score_share)
    except ConfigError as err:
        raise ConfigError(f"--selection subsampled: the tuning phase's share "
                          f"{request.tune_share:g} of epsilon {request.epsilon:g} cannot pay for "
                          f"mean {request.trials} trials on q={q:g} of the data ({err})") from None
    _warn_noisy_tuning_score(request, reference, num_val)
    curve = amplified_tuning_rdp(reference.event(), mean=float(request.trials), shape=shape,
                                 tune_fraction=q)
    tuning_epsilon = epsilon_from_rdp(curve, request.delta)
    if not tuning_epsilon < request.epsilon:
        raise ConfigError(f"--selection subsampled: the tuning phase alone would cost epsilon "
                          f"{tuning_epsilon:.4g} of {request.epsilon:g}; lower --tune-share")
    try:
        final = plan_for_subsampled_final(
            method, method.make_config(settings, data), data, tuning_rdp=tuple(curve),
            target_epsilon=request.epsilon, delta=request.delta, score_share=score_share)
    except ConfigError as err:
        raise ConfigError(f"--selection subsampled: what the tuning phase leaves of epsilon "
                          f"{request.epsilon:g} cannot pay for the final run ({err}); lower "
                          "--tune-share or raise --epsilon") from None
    _LOG.info(f"subsampled tuning: tuning phase epsilon {tuning_epsilon:.4f} "
          f"(q={q:g}, mean {request.trials} trials, amplified), the default config's final run "
          f"{final.epsilon():.4f} alone, {request.epsilon:g} composed")
    return reference, tuple(float(v) for v in curve)


def _warn_noisy_tuning_score(request: StudyRequest, reference: PrivacyPlan,
                             num_val: int) -> None:
    """Warn, before any budget is spent, when a default tuning trial's selection
    score (E_ref's score mechanism, divided by the public subset size
    ``round(q n_val)`` as every tuning trial divides it) has a noise std above
    :data:`~raydp_synth.privacy.selection_score.NOISY_SCORE_STD`: the tuning phase
    would then pick its winner by noise. Public facts only: the plan, q and the
    split's size."""
    from raydp_synth.privacy.selection_score import NOISY_SCORE_STD, score_noise_std
    from raydp_synth.tune.extrapolation import subset_size

    divisor = subset_size(num_val, request.tune_fraction)
    std = score_noise_std(reference, divisor)
    if std is not None and std > NOISY_SCORE_STD:
        _LOG.warning(
            f"subsampled tuning scores each trial on about {divisor} validation "
            f"records with noise std {std:.2f} (a default trial), so two trials whose "
            f"accuracies differ by less than about {2 * std:.2f} are often misranked; raise "
            "--tune-fraction or --tune-share, or use --selection compose")


def check_first_trial_affordable(request: StudyRequest,
                                 prepared: _PreparedStudy) -> PlannedTrial | None:
    """Refuse, before Ray starts and before anything is written, a study whose budget
    cannot buy its next trial: the plan of the default configuration (compose's
    first trial) computed by :func:`~raydp_synth.tune.planning.trial_plan`, the
    function every trial calls, with the grants the ledger holds (none for a new
    study). A trial whose plan does not fit would fail without a grant, and so would
    every other trial of a budget that small. Random stopping's and subsampled
    tuning's checks are in :func:`_prepare`: the calibration of E_ref (a trial's plan
    is E_ref's or below it) and, for subsampled tuning, of the final run.

    Reads only public facts and, on ``--resume``, the ledger (curator-only).

    Returns:
        The plan it computed, for the trial with these inputs to reuse (planning is
        deterministic); None where it planned nothing.

    Raises:
        BudgetExhausted: one line naming the budget, the trial count and the fix.
    """
    from raydp_synth.privacy.events import event_from_json
    from raydp_synth.tune.planning import trial_plan

    if prepared.public_search is None and request.selection != "compose":
        return None  # _prepare calibrated E_ref (and subsampled's final run), or refused
    granted_events: list[dict[str, Any]] = []
    if prepared.public_search is not None:  # one final run at the whole budget
        selection, trials = "compose", 1
    else:
        selection, trials = request.selection, request.trials
        if request.resume and selection == "compose":
            granted_events = _ledger_granted_events(prepared.study_dir)
            if len(granted_events) >= trials:
                return None  # no trial is left to buy; the study goes on to its release
    config = _first_trial_config(request, prepared)
    try:
        plan = trial_plan(prepared.method, config, prepared.data, selection=selection,
                          epsilon=request.epsilon, delta=request.delta, trials=trials,
                          score_share=prepared.score_share,
                          granted=[event_from_json(e) for e in granted_events],
                          reference_event=prepared.reference.event()
                          if prepared.reference is not None else None)
    except ConfigError as err:
        raise BudgetExhausted(_cannot_buy_a_trial(request, trials, err)) from None
    return PlannedTrial(
        inputs=(selection, request.epsilon, request.delta, trials, prepared.score_share,
                prepared.data),
        config=config, granted=tuple(granted_events), plan=plan)


def _first_trial_config(request: StudyRequest, prepared: _PreparedStudy) -> Any:
    """The config of compose's first trial where the search fixes all of it (the
    default's point in the space, :func:`first_points`: the trial then reuses the
    budget check's plan); else the default config, whose plan is what the check
    needs (the same schedule up to the search's scaling of relative weights)."""
    points = first_points(request, prepared.space, prepared.default)
    if not points:
        return prepared.default
    try:
        settings = {**prepared.space.settings_from_trial_config(points[0]), "seed": request.seed}
        return prepared.method.make_config(settings, prepared.data)
    except ConfigError:  # the sampler draws part of it: the trial's config is not known
        return prepared.default


def _check_adaptivity_affordable(request: StudyRequest, shape: float) -> None:
    """``--sampler dp-hypo``: refuse, before anything starts, a budget that the price
    of the adaptivity alone (DP-HyPO's Theorem 1 for trials that release nothing)
    already meets, naming that price and random stopping's.

    Raises:
        BudgetExhausted: one line with both floors and the fixes.
    """
    from raydp_synth.privacy.adaptive_tuning import adaptive_random_stopping_floor

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


def _cannot_buy_a_trial(request: StudyRequest, trials: int, err: Exception) -> str:
    trial = (f"one of {trials} trials ({request.selection})" if trials > 1 else "one trial") \
        if request.selection == "compose" else f"a mean of {trials} trials (random stopping)"
    return (f"the budget epsilon={request.epsilon:g}, delta={request.delta:g} cannot buy "
            f"{trial} of {request.method}'s default configuration: {err}; nothing was "
            "started or written: raise --epsilon, lower --trials, or make a run cheaper "
            "(e.g. --set epochs=...)")


def _ledger_granted_events(study_dir: Path) -> list[dict[str, Any]]:
    """The grants of the study's ledger file (replayed without Ray, like
    ``python -m raydp_synth.budget``); none without a ledger."""
    from raydp_synth.accountant.core import LEDGER_NAME, StudyBudget
    from raydp_synth.accountant.ledger import Ledger

    path = study_dir / LEDGER_NAME
    if not path.is_file():
        return []
    return StudyBudget.replay(Ledger(path).entries(), source=path).granted_events()


def _check_study_dir(request: StudyRequest, study_dir: Path) -> None:
    """A new study needs an empty (or no) folder; ``--resume`` needs a study there."""
    blocking = next((p for p in (study_dir, *study_dir.parents) if p.exists()), None)
    if blocking is not None and not blocking.is_dir():
        raise ConfigError(f"--storage {request.storage}: {blocking} is a file, not a folder; "
                          "pass a folder for the study directories")
    if request.resume:
        if not (study_dir / "study.json").is_file():
            raise ConfigError(f"--resume: {study_dir} holds no study; check --storage and --name")
        _check_resumed_prior(request, study_dir)
    elif study_dir.exists() and any(study_dir.iterdir()):
        raise ConfigError(f"study {study_dir} already exists; pass --resume to continue it "
                          "or choose a new --name")


def request_json(request: StudyRequest) -> dict[str, Any]:
    """The request as ``study.json`` records it (paths as strings), which a
    ``--resume`` is checked against (:func:`_check_resumed_prior`)."""
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(request).items()}


#: A random-stopping study's settings that decide how its trials are drawn, by flag.
_TRIAL_DISTRIBUTION = (("sampler", "--sampler"), ("default_share", "--default-share"),
                       ("hypo_c", "--hypo-c"))


def _check_resumed_prior(request: StudyRequest, study_dir: Path) -> None:
    """A resumed random-stopping study draws its remaining trials as it drew the first.

    Random stopping prices K i.i.d. trials; a resume with another sampler, default
    share or density ratio would draw the rest from another distribution (and a
    restarts study's would lose their own initialisations). The ledger checks the
    pricing's settings; this checks the distribution's, against ``study.json``.
    Compose prices any choice of trials, so there they may change.

    Raises:
        ConfigError: one line naming the flag and the value the study was started with.
    """
    if request.selection != "random-stopping":
        return
    started = json.loads((study_dir / "study.json").read_text()).get("request", {})
    for name, flag in _TRIAL_DISTRIBUTION:
        if name in started and started[name] != getattr(request, name):
            raise ConfigError(f"--resume: study {study_dir.name} was started with {flag} "
                              f"{started[name]}, not {getattr(request, name)}; resume with "
                              f"the same {flag} (random stopping's trials must all be drawn "
                              "from one distribution)")


def _start_accountant(request: StudyRequest, prepared: _PreparedStudy) -> Any:
    """The study's accountant actor (created, or rebuilt from the ledger), checked
    against the ledger's settings; a new study also writes ``study.json``."""
    import ray

    from raydp_synth.accountant import get_or_create_accountant
    from raydp_synth.privacy.events import event_to_json

    study_dir, reference = prepared.study_dir, prepared.reference
    _owner_only_dir(study_dir)
    accountant = get_or_create_accountant(
        str(study_dir), prepared.name, epsilon=request.epsilon, delta=request.delta,
        mode=request.selection,
        trials=1 if request.tune_on_public is not None else request.trials,  # the final run
        distribution=request.distribution,
        reference_event=event_to_json(reference.event()) if reference is not None else None,
        density_ratio=request.density_ratio,
        tune_fraction=request.tune_fraction if request.selection == "subsampled" else None,
    )
    ray.get(accountant.status.remote())  # surfaces a ledger/settings mismatch now
    if not request.resume:
        (study_dir / "study.json").write_text(json.dumps({
            "request": request_json(request),
            "data_info": prepared.data.__dict__, "search_space": str(prepared.space.path),
            "public": prepared.public,
            "reference_plan": reference.to_dict() if reference is not None else None,
        }, indent=2))
    return accountant


def _study_settings(request: StudyRequest, prepared: _PreparedStudy, *,
                    total_cpus: float, gpus_per_worker: float,
                    planned: PlannedTrial | None = None) -> StudySettings:
    """What every trial reads from the study (built once, shared by every trial);
    ``gpus_per_worker`` is what Ray can place (0: the trials train on CPUs);
    ``planned``: the budget check's plan (:class:`PlannedTrial`)."""
    from raydp_synth.runtime.resources import largest_node_cpus, worker_cpu_share

    cpus_per_worker = worker_cpu_share(total_cpus=total_cpus, largest_node=largest_node_cpus(),
                                       workers=request.workers_per_trial,
                                       concurrent=request.max_concurrent,
                                       driver_cpus=TRIAL_DRIVER_CPUS)
    reference = prepared.reference
    return StudySettings(
        study_name=prepared.name, study_dir=prepared.study_dir, method=prepared.method.name,
        data=prepared.data, dataset=request.dataset, public=prepared.public, seed=request.seed,
        epsilon=request.epsilon, delta=request.delta, selection=request.selection,
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


def _tuner(request: StudyRequest, prepared: _PreparedStudy, settings: StudySettings,
           accountant: Any) -> Any:
    """Ray Tune's tuner of the study: the restored experiment on ``--resume`` if Tune
    saved one, else a new experiment (:func:`_new_tuner`); None when no trial is left."""
    from ray.tune.search import ConcurrencyLimiter

    from raydp_synth.tune.searcher import BudgetAwareSearch
    from raydp_synth.tune.trial import trial_trainable

    # Per-epoch reports carry the training metrics; the score comes with the last one.
    os.environ["TUNE_DISABLE_STRICT_METRIC_CHECKING"] = "1"
    trainable = trial_trainable(settings, driver_cpus=TRIAL_DRIVER_CPUS)
    tuner = None
    latest = _latest_experiment(prepared.study_dir) if request.resume else None
    if request.resume and request.selection == "compose":
        tuner = _restored_tuner(latest, trainable)
    elif request.resume:
        keep = _unfinished_trials(latest) if latest is not None else set()
        # Random stopping: restore Tune's experiment only for the trials it resumes,
        # which keep their draws and ask. With none, a new experiment draws afresh: a
        # restored search that had finished (K drawn) would never draw again in place
        # of the draws taken back.
        tuner = _restored_tuner(latest, trainable) if keep else None
        _take_back_draws_that_will_not_ask(accountant, keep=keep if tuner is not None else set(),
                                           as_no_ops=request.failures_are_runs)
    if tuner is not None:
        return tuner

    def searcher(experiment: str) -> Any:
        """The new experiment's searcher; its Optuna study, named like the
        experiment, new in the study's journal."""
        from raydp_synth.tune.optuna_journal import journal_storage, new_study_name

        storage = journal_storage(prepared.study_dir, create=True)
        inner = optuna_search(request, prepared.space, prepared.default, storage=storage,
                              study_name=new_study_name(storage, experiment))
        return ConcurrencyLimiter(
            BudgetAwareSearch(inner, prepared.name,
                              failures_are_runs=request.failures_are_runs),
            max_concurrent=request.max_concurrent)

    return _new_tuner(request, settings, trainable, searcher, accountant)


def _new_tuner(request: StudyRequest, settings: StudySettings, trainable: Any,
               searcher: Callable[[str], Any], accountant: Any) -> Any:
    """A new Tune experiment of the study: for a new study, or a resume whose Tune
    experiment cannot be restored (killed before Tune saved it), on the same ledger,
    with the trials the ledger has not granted yet; None when that is none. The
    release considers every finished trial of the study, whatever experiment it ran in.
    """
    import ray
    from ray import tune
    from ray.tune.schedulers import FIFOScheduler

    from raydp_synth.tune.trial_metrics import study_run_config

    # compose: at most N_max trials. random-stopping: exactly K (secret, in the
    # accountant) trials: no cap (a cap would run min(K, cap), which the theorem does
    # not cover); the searcher finishes when the accountant can grant no more.
    num_samples = request.trials if request.selection == "compose" else -1
    previous = [p for p in settings.study_dir.glob("tune*") if p.is_dir()]
    experiment = "tune" if not previous else f"tune-resume-{len(previous)}"
    if request.resume and request.selection == "compose":
        granted = len(ray.get(accountant.granted_events.remote()))
        num_samples = max(0, request.trials - granted)
    if num_samples == 0:
        return None
    # reuse_actors: a finished trial's process runs the next trial (Tune resets its
    # config), so only the first trial pays for a process start and its imports
    # (12-17 s on 2 cores; bench/trial_overhead.py --study-trials). Nothing private
    # crosses trials through it: a trial's secret DP randomness is drawn fresh
    # (``secrets``) in the trial, its data and model are locals, and what a process
    # caches is public (noise calibration of public plan parameters). A killed
    # process fails its trial exactly as before (max_failures=0) and the next trial
    # gets a fresh one.
    return tune.Tuner(
        trainable,
        tune_config=tune.TuneConfig(search_alg=searcher(experiment), scheduler=FIFOScheduler(),
                                    num_samples=num_samples, reuse_actors=True),
        run_config=study_run_config(experiment, settings),
    )


def _take_back_draws_that_will_not_ask(accountant: Any, *, keep: set[str],
                                       as_no_ops: bool = False) -> None:
    """On ``--resume`` of a random-stopping study: the trials the interrupted study drew
    that never asked for a grant read nothing. Those that Tune's restore resumes
    (``keep``, same trial ids) keep their draws and ask; the others' draws are taken
    back and the search draws afresh in their place, so that all K draws can be
    decided. Under DP-HyPO (``as_no_ops``) each is granted a no-op instead, one of the
    K runs: whether a trial asked before the interruption may depend on its
    configuration, and a redraw would then bias the proposal beyond its bound."""
    import ray

    taken_back = ray.get(accountant.undraw.remote(None, sorted(keep), as_no_ops))
    if taken_back and as_no_ops:
        _LOG.info(f"{taken_back} trial(s) drawn before the interruption will not ask for a "
                  "grant; under DP-HyPO each counts as one of the K runs, releasing nothing")
    elif taken_back:
        _LOG.info(f"{taken_back} trial(s) drawn before the interruption will not ask for a "
                  "grant; the search draws again in their place")


def _latest_experiment(study_dir: Path) -> Path | None:
    """The study's latest Tune experiment folder (``tune``, then ``tune-resume-N``), or
    None before its first."""
    experiments = [p for p in study_dir.glob("tune*") if p.is_dir()]
    return max(experiments, key=_experiment_order) if experiments else None


def _unfinished_trials(experiment: Path) -> set[str]:
    """The ids of the trials that Tune's restore resumes (``resume_unfinished``): those
    neither TERMINATED nor ERROR in the experiment's latest saved state. An unreadable
    state gives none (then every undecided draw is taken back, and a resumed trial that
    asks is refused: nothing is granted outside the draws)."""
    states = sorted(experiment.glob("experiment_state-*.json"))  # Tune's newest: the last
    if not states:
        return set()
    try:
        trials = [json.loads(entry[0]) for entry in
                  json.loads(states[-1].read_text())["trial_data"]]
        return {str(t["trial_id"]) for t in trials
                if t.get("status") not in ("TERMINATED", "ERROR")}
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return set()


def _experiment_order(path: Path) -> int:
    return int(path.name.rsplit("-", 1)[1]) if path.name.startswith("tune-resume-") else 0


def first_points(request: StudyRequest, space: SearchSpace,
                 default: Any) -> list[dict[str, Any]] | None:
    """What the search runs first: ``default``, the method's default config (its
    values that the space holds), so that a small study starts from the known-good
    configuration.

    Only under ``compose``: composition covers trials chosen in any (adaptive) way.
    Random stopping (Papernot and Steinke) needs every trial to draw its
    hyperparameters from one fixed distribution, which a fixed first trial breaks.
    Not on --resume (the default ran, or Tune's restored searcher holds it).
    """
    from raydp_synth.config import config_to_dict

    if request.selection != "compose" or request.resume:
        return None
    point = space.default_point(config_to_dict(default))
    return [point] if point else None


def default_prior_point(request: StudyRequest, space: SearchSpace,
                        default: Any) -> dict[str, Any] | None:
    """``--default-share``'s atom: the default config's values that the space holds
    (public: the method's config and the space), or None without ``--default-share``."""
    from raydp_synth.config import config_to_dict

    if request.default_share == 0:
        return None
    return space.default_point(config_to_dict(default))


def optuna_search(request: StudyRequest, space: SearchSpace, default: Any, *,
                  storage: Any = None, study_name: str | None = None) -> Any:
    """The study's Optuna searcher (Ray Tune's ``OptunaSearch``), before the budget
    and concurrency wrappers: the space, the sampler and the first points; its
    Optuna study in ``storage`` under ``study_name`` (the study's journal,
    :mod:`raydp_synth.tune.optuna_journal`; None: in memory).

    The sampler's seed depends on the selection:

    * ``compose``: the public ``--seed``, so that a study can be reproduced.
      Composition prices every granted plan whatever chose it, so a public (even
      adaptive) choice of configurations costs nothing.
    * ``random-stopping``: a fresh 128-bit seed from OS entropy (:mod:`secrets`),
      drawn here, for every sampler built (a new study, or a resume whose Tune
      state is gone). Papernot & Steinke (2022, "Hyperparameter Tuning with Renyi
      Differential Privacy", Theorems 2 and 6) price the best of K runs as if K
      were secret and every run an i.i.d. draw of the same mechanism,
      hyperparameters included. With a public seed anyone could replay the
      sampler's sequence: the released configuration would give away its index
      among the trials, a lower bound on the secret K (that the release is the
      best of at least that many), and a resume without Tune's state would re-run
      the same configurations instead of fresh draws.
      Hence the seed is kept by nothing but the sampler itself and written nowhere
      (not in study.json, the ledger, the trials' :class:`StudySettings`, a log or
      a metric). Ray Tune does pickle the searcher, and so the sampler's random
      state, into the experiment directory for its own resume; that is curator-only
      state in the owner-only study directory (like K in the ledger), never part of
      a release.

    Like K (drawn by the accountant, also from OS entropy), this seed depends
    neither on the data nor on ``--seed``. It is four 32-bit words, not one int:
    Optuna's RandomSampler seeds a NumPy ``RandomState``, whose int seed must be
    below 2**32, and 32 bits could be searched exhaustively (replay every seed,
    look for the released configuration); a word list seeds its whole state
    (``init_by_array``). ``dp-hypo`` gets the same secret seed: it draws its
    candidate set (the prior DP-HyPO's bound is relative to) and every trial's
    configuration from it.
    """
    from ray.tune.search.optuna import OptunaSearch

    from raydp_synth.tune.search_space import make_sampler
    from raydp_synth.tune.search_space.dp_hypo import space_distributions

    # TPE's default of 10 random start-up trials would make a small study a random search.
    startup = min(10, max(2, request.trials // 3)) if request.sampler == "tpe" else None
    # random-stopping: the secret seed (see above); never bind it to a name, log or store it.
    sampler = make_sampler(
        request.sampler,
        request.seed if request.selection == "compose"
        else secret_seed_words(),
        n_startup_trials=startup,
        density_ratio=request.hypo_c,
        distributions=space_distributions(space.define_by_run)
        if request.sampler == "dp-hypo" else None,
        default_point=default_prior_point(request, space, default),
        default_share=request.default_share or 0.0,
    )
    return OptunaSearch(space=space.define_by_run, metric="score", mode="max",
                        sampler=sampler, points_to_evaluate=first_points(request, space, default),
                        storage=storage, study_name=study_name)


def _restored_tuner(latest: Path | None, trainable: Any) -> Any:
    """The study's latest Tune experiment (``latest``, :func:`_latest_experiment`),
    restored (Tune's experiment restore), or None if Tune never saved one.

    The search continues where it stopped: Optuna's state (every finished trial's
    score), the trial count, the finished trials. A trial that was running when
    the driver died is resumed by Tune but gets no second grant: it asks the
    accountant again under a new attempt and is refused (its first grant stays
    spent: docs/architecture.md, invariant 2), so it ends at once without
    reading data.
    """
    from ray import tune

    if latest is None or not tune.Tuner.can_restore(latest) \
            or not any(latest.glob("experiment_state*.json")):
        return None
    _LOG.info(f"resuming Tune experiment {latest}")
    return tune.Tuner.restore(str(latest), trainable=trainable,
                              resume_unfinished=True, resume_errored=False,
                              restart_errored=False)


def _finished_trials(study_dir: Path) -> list[dict[str, Any]]:
    """Every trial of the study (all sessions) that finished with a score."""
    from raydp_synth.tune.trial import TRIAL_CHECKPOINT

    found = []
    for path in sorted(study_dir.glob(f"tune*/*/checkpoint_*/{TRIAL_CHECKPOINT}")):
        info = json.loads(path.read_text())
        found.append({"trial": info["trial_id"], "score": info["score"]["value"],
                      "checkpoint": path.parent})
    return found


def no_release_message(name: str, study_dir: Path, status: dict[str, Any]) -> str:
    """Why a study released nothing, stated as its ledger stands (``status``: the
    accountant's :meth:`~raydp_synth.accountant.actor.BudgetAccountant.status`, the
    ledger's grants and refusals replayed). Under random stopping and subsampled
    tuning the counts stay out of the message (they would tell K, which only the
    ledger holds)."""
    granted, refused = status["trials_granted"], status["trials_refused"]
    budget = f"epsilon {status['spent_epsilon']:.4f} of {status['budget_epsilon']:g}"
    if status["mode"] in ("random-stopping", "subsampled"):
        spent = f"the ledger holds its trials' grants, {budget} spent and not refunded"
    elif granted:
        spent = (f"the ledger holds {granted} grant{'s' if granted != 1 else ''} and "
                 f"{refused} refusal{'s' if refused != 1 else ''}, {budget} spent and not "
                 "refunded")
    else:
        spent = (f"the ledger holds no grant ({refused} refusal{'s' if refused != 1 else ''}): "
                 "nothing was spent")
    return (f"no trial of study {name} finished with a score (see {study_dir / 'tune'}); "
            f"{spent} (python -m raydp_synth.budget {study_dir})")


def _release_best(request: StudyRequest, study_dir: Path, accountant: Any,
                  name: str, extra: dict[str, Any] | None = None,
                  result_grid: Any = None) -> StudyResult:
    """Release the study's best finished trial; ``extra`` (a strategy's
    ``statement`` and ``run`` fields, e.g. ``--tune-on-public``'s scope) overrides
    the defaults of privacy.json and run.json."""
    import ray
    import torch

    from raydp_synth.release import TrainedGenerator, write_release
    from raydp_synth.release.bundle import public_data_note, public_facts
    from raydp_synth.tune.trial import TRIAL_CHECKPOINT

    trials = _finished_trials(study_dir)
    scored = [t for t in trials if math.isfinite(t["score"])]
    best = max(scored, key=lambda t: t["score"]) if scored else None
    statement = ray.get(accountant.statement.remote())
    if request.selection == "random-stopping" and ray.get(accountant.status.remote())["can_grant"]:
        # The theorem covers the best of exactly K trials, not of fewer.
        raise BudgetExhausted(
            f"study {name} stopped before its random number of trials was reached (see the "
            f"trial errors in {study_dir / 'tune'}); nothing is released. Fix the cause and "
            "continue it with --resume"
        )
    if best is None:
        raise BudgetExhausted(no_release_message(name, study_dir,
                                                 ray.get(accountant.status.remote())))
    score, ckpt = best["score"], best["checkpoint"]
    info = json.loads((ckpt / TRIAL_CHECKPOINT).read_text())
    state = torch.load(ckpt / "generator.pt", map_location="cpu")
    generator = TrainedGenerator.build(**info["generator"], state_dict=state)
    full = {
        "epsilon": statement["epsilon"],
        "delta": statement["delta"],
        "private": True,
        "scope": "the whole hyperparameter search (every trial, its selection score, and the "
                 "choice of the best trial), priced by the study's accountant from its ledger",
        "pricing": statement,
        "accountant": statement["accountant"],
        "dataset": request.dataset,
        "released_trial_plan": info["plan"],
    }
    declared = json.loads((study_dir / "study.json").read_text()).get("public")
    if declared is not None:
        full["public_data"] = public_data_note(declared)
    score_info = info["score"]
    full["public_facts"] = public_facts(
        generator.data, generator.class_names, public=declared,
        validation_records=score_info.get("num_records") if score_info.get("private") else None,
        public_validation=None if score_info.get("private") else
        (request.public_validation or request.tune_on_public))
    full.update((extra or {}).get("statement", {}))
    write_release(study_dir / "release", generator=generator, statement=full,
                  num_synthetic=request.synthetic_samples, seed=request.seed)
    # The budget gauges' one move under every mode but compose (accountant/gauges.py).
    ray.get(accountant.publish_release.remote())
    trial_id = info["trial_id"]
    (study_dir / "run.json").write_text(json.dumps({
        "method": request.method, "dataset": request.dataset, "seed": request.seed,
        # What each seed drove in the released trial: the data splits (and the
        # evaluation's, which reads "seed") and the initialisation (a restart's own).
        "data_seed": info.get("data_seed", request.seed),
        "init_seed": info["generator"]["config"].get("seed"),
        "study": name, "released_trial": trial_id, "checkpoints": f"trials/{trial_id}",
        **(extra or {}).get("run", {}),
    }, indent=2))
    (study_dir / "score.json").write_text(json.dumps(info["score"], indent=2))
    scope = "the final run" if request.tune_on_public else "the whole search"
    kind = "private" if info["score"].get("private", True) else "public"
    print(f"[raydp_synth] released trial {trial_id} ({kind} score {score:.4f}) to "
          f"{study_dir / 'release'}; {scope} is ({statement['epsilon']:.4f}, "
          f"{statement['delta']:g})-DP ({statement['mode']})")
    if request.evaluate:
        from raydp_synth.evaluation.report import evaluate_run, format_table
        from raydp_synth.train.driver import evaluation_settings

        print(format_table(evaluate_run(study_dir, settings=evaluation_settings(
            use_gpu=request.gpus_per_worker() > 0, curve_checkpoints=None,
            fid_weights=request.fid_weights))))
    return StudyResult(study_dir=study_dir, statement=full, best_trial=trial_id,
                       best_score=score,
                       trials=[{"trial": t["trial"], "score": t["score"]} for t in trials],
                       result_grid=result_grid)
