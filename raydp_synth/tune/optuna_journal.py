"""The study's Optuna studies, persisted in the study directory: ``STUDY/optuna.journal``.

Optuna's journal storage (``JournalStorage`` on a ``JournalFileBackend``): an
append-only log that ``optuna.load_study`` (:func:`load_optuna_study`),
``trials_dataframe()`` and ``optuna-dashboard STUDY/optuna.journal`` read. One Optuna
study per Tune experiment of the study, named after the study and the experiment's
folder, ``NAME:tune`` (``NAME:tune-resume-1``, ... and ``NAME:public-search`` under
``--tune-on-public``), its one objective named :data:`OBJECTIVE_NAME` (what
optuna-dashboard shows instead of "Objective 0"):
a searcher built for a new experiment starts from an empty history, as it did when
Optuna's study lived in memory only (so random stopping's samplers still draw every
trial afresh, see :func:`raydp_synth.tune.optuna_searcher.optuna_search`).

What it holds is what the searcher is told, which is no more than Tune already
records of each trial (docs/architecture.md, invariant 3): the hyperparameters the
sampler proposed (and the first point enqueued under compose), and the trial's
final ``score`` (a DP release in its plan, or a score on data declared public),
-1 for an invalid configuration, or a failed state for a trial refused a grant;
plus Optuna's bookkeeping (trial numbers, states, start and end times, the
parameters' distributions). No per-epoch metric reaches Optuna (the searchers
forward final results only), and no sampler seed: Optuna stores none, and random
stopping's secret seed stays in the sampler.

Curator-only, like ``STUDY/tune/`` and the ledger: the file is owner-only in the
owner-only study directory and never part of a release. It shows the number of
trials (random stopping's secret K, also in the ledger), every trial's score, and
their wall times (the timing side channel of docs/privacy.md, which Tune's own
results carry too).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from raydp_synth.errors import ConfigError

if TYPE_CHECKING:
    import optuna
    from optuna.storages import JournalStorage

__all__ = ["OBJECTIVE_NAME", "OPTUNA_JOURNAL", "create_named_study", "journal_storage",
           "load_optuna_study", "new_study_name"]

#: The journal file in the study directory.
OPTUNA_JOURNAL = "optuna.journal"
#: The name of the Optuna studies' one objective: each trial's final ``score``.
OBJECTIVE_NAME = "selection score"


def journal_storage(study_dir: str | os.PathLike[str], *, create: bool = False) -> JournalStorage:
    """The Optuna storage of ``study_dir``'s journal; ``create``: make the file
    (owner-only) if missing, as the study does before its searcher writes to it.

    Raises:
        ConfigError: no journal and ``create`` is False.
    """
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    path = Path(study_dir).expanduser() / OPTUNA_JOURNAL
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600, exist_ok=True)
        os.chmod(path, 0o600)
    elif not path.is_file():
        raise ConfigError(f"{path} does not exist; pass a study directory (STORAGE/NAME) "
                          "whose search ran with this version of raydp_synth")
    return JournalStorage(JournalFileBackend(str(path)))


def new_study_name(storage: JournalStorage, experiment: str, *, study: str | None = None) -> str:
    """``STUDY:experiment`` (``experiment`` without ``study``), or with ``-2``, ``-3``,
    ... if the journal already holds a study of that name (a session killed before
    Tune made the experiment's folder): a new experiment's searcher always starts
    from an empty history."""
    import optuna

    taken = set(optuna.get_all_study_names(storage))
    base = f"{study}:{experiment}" if study else experiment
    name, count = base, 1
    while name in taken:
        count += 1
        name = f"{base}-{count}"
    return name


def create_named_study(storage: JournalStorage, study_name: str) -> None:
    """Create the Optuna study ``study_name`` (maximising, as the searcher does) with
    its objective named :data:`OBJECTIVE_NAME`, for the searcher to load; a study of
    that name already there is left as it is. Public: a name, not a value."""
    import optuna

    if study_name in optuna.get_all_study_names(storage):
        return
    created = optuna.create_study(storage=storage, study_name=study_name, direction="maximize")
    with warnings.catch_warnings():  # experimental since Optuna 3.2, unchanged in 5.0
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        created.set_metric_names([OBJECTIVE_NAME])


def load_optuna_study(study_dir: str | os.PathLike[str],
                      study_name: str | None = None) -> optuna.Study:
    """The Optuna study of one of the study's Tune experiments (default: the one the
    search ran first, ``NAME:tune``, or ``NAME:public-search``), e.g. for
    ``trials_dataframe()``; ``study_name`` is the Optuna study's name, or the
    experiment's folder (``tune-resume-1``).

    Raises:
        ConfigError: no journal, or no Optuna study of that name in it.
    """
    import optuna

    storage = journal_storage(study_dir)
    names = optuna.get_all_study_names(storage)
    if study_name is None:
        study_name = names[0] if names else "tune"
    if study_name not in names:  # an experiment's folder: NAME:EXPERIMENT
        study_name = next((n for n in names if n.endswith(f":{study_name}")), study_name)
    if study_name not in names:
        raise ConfigError(f"{Path(study_dir) / OPTUNA_JOURNAL} holds no Optuna study "
                          f"{study_name!r}; it holds {', '.join(names) or 'none'}")
    return optuna.load_study(study_name=study_name, storage=storage)
