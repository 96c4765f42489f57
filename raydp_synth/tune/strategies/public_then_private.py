"""``--tune-on-public DATASET``: a search on data declared public at no privacy cost,
then one private run of its best config with the whole budget (the phases are
:mod:`raydp_synth.tune.public_search`'s, docs/budget-pricing.md section 6.4).

The accountant prices one compose trial (the final run); the search's trials
(:data:`~raydp_synth.tune.strategies.roles.PUBLIC_SEARCH_TRIAL`) ask for no grant, their plans single runs at the
study's budget for DATASET's size, scored on DATASET's held-out split without
noise. The search may adapt (any sampler but dp-hypo: it sees public data only) and
starts from the default config with the public ``--seed``, as compose does.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from raydp_synth.errors import ConfigError
from raydp_synth.tune.optuna_journal import journal_storage, new_study_name
from raydp_synth.tune.optuna_searcher import optuna_search
from raydp_synth.tune.public_search import (
    PUBLIC_EXPERIMENT,
    check_tune_on_public,
    prepare_public_search,
    search_then_final_run,
)
from raydp_synth.tune.strategies.base import FirstTrial, Phases, SearchStrategy
from raydp_synth.tune.strategies.compose import Compose
from raydp_synth.tune.strategies.roles import COMPOSE_TRIAL
from raydp_synth.tune.study_settings import TRIAL_DRIVER_CPUS

if TYPE_CHECKING:
    from raydp_synth.data import DatasetSplits
    from raydp_synth.tune.prepared_study import PreparedStudy
    from raydp_synth.tune.strategies.base import StudyOptions
    from raydp_synth.tune.study_settings import StudySettings

__all__ = ["PublicThenPrivate"]


class PublicThenPrivate(SearchStrategy):
    """``--tune-on-public``'s search, then its final run (priced as one compose
    trial); not resumable."""

    name = "public-then-private"
    pricing = Compose.pricing
    role = COMPOSE_TRIAL
    samplers = Compose.samplers
    default_sampler = Compose.default_sampler
    selects = "tune_on_public"
    secret_sampler_seed = False
    runs_default_first = True
    hides_trial_count = False
    release_scope = "the final run"

    def check_request(self, request: StudyOptions) -> None:
        """Its private side is one compose run: no other ``--strategy``, no resume;
        DATASET (parsed, whole, by the request) is not the sensitive data."""
        if request.strategy != Compose.name:
            raise ConfigError(f"--tune-on-public searches at no privacy cost and releases one "
                              f"private run; --strategy {request.strategy} prices a private "
                              "search and does not apply: drop it")
        assert request.tune_on_public is not None  # what selects this strategy
        check_tune_on_public(request.tune_on_public, dataset=request.dataset,
                             resume=request.resume)
        super().check_request(request)

    def prepare(self, request: StudyOptions, prepared: PreparedStudy, *,
                splits: DatasetSplits, shape: float) -> PreparedStudy:
        """DATASET's public facts, and the search space fitted to them (the space
        searched)."""
        assert request.tune_on_public is not None  # what selects this strategy
        search = prepare_public_search(
            spec=request.tune_on_public, dataset=request.dataset, method=prepared.method,
            sensitive=prepared.data, sensitive_splits=splits, public=prepared.public,
            search_space=request.search_space, settings=request.settings, seed=request.seed)
        return replace(prepared, public_search=search, space=search.space)

    def first_trial(self, request: StudyOptions, prepared: PreparedStudy) -> FirstTrial | None:
        """The final run: one compose trial at the whole budget."""
        return FirstTrial(role=COMPOSE_TRIAL, trials=1, phrase=Compose().trial_phrase(1))

    def priced_trials(self, request: StudyOptions) -> int:
        return 1  # the final run

    def describe(self, request: StudyOptions, prepared: PreparedStudy) -> str:
        return (f"study {prepared.name}: {prepared.method.name}, {request.trials} trials "
                f"on the public {request.tune_on_public}, then one run on {request.dataset} "
                f"at epsilon={request.epsilon:g} delta={request.delta:g}")

    def phases(self, request: StudyOptions, prepared: PreparedStudy,
               settings: StudySettings, accountant: Any) -> Phases:
        def run() -> tuple[dict[str, Any] | None, Any]:
            search = prepared.public_search
            storage = journal_storage(prepared.study_dir, create=True)
            extra = search_then_final_run(
                request, settings, search, accountant, driver_cpus=TRIAL_DRIVER_CPUS,
                searcher=optuna_search(request, search.space, search.default, storage=storage,
                                       study_name=new_study_name(storage, PUBLIC_EXPERIMENT,
                                                                 study=prepared.name)))
            return extra, extra.pop("result_grid", None)

        return run
