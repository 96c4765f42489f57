"""``--strategy subsampled``: random stopping on a secret Poisson subset, then one
final run on all the data (Koskela & Kulkarni, 2023, "Practical Differentially
Private Hyperparameter Tuning with Subsampling", variant 1).

The study (docs/budget-pricing.md, section 9):

1. **The tuning subset X1.** Every sensitive record the tuning phase could read, the
   training split's and the private validation split's, is in X1 independently with
   probability q (``--tune-fraction``): :func:`draw_tuning_subset`, with a generator
   seeded from OS entropy in the real path (:func:`secret_tuning_subset`), never from
   ``--seed``. X1 is a secret like random stopping's K: it is held in the driver's
   memory and reaches the trials through Ray's object store (``tune.with_parameters``
   and, for a Ray Train loop, an object reference in the workers' payload, as the DP
   seed does), never in a trial config, a file, a log or a metric.
2. **Tuning phase.** Random-stopping trials (i.i.d. draws of Optuna's random
   sampler with a secret seed, K secret in the accountant). A trial's configuration
   is drawn for the full data and scaled to X1 by
   :func:`~raydp_synth.tune.extrapolation.to_tuning_subset`; its plan is sized for
   the public subset size ``m = round(q n)`` (never ``|X1|``), calibrated to be
   dominated by the study's reference plan E_ref (the default config's plan on m
   records, calibrated so that the amplified tuning phase costs
   ``--tune-share x epsilon``), and granted by the accountant; it trains on X1's
   training records only and scores on X1's validation records with the private
   score of its plan, divided by the public ``round(q n_val)`` (a fixed number, so
   the division is post-processing; the realised size of X1 is never released).
3. **Final run.** The best tuning trial's configuration, extrapolated
   (:func:`~raydp_synth.tune.extrapolation.to_full_data`), trained once on all the
   data (:mod:`raydp_synth.tune.final_run`), its plan calibrated so that the tuning
   phase composed with it meets the budget, granted as the final run by the
   accountant (which refuses it if the composition exceeds the total). Only the final
   run is a release candidate: the tuning experiment is not a ``tune*`` folder.

Privacy: every record reaches the tuning phase only through X1, so the tuning phase
is random stopping on a Poisson(q) subsample (amplified, Zhu & Wang 2019); the final
configuration is a function of the tuning phase's output, so the final run composes
adaptively with it (RDP composition). The accountant prices exactly that
(:mod:`raydp_synth.privacy.subsampled_tuning`, ``subsampled`` mode of
:mod:`raydp_synth.accountant.core`).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from raydp_synth.errors import BudgetExhausted, ConfigError
from raydp_synth.privacy.secret_rng import secret_numpy_rng
from raydp_synth.tune.defaults import DEFAULT_TUNE_FRACTION, DEFAULT_TUNE_SHARE
from raydp_synth.tune.extrapolation import (
    subset_config,
    subset_data,
    subset_size,
    to_full_data,
)
from raydp_synth.tune.final_run import run_final, subsampled_final_settings
from raydp_synth.tune.progress import legacy_tune_output, with_study_progress
from raydp_synth.tune.searcher import BudgetAwareSearch
from raydp_synth.tune.strategies.roles import SUBSAMPLED_SEARCH_TRIAL, SUBSAMPLED_STUDY
from raydp_synth.tune.trial import TRIAL_CHECKPOINT, trial_trainable
from raydp_synth.tune.trial_metrics import study_run_config

if TYPE_CHECKING:
    from raydp_synth.data.dataset import ImageDataset
    from raydp_synth.tune.study_settings import StudySettings

__all__ = [
    "SUBSAMPLED_EXPERIMENT",
    "TuningSubset",
    "check_tune_fraction",
    "check_tune_share",
    "draw_tuning_subset",
    "full_config",
    "search_then_final_run",
    "secret_tuning_subset",
    "subset_config",
    "subset_records",
    "subset_data",
]

_LOG = logging.getLogger(__name__)

#: The tuning phase's Tune experiment (not a ``tune*`` folder: never a release candidate).
SUBSAMPLED_EXPERIMENT = "subsampled-search"


def check_tune_fraction(q: float) -> float:
    """``--tune-fraction``: a number strictly between 0 and 1."""
    if isinstance(q, bool) or not isinstance(q, (int, float)) or not (
            math.isfinite(q) and 0 < q < 1):
        raise ConfigError(f"--tune-fraction {q!r} must be a number strictly between 0 and 1, "
                          f"e.g. {DEFAULT_TUNE_FRACTION}")
    return float(q)


def check_tune_share(share: float) -> float:
    """``--tune-share``: a number strictly between 0 and 1."""
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not (
            math.isfinite(share) and 0 < share < 1):
        raise ConfigError(f"--tune-share {share!r} must be a number strictly between 0 and 1, "
                          f"e.g. {DEFAULT_TUNE_SHARE}")
    return float(share)


@dataclass(frozen=True)
class TuningSubset:
    """X1: which training and validation records the tuning trials may read (secret).

    Attributes:
        fraction: q.
        train, val: sorted indices into the training and validation splits.
        num_train, num_val: the sizes of the splits the indices were drawn from.
    """

    fraction: float
    train: np.ndarray
    val: np.ndarray
    num_train: int
    num_val: int

    def __repr__(self) -> str:  # never print the indices, nor their count
        return f"TuningSubset(fraction={self.fraction}, <secret>)"

    def select(self, dataset: ImageDataset, indices: np.ndarray, size: int) -> ImageDataset:
        """``dataset`` (a split of ``size`` records) restricted to ``indices``."""
        if len(dataset) != size:
            raise RuntimeError("the dataset changed after the tuning subset was drawn")
        return subset_records(dataset, indices)


def subset_records(dataset: ImageDataset, indices: np.ndarray) -> ImageDataset:
    """The records of ``dataset`` at ``indices``, and no other (what a tuning trial's
    loop and score read): :meth:`ImageDataset.records_at`, which the worker calls."""
    return dataset.records_at(indices)


def draw_tuning_subset(num_train: int, num_val: int, fraction: float,
                       rng: np.random.Generator) -> TuningSubset:
    """Poisson subsampling: each record of both splits independently with
    probability ``fraction``, from ``rng`` (tests inject one; the study uses
    :func:`secret_tuning_subset`)."""
    q = check_tune_fraction(fraction)
    train = np.flatnonzero(rng.random(num_train) < q)
    val = np.flatnonzero(rng.random(num_val) < q)
    return TuningSubset(fraction=q, train=train, val=val, num_train=num_train, num_val=num_val)


def secret_tuning_subset(num_train: int, num_val: int, fraction: float) -> TuningSubset:
    """X1 drawn from OS entropy (256 bits: :func:`~raydp_synth.privacy.secret_rng.secret_numpy_rng`),
    never from a user seed: who knows the seed knows which records were in X1, and the
    amplification by subsampling assumes they cannot."""
    return draw_tuning_subset(num_train, num_val, fraction, secret_numpy_rng())


def full_config(subset: Mapping[str, Any], fraction: float) -> dict[str, Any]:
    """The final run's settings from the best tuning trial's config (a dict)."""
    return to_full_data(subset, fraction)


def _best_tuning_trial(grid: Any, study_dir: Any) -> tuple[str, dict[str, Any], float]:
    """(trial id, the trial's own (subset) config, score) of the best scored trial."""
    best: tuple[str, dict[str, Any], float] | None = None
    for result in grid:
        score = (result.metrics or {}).get("score")
        if score is None or not math.isfinite(score) or result.checkpoint is None:
            continue
        if best is None or score > best[2]:
            with result.checkpoint.as_directory() as ckpt:
                info = json.loads((Path(ckpt) / TRIAL_CHECKPOINT).read_text())
            best = (str(result.metrics["trial_id"]), dict(info["generator"]["config"]),
                    float(score))
    if best is None:
        raise BudgetExhausted(f"no tuning trial finished with a score (see {study_dir}/"
                              f"{SUBSAMPLED_EXPERIMENT}); the tuning phase's budget stays "
                              "spent; nothing is released")
    return best


def search_then_final_run(request: Any, study: StudySettings, subset: TuningSubset,
                          accountant: Any, *, searcher: Any, driver_cpus: float) -> dict[str, Any]:
    """The tuning phase with ``searcher`` (random stopping's, secret seed), then the
    final run of the best trial's extrapolated config; returns what the release
    states of it (``statement`` and ``run`` extras)."""
    import os

    import ray
    from ray import tune
    from ray.tune.schedulers import FIFOScheduler
    from ray.tune.search import ConcurrencyLimiter

    os.environ["TUNE_DISABLE_STRICT_METRIC_CHECKING"] = "1"
    limited = ConcurrencyLimiter(BudgetAwareSearch(searcher, study.study_name),
                                 max_concurrent=request.max_concurrent)
    q = subset.fraction
    _LOG.info(f"tuning phase: random stopping (mean {request.trials} trials) on a "
          f"secret Poisson subset of fraction {q:g} (plans sized for "
          f"{subset_size(study.data.num_records, q)} records)")
    tuner = tune.Tuner(
        trial_trainable(replace(study, role=SUBSAMPLED_SEARCH_TRIAL), driver_cpus=driver_cpus,
                        tuning_subset=subset),
        tune_config=tune.TuneConfig(search_alg=limited, scheduler=FIFOScheduler(),
                                    num_samples=-1,  # exactly K: the accountant stops it
                                    reuse_actors=True),  # as in raydp_synth.tune.tuner
        run_config=with_study_progress(study_run_config(SUBSAMPLED_EXPERIMENT, study), study),
    )
    with legacy_tune_output():  # the study's progress table (raydp_synth.tune.progress)
        grid = tuner.fit()
    if ray.get(accountant.status.remote())["can_grant"]:
        raise BudgetExhausted(
            f"the tuning phase stopped before its random number of trials was reached (see "
            f"{study.study_dir / SUBSAMPLED_EXPERIMENT}); no final run, nothing is released")
    trial_id, config, score = _best_tuning_trial(grid, study.study_dir)
    final_settings = full_config(config, q)
    _LOG.info(f"final run: the config of tuning trial {trial_id} (private score "
          f"{score:.4f} on the subset), extrapolated to all the data")
    # The final config is fixed (settings, not a search-space point): nothing is drawn.
    run_final(subsampled_final_settings(study, final_settings), {}, driver_cpus=driver_cpus)
    return {
        "result_grid": grid,
        "statement": {
            "scope": (f"the whole subsampled tuning (Koskela & Kulkarni 2023, variant 1): a "
                      f"random-stopping tuning phase on a secret Poisson subset of fraction "
                      f"{q:g} of the sensitive records, and the final run on all of them, "
                      "priced together by the study's accountant"),
            "selection": SUBSAMPLED_STUDY.name,
        },
        "run": {"selection": SUBSAMPLED_STUDY.name,
                "subsampled_search": {"experiment": SUBSAMPLED_EXPERIMENT,
                                      "config_from_trial": trial_id, "subset_score": score,
                                      "trial_config": config, "final_config": final_settings}},
    }
