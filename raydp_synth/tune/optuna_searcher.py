"""The study's Optuna searcher: its sampler (and that sampler's seed), its space and
the points it runs first (Ray Tune's ``OptunaSearch``, before the study's budget and
concurrency wrappers, :mod:`raydp_synth.tune.searcher`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from raydp_synth.config import config_to_dict
from raydp_synth.privacy.secret_rng import secret_seed_words
from raydp_synth.tune.optuna_journal import create_named_study
from raydp_synth.tune.search_space import make_sampler
from raydp_synth.tune.search_space.dp_hypo import space_distributions

if TYPE_CHECKING:
    from raydp_synth.tune.search_space import SearchSpace
    from raydp_synth.tune.strategies.base import StudyOptions

__all__ = ["default_prior_point", "first_points", "optuna_search"]


def first_points(request: StudyOptions, space: SearchSpace,
                 default: Any) -> list[dict[str, Any]] | None:
    """What the search runs first: ``default``, the method's default config (its
    values that the space holds), so that a small study starts from the known-good
    configuration.

    Only where the strategy runs it (``runs_default_first``: compose, whose
    composition covers trials chosen in any (adaptive) way). Random stopping
    (Papernot and Steinke) needs every trial to draw its hyperparameters from one
    fixed distribution, which a fixed first trial breaks. Not on --resume (the
    default ran, or Tune's restored searcher holds it).
    """
    if not request.search_strategy.runs_default_first or request.resume:
        return None
    point = space.default_point(config_to_dict(default))
    return [point] if point else None


def default_prior_point(request: StudyOptions, space: SearchSpace,
                        default: Any) -> dict[str, Any] | None:
    """``--default-share``'s atom: the default config's values that the space holds
    (public: the method's config and the space), or None without ``--default-share``."""
    if request.default_share == 0:
        return None
    return space.default_point(config_to_dict(default))


def optuna_search(request: StudyOptions, space: SearchSpace, default: Any, *,
                  storage: Any = None, study_name: str | None = None) -> Any:
    """The study's Optuna searcher (Ray Tune's ``OptunaSearch``), before the budget
    and concurrency wrappers: the space, the sampler and the first points; its
    Optuna study in ``storage`` under ``study_name`` (the study's journal,
    :mod:`raydp_synth.tune.optuna_journal`; None: in memory).

    The sampler's seed depends on the strategy (``secret_sampler_seed``):

    * ``compose`` (and the public search of ``--tune-on-public``): the public
      ``--seed``, so that a study can be reproduced. Composition prices every
      granted plan whatever chose it, so a public (even adaptive) choice of
      configurations costs nothing.
    * random stopping (and subsampled tuning's tuning phase): a fresh 128-bit seed
      from OS entropy (:mod:`secrets`), drawn here, for every sampler built (a new
      study, or a resume whose Tune state is gone). Papernot & Steinke (2022, "Hyperparameter Tuning with Renyi
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

    if storage is not None and study_name is not None:  # its objective named, for the dashboard
        create_named_study(storage, study_name)
    # TPE's default of 10 random start-up trials would make a small study a random search.
    startup = min(10, max(2, request.trials // 3)) if request.sampler == "tpe" else None
    # The secret seed (see above): never bind it to a name, log or store it.
    sampler = make_sampler(
        request.sampler,
        secret_seed_words() if request.search_strategy.secret_sampler_seed else request.seed,
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
