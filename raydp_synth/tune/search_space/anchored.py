"""A non-adaptive prior with an atom on the method's default configuration.

``--default-share P`` under ``--strategy random-stopping`` or ``subsampled``: each
trial, independently, is the method's default configuration (the values of it that
the search space holds) with probability P, and a draw of Optuna's RandomSampler
from the whole space otherwise.

Why. Compose runs the default first (:func:`raydp_synth.tune.optuna_searcher.first_points`), so
a small compose study cannot release worse than the default's own trial. Random
stopping cannot do that: Papernot & Steinke (2022, "Hyperparameter Tuning with Renyi
Differential Privacy") price the best of K runs only if every run draws its
hyperparameters i.i.d. from one fixed distribution, and a fixed first trial breaks
that. Random draws of a search space are mostly poor (docs/benchmarks.md, section
4.3), so a random-stopping or subsampled search often selects among poor
configurations only.

The privacy argument. The mixture ``P * delta_default + (1 - P) * prior`` is one
fixed distribution: the default point comes from the method's config and the space
(public), P from the command line, and neither depends on the data or on any
trial's result. Each trial's coin is drawn from the sampler's own generator, seeded
by the study's secret seed (:func:`raydp_synth.tune.optuna_searcher.optuna_search`), before the
trial and independently of every other trial; so the trials stay i.i.d. runs of one
randomised mechanism and random stopping's pricing applies unchanged (the theorem
holds for any such distribution). With P = 0 this is the RandomSampler.

With P = 1 every trial is the default configuration: random stopping then releases
the best of K restarts of the default, chosen by their private scores. Each restart
draws its own initialisation from OS entropy
(:meth:`raydp_synth.tune.study_settings.StudySettings.trial_seed`) as well as its own
secret DP randomness. That is the "repeat" of Papernot & Steinke's repeat-and-select,
whose theorem prices K i.i.d. runs of any randomised mechanism; a point mass is one
fixed distribution like any other, so the pricing is again unchanged. It pays where
one configuration's runs spread widely at one epsilon (docs/benchmarks.md, section
4.3). Only random stopping takes it (the search strategies refuse it elsewhere,
:mod:`raydp_synth.tune.strategies`): under subsampled tuning it would select nothing,
and under DP-HyPO it would leave nothing to adapt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial

from raydp_synth.errors import ConfigError

__all__ = ["DP_HYPO_RESTARTS", "DefaultAnchoredSampler", "check_default_point",
           "check_restarts", "check_restarts_point", "default_value",
           "validate_default_share"]

#: ``--default-share 1`` with ``--sampler dp-hypo``: a prior of the default alone.
DP_HYPO_RESTARTS = ("--default-share 1 leaves --sampler dp-hypo a prior of the default "
                    "config alone: nothing to adapt, at DP-HyPO's higher price; use "
                    "--sampler random (the best of K restarts of the default, priced by "
                    "random stopping)")


def validate_default_share(share: float) -> float:
    """``--default-share``: a probability in [0, 1] (1: restarts of the default only).

    Raises:
        ConfigError: outside [0, 1] or not a number.
    """
    if not isinstance(share, (int, float)) or not 0 <= share <= 1:
        raise ConfigError(f"--default-share {share!r} must be in [0, 1]: the probability "
                          "that a trial is the default configuration (e.g. 0.5; 1: "
                          "restarts of the default only)")
    return float(share)


def check_restarts(share: float, *, refusal: str | None, sampler: str) -> None:
    """``--default-share 1`` (restarts of the default only) is random stopping with the
    random sampler; elsewhere it would spend budget on choosing nothing.

    Args:
        refusal: the search strategy's reason to refuse restarts, or None
            (:meth:`~raydp_synth.tune.strategies.base.SearchStrategy.restarts_refusal`:
            subsampled tuning's).

    Raises:
        ConfigError: ``share == 1`` where the strategy refuses it, or with dp-hypo.
    """
    if share != 1:
        return
    if refusal is not None:
        raise ConfigError(refusal)
    if sampler == "dp-hypo":
        raise ConfigError(DP_HYPO_RESTARTS)


def check_default_point(default_point: Mapping[str, Any] | None, share: float) -> None:
    """A share above 0 needs a default point (some value of the default config in the
    space).

    Raises:
        ConfigError: ``share > 0`` and no point.
    """
    if share > 0 and not default_point:
        raise ConfigError("--default-share: no value of the method's default config lies "
                          "in the search space; widen the space or drop --default-share")


def check_restarts_point(params: Mapping[str, Any], default_point: Mapping[str, Any]) -> None:
    """``--default-share 1`` promises restarts of the default config: every sampled
    param (``params``, a search space's, by name, each with its ``trial_keys``) must
    hold the default's value. A param whose default lies outside its range would
    otherwise be drawn at random in every restart (the trials stay i.i.d., so the
    pricing would hold, but they would not be restarts of the default).

    Raises:
        ConfigError: some param lacks the default's value, named with the fix.
    """
    missing = [name for name, param in params.items()
               if not set(param.trial_keys) <= set(default_point)]
    if missing:
        raise ConfigError(
            f"--default-share 1 (restarts of the default config): the default value of "
            f"{', '.join(missing)} lies outside the search space, so every restart would "
            f"draw it at random; fix it with --set {missing[0]}=VALUE or widen its range "
            "in the search space to hold the default")


def default_value(name: str, dist: BaseDistribution, value: Any) -> Any:
    """The default's ``value`` of param ``name``, which ``dist`` must hold.

    Raises:
        ConfigError: outside ``dist``.
    """
    try:
        inside = dist._contains(dist.to_internal_repr(value))
    except ValueError:
        inside = False
    if not inside:
        raise ConfigError(f"--default-share: the default {name}={value!r} is outside "
                          f"the space's {dist}")
    return value


def _stream(words: Sequence[int], index: int) -> list[int]:
    return [int(w) for w in np.random.SeedSequence([*words, index]).generate_state(4)]


class DefaultAnchoredSampler(optuna.samplers.BaseSampler):
    """Optuna sampler: the default point with probability ``share``, else random.

    Args:
        default_point: a trial config of the space holding the method's defaults
            (:meth:`~raydp_synth.tune.search_space.space.SearchSpace.default_point`);
            a param it lacks is drawn from the prior in every trial.
        share: P in [0, 1] (1: every trial is the default point).
        seed: an int or a list of 32-bit words (secret under random stopping).
    """

    def __init__(self, default_point: Mapping[str, Any], share: float,
                 seed: int | Sequence[int]) -> None:
        self.share = validate_default_share(share)
        check_default_point(default_point, self.share)
        self.default_point = dict(default_point)
        words = [seed] if isinstance(seed, int) else list(seed)
        # Two streams of one secret seed, the coins' and the prior's, each a RandomState
        # seeded with four 32-bit words hashed from it (as the study seeds a
        # RandomSampler: one int would be 32 bits). Neither keeps the seed itself,
        # which Tune would otherwise pickle with the searcher.
        self._coins = np.random.RandomState(_stream(words, 1))
        self._prior = optuna.samplers.RandomSampler(
            seed=_stream(words, 2))  # type: ignore[arg-type]
        self._is_default: dict[int, bool] = {}

    def is_default(self, trial_number: int) -> bool:
        """Whether trial ``trial_number``'s coin chose the default point."""
        return self._is_default.get(trial_number, False)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        # One coin per trial, before any of its params: independent of all results.
        self._is_default[trial.number] = bool(self._coins.random_sample() < self.share)

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return {}

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return {}

    def sample_independent(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        if self.is_default(trial.number) and param_name in self.default_point:
            return default_value(param_name, param_distribution,
                                 self.default_point[param_name])
        return self._prior.sample_independent(study, trial, param_name, param_distribution)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial,
                    state: optuna.trial.TrialState, values: Sequence[float] | None) -> None:
        self._is_default.pop(trial.number, None)
