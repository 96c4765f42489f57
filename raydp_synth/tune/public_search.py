"""``--tune-on-public DATASET``: search on data declared public, then one private run.

Two phases (docs/budget-pricing.md, section 6.4):

1. **Search**, at no privacy cost: a Tune experiment (``STUDY/public-search/``)
   whose trials train the method on DATASET, a dataset the curator declared public,
   loaded as the training data. Each trial's plan is calibrated as one run at the
   study's (epsilon, delta) for DATASET's size, so the hyperparameters are tuned in
   the noise regime of the final run, and scores on DATASET's held-out split,
   without noise. The trials ask no grant. Their settings
   (:func:`public_search_settings`) hold DATASET as the dataset and no other
   dataset that could name the sensitive records: a phase-1 trial has no spec of
   the sensitive data to load. Any sampler may adapt (TPE): it sees public data only.
2. **Final run**: the best phase-1 configuration, trained once on the sensitive
   data with the whole budget (:mod:`raydp_synth.tune.final_run`), granted by the
   study's accountant (``compose``, one trial); the release is that run.

Privacy: the configuration of the final run is a function of public data and of
randomness independent of the sensitive data, so it is a fixed input of the final
run's mechanism; the release is (epsilon, delta)-DP by the final run's plan alone.
The statement covers the final run only and says that DATASET chose the
hyperparameters. Utility is only as good as DATASET's resemblance to the sensitive data.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from raydp_synth.data import data_info, load_training_data
from raydp_synth.data.public import check_content_overlap, same_source
from raydp_synth.errors import BudgetExhausted, ConfigError, DataError
from raydp_synth.release.bundle import public_data_note
from raydp_synth.tune.final_run import final_run_settings, run_final
from raydp_synth.tune.progress import legacy_tune_output, with_study_progress
from raydp_synth.tune.search_space import load_search_space
from raydp_synth.tune.strategies.roles import PUBLIC_SEARCH_TRIAL
from raydp_synth.tune.study_settings import StudySettings
from raydp_synth.tune.trial import trial_trainable
from raydp_synth.tune.trial_metrics import study_run_config

_LOG = logging.getLogger(__name__)

if TYPE_CHECKING:
    from raydp_synth.data import DataInfo, DatasetSplits
    from raydp_synth.data.public import PublicDeclaration
    from raydp_synth.data.spec import DatasetSpec
    from raydp_synth.methods.base import Method
    from raydp_synth.tune.search_space import SearchSpace

__all__ = ["PUBLIC_EXPERIMENT", "PublicSearch", "check_tune_on_public", "prepare_public_search",
           "public_search_settings", "search_then_final_run"]

#: The search's Tune experiment (not a ``tune*`` folder: never a release candidate).
PUBLIC_EXPERIMENT = "public-search"


def check_tune_on_public(spec: DatasetSpec, *, dataset: DatasetSpec, resume: bool) -> None:
    """The request's ``--tune-on-public`` (parsed, a whole dataset:
    :func:`~raydp_synth.data.public.whole_public_dataset`) against its other options,
    before anything loads: one line, with the fix (its ``--strategy``: the strategy's,
    :mod:`raydp_synth.tune.strategies.public_then_private`).

    Raises:
        ConfigError: ``--resume``.
        DataError: a spec that names the sensitive dataset.
    """
    if resume:
        raise ConfigError("--tune-on-public cannot --resume a study; start a new one with "
                          "another --name (an unfinished study's grant, if any, stays spent)")
    if same_source(spec, dataset):
        raise DataError(f"--tune-on-public {spec} names the sensitive training dataset; "
                        "declare another dataset public (e.g. folder:DIR)")


@dataclass(frozen=True, kw_only=True)
class PublicSearch:
    """The search's public facts, settled before Ray starts.

    Attributes:
        dataset: the public dataset's spec (absolute), loaded as training data.
        data: its training split's public facts (at the sensitive data's image size).
        space: the search space, fitted to ``data``.
        default: the method's default config on ``data`` (the search's first point).
    """

    dataset: DatasetSpec
    data: DataInfo
    space: SearchSpace
    default: Any


def prepare_public_search(*, spec: DatasetSpec, dataset: DatasetSpec, method: Method,
                          sensitive: DataInfo, public: PublicDeclaration | None, search_space: Any, seed: int,
                          settings: Mapping[str, str] | None = None,
                          sensitive_splits: DatasetSplits | None = None) -> PublicSearch:
    """Load DATASET's public facts (it must load, like the sensitive data in shape
    and classes) and fit the search space to it. ``dataset`` is the sensitive
    dataset's spec (checked against, never loaded here). ``public`` is the method's
    own public declaration, which the search's trials use too: refused when it is a
    part of the sensitive dataset (a search trial would read that file). With
    ``sensitive_splits`` (the sensitive data, already loaded), DATASET is refused when
    it is a copy of them (:func:`~raydp_synth.data.public.check_content_overlap`)."""
    if public is not None:
        declared = public.dataset
        if same_source(declared, spec):
            raise DataError(f"--tune-on-public {spec} is also the --public data {public}; "
                            "declare them apart")
        if same_source(declared, dataset):
            raise DataError(f"--tune-on-public cannot be combined with --public {public}, a "
                            "part of the sensitive dataset (the search's trials would read its "
                            "file); declare a separate public dataset")
    splits, records = load_training_data(spec, public=public, image_size=sensitive.image_size,
                                         seed=seed)
    if sensitive_splits is not None:
        check_content_overlap(splits, sensitive_splits, what=f"--tune-on-public {spec}")
    data = data_info(splits.train, records)
    if (data.channels, data.num_classes) != (sensitive.channels, sensitive.num_classes):
        raise DataError(f"--tune-on-public {spec} has {data.channels}-channel images and "
                        f"{data.num_classes} classes, the training data {sensitive.channels} "
                        f"and {sensitive.num_classes}; declare a public dataset of the same kind")
    if len(splits.val) == 0:
        raise DataError(f"--tune-on-public {spec}: its held-out split is empty; declare a "
                        "larger public dataset")
    space = load_search_space(search_space, method.name, data).with_fixed(settings or {})
    default = method.make_config({**space.fixed, "seed": seed}, data)
    return PublicSearch(dataset=spec, data=data, space=space, default=default)


def public_search_settings(study: StudySettings, search: PublicSearch) -> StudySettings:
    """``study`` (the sensitive data's settings) as the search's: DATASET is the
    training data, with its facts and space; no private score, no public validation
    set (the trials score on DATASET's held-out split). The sensitive spec is not
    in the result (``dataset`` is replaced; ``public`` was checked apart from it by
    :func:`prepare_public_search`)."""
    return replace(study, dataset=search.dataset, data=search.data, space=search.space,
                   role=PUBLIC_SEARCH_TRIAL, reference_event=None, score_share=0.0,
                   public_validation=None)


def final_validation(study: StudySettings, search: PublicSearch) -> DatasetSpec:
    """What the final run scores on: the user's ``--public-validation``, else DATASET."""
    return study.public_validation or search.dataset


def _best_public_trial(grid: Any) -> tuple[str, dict[str, Any], float]:
    """(trial id, Tune config, score) of the search's best scored trial."""
    best: tuple[str, dict[str, Any], float] | None = None
    for result in grid:
        score = (result.metrics or {}).get("score")
        if score is None or not math.isfinite(score):
            continue
        if best is None or score > best[2]:
            best = (str(result.metrics["trial_id"]), dict(result.config), float(score))
    if best is None:
        raise BudgetExhausted("no trial of the public search finished with a score (see "
                              f"{PUBLIC_EXPERIMENT}/); nothing was spent on the sensitive data")
    return best


def _final_results_only(inner: Any) -> Any:
    """``inner`` (Optuna), told of each trial's final result only: per-epoch reports
    carry training metrics, not the score (like the private search's
    :class:`~raydp_synth.tune.searcher.BudgetAwareSearch`, without its accountant).
    An invalid config's -inf becomes -1 (Optuna wants finite values)."""
    from ray.tune.search import Searcher

    class FinalResultsOnly(Searcher):
        def __init__(self) -> None:
            super().__init__(metric=inner.metric, mode=inner.mode)

        def set_search_properties(self, metric: str | None, mode: str | None, config: dict,
                                  **spec: Any) -> bool:
            return bool(inner.set_search_properties(metric, mode, config, **spec))

        def suggest(self, trial_id: str) -> Any:
            return inner.suggest(trial_id)

        def on_trial_result(self, trial_id: str, result: dict) -> None:
            pass

        def on_trial_complete(self, trial_id: str, result: dict | None = None,
                              error: bool = False) -> None:
            if result is not None and not math.isfinite(result.get("score", 0.0)):
                result = {**result, "score": -1.0}
            inner.on_trial_complete(trial_id, result=result, error=error)

        def save(self, checkpoint_path: str) -> None:
            inner.save(checkpoint_path)

        def restore(self, checkpoint_path: str) -> None:
            inner.restore(checkpoint_path)

    return FinalResultsOnly()


def search_then_final_run(request: Any, study: StudySettings, search: PublicSearch,
                          accountant: Any, *, searcher: Any, driver_cpus: float) -> dict[str, Any]:
    """Phase 1 on DATASET with ``searcher`` (the study's Optuna searcher over
    ``search.space``), then the final run of its best configuration; returns what
    the release states of it (``statement`` and ``run`` extras,
    and the search's ``result_grid``,
    :func:`~raydp_synth.tune.study_release.release_best`)."""
    import os

    import ray
    from ray import tune
    from ray.tune.schedulers import FIFOScheduler
    from ray.tune.search import ConcurrencyLimiter

    os.environ["TUNE_DISABLE_STRICT_METRIC_CHECKING"] = "1"
    limited = ConcurrencyLimiter(_final_results_only(searcher),
                                 max_concurrent=request.max_concurrent)
    _LOG.info(f"phase 1: {request.trials} trials on the public data {search.dataset} "
          "(no privacy cost)")
    tuner = tune.Tuner(
        trial_trainable(public_search_settings(study, search), driver_cpus=driver_cpus),
        tune_config=tune.TuneConfig(search_alg=limited, scheduler=FIFOScheduler(),
                                    num_samples=request.trials,
                                    reuse_actors=True),  # as in raydp_synth.tune.tuner
        run_config=with_study_progress(study_run_config(PUBLIC_EXPERIMENT, study), study),
    )
    with legacy_tune_output():  # the study's progress table (raydp_synth.tune.progress)
        grid = tuner.fit()
    trial_id, config, score = _best_public_trial(grid)
    granted = len(ray.get(accountant.granted_events.remote()))
    _LOG.info(f"phase 2: the config of public trial {trial_id} (public score "
          f"{score:.4f}), one run on the sensitive data with the budget left")
    # No private score: the final run is released whatever it scores; it scores on
    # public data (free) for the record.
    final = replace(final_run_settings(study, granted_before=granted), score_share=0.0,
                    public_validation=final_validation(study, search))
    run_final(final, config, driver_cpus=driver_cpus)
    return {
        "result_grid": grid,
        "statement": {
            "scope": (f"the final private run only; hyperparameters were chosen on public data "
                      f"{search.dataset} at no privacy cost ({request.trials} search trials "
                      "that never read the sensitive data)"),
            "tuned_on_public": public_data_note(str(search.dataset)),
        },
        "run": {"tuned_on_public": str(search.dataset),
                "public_search": {"experiment": PUBLIC_EXPERIMENT, "config_from_trial": trial_id,
                                  "public_score": score, "config": config}},
    }
