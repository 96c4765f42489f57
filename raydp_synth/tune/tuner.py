"""The study's Tune experiment: a new one, or on ``--resume`` the one Tune saved.

How many trials an experiment samples and what a resume restores are its search
strategy's (:meth:`~raydp_synth.tune.strategies.base.SearchStrategy.num_samples`,
:meth:`~raydp_synth.tune.strategies.base.SearchStrategy.resumed_tuner`); the helpers
here read Tune's saved state for them. Imported once Ray is up (Ray Tune is loaded
by the functions, not at import).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raydp_synth.tune.optuna_journal import journal_storage, new_study_name
from raydp_synth.tune.optuna_searcher import optuna_search
from raydp_synth.tune.progress import legacy_tune_output, with_study_progress
from raydp_synth.tune.searcher import BudgetAwareSearch
from raydp_synth.tune.study_settings import TRIAL_DRIVER_CPUS, StudySettings
from raydp_synth.tune.trial import trial_trainable
from raydp_synth.tune.trial_metrics import study_run_config

if TYPE_CHECKING:
    from raydp_synth.tune.prepared_study import PreparedStudy
    from raydp_synth.tune.strategies.base import Phases, SearchStrategy, StudyOptions

_LOG = logging.getLogger(__name__)

__all__ = ["latest_experiment", "new_tuner", "one_experiment", "restored_tuner", "study_tuner",
           "take_back_draws_that_will_not_ask", "unfinished_trials"]


def one_experiment(strategy: SearchStrategy, request: StudyOptions, prepared: PreparedStudy,
                   settings: StudySettings, accountant: Any) -> Phases:
    """The phases of a search that is one Tune experiment of the study's trials
    (compose, random stopping): its tuner built now (:func:`study_tuner`), fitted when
    the phases run, printing the study's progress table
    (:mod:`raydp_synth.tune.progress`)."""
    tuner = study_tuner(strategy, request, prepared, settings, accountant)

    def fit() -> Any:
        with legacy_tune_output():
            return tuner.fit()

    return lambda: (None, fit() if tuner is not None else None)


def study_tuner(strategy: SearchStrategy, request: StudyOptions, prepared: PreparedStudy,
                settings: StudySettings, accountant: Any) -> Any:
    """Ray Tune's tuner of the study: on ``--resume``, what the strategy restores
    (Tune's saved experiment); else a new experiment (:func:`new_tuner`); None when
    no trial is left."""
    from ray.tune.search import ConcurrencyLimiter


    # Per-epoch reports carry the training metrics; the score comes with the last one.
    os.environ["TUNE_DISABLE_STRICT_METRIC_CHECKING"] = "1"
    trainable = trial_trainable(settings, driver_cpus=TRIAL_DRIVER_CPUS)
    if request.resume:
        tuner = strategy.resumed_tuner(request, latest_experiment(prepared.study_dir),
                                       trainable, accountant)
        if tuner is not None:
            return tuner

    def searcher(experiment: str) -> Any:
        """The new experiment's searcher; its Optuna study, named after the study
        and the experiment (``NAME:tune``), new in the study's journal."""
        storage = journal_storage(prepared.study_dir, create=True)
        inner = optuna_search(request, prepared.space, prepared.default, storage=storage,
                              study_name=new_study_name(storage, experiment,
                                                        study=prepared.name))
        return ConcurrencyLimiter(
            BudgetAwareSearch(inner, prepared.name,
                              failures_are_runs=request.failures_are_runs),
            max_concurrent=request.max_concurrent)

    return new_tuner(settings, trainable, searcher,
                     num_samples=strategy.num_samples(request, accountant))


def new_tuner(settings: StudySettings, trainable: Any, searcher: Callable[[str], Any], *,
              num_samples: int) -> Any:
    """A new Tune experiment of the study of ``num_samples`` trials (-1: until the
    searcher finishes): for a new study, or a resume whose Tune experiment cannot be
    restored (killed before Tune saved it), on the same ledger; None when
    ``num_samples`` is 0. The release considers every finished trial of the study,
    whatever experiment it ran in.
    """
    from ray import tune
    from ray.tune.schedulers import FIFOScheduler


    previous = [p for p in settings.study_dir.glob("tune*") if p.is_dir()]
    experiment = "tune" if not previous else f"tune-resume-{len(previous)}"
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
        # Tune's table with each trial's score and epsilon and the study's budget, and
        # a line per grant (raydp_synth/tune/progress.py).
        run_config=with_study_progress(study_run_config(experiment, settings), settings),
    )


def restored_tuner(latest: Path | None, trainable: Any) -> Any:
    """The study's latest Tune experiment (``latest``, :func:`latest_experiment`),
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

def take_back_draws_that_will_not_ask(accountant: Any, *, keep: set[str],
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

def latest_experiment(study_dir: Path) -> Path | None:
    """The study's latest Tune experiment folder (``tune``, then ``tune-resume-N``), or
    None before its first."""
    experiments = [p for p in study_dir.glob("tune*") if p.is_dir()]
    return max(experiments, key=experiment_order) if experiments else None


def unfinished_trials(experiment: Path) -> set[str]:
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


def experiment_order(path: Path) -> int:
    return int(path.name.rsplit("-", 1)[1]) if path.name.startswith("tune-resume-") else 0
