"""The Optuna samplers a study may use, and whether each adapts to earlier scores."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import optuna

from raydp_synth.errors import ConfigError
from raydp_synth.tune.search_space.anchored import DefaultAnchoredSampler
from raydp_synth.tune.search_space.dp_hypo import DPHyPOSampler

__all__ = ["SAMPLER_KINDS", "is_adaptive", "make_sampler"]

SAMPLER_KINDS = ("tpe", "random", "dp-hypo")


def make_sampler(
    kind: str,
    seed: int | Sequence[int],
    *,
    n_startup_trials: int | None = None,
    density_ratio: float = 2.0,
    distributions: Mapping[str, Any] | None = None,
    default_point: Mapping[str, Any] | None = None,
    default_share: float = 0.0,
) -> optuna.samplers.BaseSampler:
    """The Optuna sampler of a study: ``"tpe"`` (adaptive), ``"random"`` or
    ``"dp-hypo"`` (adaptive within a factor ``density_ratio`` of a fixed prior:
    :mod:`raydp_synth.tune.search_space.dp_hypo`).

    Args:
        kind: one of :data:`SAMPLER_KINDS`.
        seed: the sampler's seed (a seeded sampler draws the same sequence of trials):
            an int below 2**32 or a list of such words (NumPy's ``RandomState`` seeds).
            Public under compose; random stopping needs a secret one, drawn from OS
            entropy and written nowhere (:func:`raydp_synth.tune.optuna_searcher.optuna_search`
            builds the study's sampler and states why).
        n_startup_trials: TPE only: random trials before TPE starts modelling (Optuna's
            default is 10, so a study of 10 trials or fewer is a random search).
        density_ratio: dp-hypo only: c >= 1 (``--hypo-c``).
        distributions: dp-hypo only: the space's Optuna distributions by name
            (:func:`~raydp_synth.tune.search_space.dp_hypo.space_distributions`).
        default_point, default_share: random and dp-hypo only (``--default-share``):
            random: each trial is ``default_point`` with probability ``default_share``
            (:mod:`raydp_synth.tune.search_space.anchored`; 0: the RandomSampler);
            dp-hypo: the point is a candidate of prior weight ``default_share``
            (:mod:`raydp_synth.tune.search_space.dp_hypo`).

    Raises:
        ConfigError: unknown kind; a default share with another kind.
    """
    if default_share and kind not in ("random", "dp-hypo"):
        raise ConfigError(f"a default share needs the random or dp-hypo sampler, not {kind!r}")
    # Optuna hands the seed to NumPy's RandomState, which also takes a list of words;
    # its annotation says int only.
    seed = cast(int, seed)
    if kind == "tpe":
        if n_startup_trials is None:
            return optuna.samplers.TPESampler(seed=seed)
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=n_startup_trials)
    if kind == "random":
        if default_share > 0:
            return DefaultAnchoredSampler(default_point or {}, default_share, seed)
        return optuna.samplers.RandomSampler(seed=seed)
    if kind == "dp-hypo":
        if distributions is None:
            raise ConfigError("the dp-hypo sampler needs the search space's distributions")
        return DPHyPOSampler(distributions, density_ratio=density_ratio, seed=seed,
                             default_point=default_point, default_share=default_share)
    raise ConfigError(f"unknown sampler {kind!r}; choose one of {', '.join(SAMPLER_KINDS)}")


def is_adaptive(kind: str) -> bool:
    """Whether the sampler's next trial depends on earlier results.

    Random stopping (Papernot and Steinke 2022) needs a non-adaptive sampler
    (i.i.d. trials): ``random`` is not adaptive, ``tpe`` and ``dp-hypo`` are
    (``dp-hypo`` within a bounded density ratio, which DP-HyPO's bound prices).

    Raises:
        ConfigError: unknown kind.
    """
    if kind not in SAMPLER_KINDS:
        raise ConfigError(f"unknown sampler {kind!r}; choose one of {', '.join(SAMPLER_KINDS)}")
    return kind in ("tpe", "dp-hypo")
