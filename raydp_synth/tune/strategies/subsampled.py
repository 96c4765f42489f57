"""``--strategy subsampled``: random stopping on a secret Poisson subset, then one
final run on all the data (Koskela & Kulkarni 2023, "Practical Differentially
Private Hyperparameter Tuning with Subsampling", variant 1; the phases are
:mod:`raydp_synth.tune.subsampled_search`'s, docs/budget-pricing.md section 9).

Before Ray starts, the strategy calibrates E_ref (the default config scaled to the
subset, on its public size m = round(q n)) so that the amplified tuning phase costs
``--tune-share`` of the budget, and checks that the rest buys the default config's
final run (:func:`subsampled_plans`). Its trials have three roles
(:mod:`raydp_synth.tune.strategies.roles`): the study's own settings
(``SUBSAMPLED_STUDY``, running no trial), the tuning trials
(``SUBSAMPLED_SEARCH_TRIAL``, dominated by E_ref on the subset) and the final run
(``SUBSAMPLED_FINAL_TRIAL``, calibrated against the tuning curve).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from raydp_synth.errors import ConfigError
from raydp_synth.privacy.selection_score import NOISY_SCORE_STD, score_noise_std
from raydp_synth.privacy.subsampled_tuning import amplified_tuning_rdp, epsilon_from_rdp
from raydp_synth.tune.extrapolation import subset_config, subset_data, subset_size
from raydp_synth.tune.optuna_searcher import optuna_search
from raydp_synth.tune.planning import plan_for_subsampled_final, subsampled_reference_plan
from raydp_synth.tune.strategies.base import Phases, SearchStrategy
from raydp_synth.tune.strategies.roles import SUBSAMPLED_STUDY
from raydp_synth.tune.study_settings import TRIAL_DRIVER_CPUS
from raydp_synth.tune.subsampled_search import (
    check_tune_fraction,
    check_tune_share,
    search_then_final_run,
    secret_tuning_subset,
)

if TYPE_CHECKING:
    from raydp_synth.data import DataInfo, DatasetSplits
    from raydp_synth.methods.base import Method
    from raydp_synth.privacy.plan import PrivacyPlan
    from raydp_synth.tune.prepared_study import PreparedStudy
    from raydp_synth.tune.strategies.base import StudyOptions
    from raydp_synth.tune.study_settings import StudySettings

_LOG = logging.getLogger(__name__)

__all__ = ["SUBSAMPLED_RESTARTS", "Subsampled", "subsampled_plans"]

#: ``--default-share 1`` under ``--strategy subsampled``: nothing to select.
SUBSAMPLED_RESTARTS = ("--default-share 1 under --strategy subsampled selects nothing: "
                       "every tuning trial and the final run would be the default config; "
                       "use --strategy random-stopping --sampler random --default-share 1 "
                       "(the best of K restarts of the default) or one run "
                       "(python -m raydp_synth.train)")


class Subsampled(SearchStrategy):
    """Random stopping (mean ``--trials``) on a secret Poisson(``--tune-fraction``)
    subset, then the best config's final run on all the data; not resumable (the
    secret subset is not kept)."""

    name = "subsampled"
    pricing = "subsampled"
    role = SUBSAMPLED_STUDY
    samplers = ("random",)
    default_sampler = "random"
    uses_reference = True
    takes_default_share = True

    def check_request(self, request: StudyOptions) -> None:
        """``--strategy subsampled``'s own refusals (one line each, with the fix)."""
        check_tune_fraction(request.tune_fraction)
        check_tune_share(request.tune_share)
        if request.tune_on_public is not None:
            raise ConfigError("--strategy subsampled tunes on a private subset; "
                              "--tune-on-public tunes on public data: choose one")
        if request.resume:
            raise ConfigError("--strategy subsampled cannot --resume (its secret tuning "
                              "subset is not kept); start a new study with another --name "
                              "(the unfinished study's grants stay spent)")
        super().check_request(request)

    def sampler_refusal(self, sampler: str) -> str:
        return (f"--strategy subsampled needs i.i.d. tuning trials, but --sampler "
                f"{sampler} adapts (dp-hypo's density-ratio bound is not "
                "priced with subsampling); use --sampler random")

    def restarts_refusal(self) -> str | None:
        return SUBSAMPLED_RESTARTS

    def tune_fraction(self, request: StudyOptions) -> float | None:
        return request.tune_fraction

    def prepare(self, request: StudyOptions, prepared: PreparedStudy, *,
                splits: DatasetSplits, shape: float) -> PreparedStudy:
        reference, tuning_rdp = subsampled_plans(
            request, prepared.method, prepared.data, prepared.space, prepared.score_share,
            shape, num_val=prepared.num_val)
        return replace(prepared, reference=reference, tuning_rdp=tuning_rdp)

    def phases(self, request: StudyOptions, prepared: PreparedStudy,
               settings: StudySettings, accountant: Any) -> Phases:
        def run() -> tuple[dict[str, Any] | None, Any]:
            # X1: secret (OS entropy), held in memory and Ray's object store only.
            extra = search_then_final_run(
                request, settings,
                secret_tuning_subset(prepared.data.num_records, prepared.num_val,
                                     request.tune_fraction),
                accountant, driver_cpus=TRIAL_DRIVER_CPUS,
                searcher=optuna_search(request, prepared.space, prepared.default))
            return extra, extra.pop("result_grid", None)

        return run


def subsampled_plans(request: StudyOptions, method: Method, data: DataInfo, space: Any,
                     score_share: float, shape: float,
                     num_val: int) -> tuple[PrivacyPlan, tuple[float, ...]]:
    """``--strategy subsampled``'s E_ref (the default config scaled to the subset,
    on its public size m, calibrated so the amplified tuning phase costs
    ``tune_share x epsilon``) and the tuning curve; and the check, before Ray starts,
    that the rest of the budget buys the default config's final run (the
    accountant's own variant-1 price; a ConfigError, one line, otherwise). A warning
    says so when E_ref's selection score, on the subset's ``round(q n_val)``
    validation records, is too noisy to rank trials (:func:`_warn_noisy_tuning_score`)."""
    q = request.tune_fraction
    settings = {**space.fixed, "seed": request.seed}
    try:
        reference = subsampled_reference_plan(
            method, subset_config(method, settings, data, q), subset_data(data, q),
            target_epsilon=request.tune_share * request.epsilon, delta=request.delta,
            mean_trials=float(request.trials), shape=shape, tune_fraction=q,
            score_share=score_share)
    except ConfigError as err:
        raise ConfigError(f"--strategy subsampled: the tuning phase's share "
                          f"{request.tune_share:g} of epsilon {request.epsilon:g} cannot pay for "
                          f"mean {request.trials} trials on q={q:g} of the data ({err})") from None
    _warn_noisy_tuning_score(request, reference, num_val)
    curve = amplified_tuning_rdp(reference.event(), mean=float(request.trials), shape=shape,
                                 tune_fraction=q)
    tuning_epsilon = epsilon_from_rdp(curve, request.delta)
    if not tuning_epsilon < request.epsilon:
        raise ConfigError(f"--strategy subsampled: the tuning phase alone would cost epsilon "
                          f"{tuning_epsilon:.4g} of {request.epsilon:g}; lower --tune-share")
    try:
        final = plan_for_subsampled_final(
            method, method.make_config(settings, data), data, tuning_rdp=tuple(curve),
            target_epsilon=request.epsilon, delta=request.delta, score_share=score_share)
    except ConfigError as err:
        raise ConfigError(f"--strategy subsampled: what the tuning phase leaves of epsilon "
                          f"{request.epsilon:g} cannot pay for the final run ({err}); lower "
                          "--tune-share or raise --epsilon") from None
    _LOG.info(f"subsampled tuning: tuning phase epsilon {tuning_epsilon:.4f} "
              f"(q={q:g}, mean {request.trials} trials, amplified), the default config's final run "
              f"{final.epsilon():.4f} alone, {request.epsilon:g} composed")
    return reference, tuple(float(v) for v in curve)


def _warn_noisy_tuning_score(request: StudyOptions, reference: PrivacyPlan,
                             num_val: int) -> None:
    """Warn, before any budget is spent, when a default tuning trial's selection
    score (E_ref's score mechanism, divided by the public subset size
    ``round(q n_val)`` as every tuning trial divides it) has a noise std above
    :data:`~raydp_synth.privacy.selection_score.NOISY_SCORE_STD`: the tuning phase
    would then pick its winner by noise. Public facts only: the plan, q and the
    split's size."""
    divisor = subset_size(num_val, request.tune_fraction)
    std = score_noise_std(reference, divisor)
    if std is not None and std > NOISY_SCORE_STD:
        _LOG.warning(
            f"subsampled tuning scores each trial on about {divisor} validation "
            f"records with noise std {std:.2f} (a default trial), so two trials whose "
            f"accuracies differ by less than about {2 * std:.2f} are often misranked; raise "
            "--tune-fraction or --tune-share, or use --strategy compose")
