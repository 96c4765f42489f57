"""``dp-hypo``: an adaptive Optuna sampler whose every proposal stays within a factor
c of one fixed, data-independent prior (Wang, Gao, Zhang, Su and Shen, 2023, "DP-HyPO:
An Adaptive Private Hyperparameter Optimization Framework").

The prior. At construction the sampler draws ``n_candidates`` configurations i.i.d.
from the search space's own distributions (the prior of Optuna's RandomSampler:
uniform, log-uniform, a uniform grid, a uniform choice) with its seed, which under
random stopping is secret (:func:`raydp_synth.tune.study.optuna_search`). Given the
candidates, pi_0 is the uniform distribution over them: it depends neither on the
data nor on any trial's result.

The proposal. Before each trial, a kernel score model (Nadaraya-Watson, Gaussian
kernel on the params scaled to [0, 1], log scale for log params, 0/1 distance for
choices) predicts every candidate's score from the completed trials; the scores are
standardised and turned into a softmax ``p``. ``p`` is then projected onto the box
``[1/(c m), c/m]`` of the simplex (the Euclidean projection:
``w_i = clip(p_i + nu, lo, hi)`` with nu found by bisection so that the weights sum
to one, with a relative slack of 1e-9 inside the box so that the final
renormalisation cannot leave it). So ``w_i / pi_0(i) = m w_i`` lies in [1/c, c] for
every candidate and every history: DP-HyPO's condition with c_low = 1/c and
c_high = c, priced by :mod:`raydp_synth.privacy.adaptive_tuning`. With c = 1 the box
is a point and every draw is uniform over the candidates: the non-adaptive random
search of Papernot & Steinke (2022).

A flat space only (every param suggested in every trial, as the built-in spaces are);
a param outside the candidates' space is refused rather than drawn off the prior.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import FrozenTrial, TrialState

from raydp_synth.errors import ConfigError, PrivacyInvariantError

__all__ = [
    "DPHyPOSampler",
    "draw_from_prior",
    "project_to_ratio_box",
    "space_distributions",
]

#: Relative slack inside the box [1/(c m), c/m] (see the module docstring).
_BOX_SLACK = 1e-9


def space_distributions(define_by_run: Callable[[optuna.Trial], Any]) -> dict[str, BaseDistribution]:
    """The Optuna distributions that ``define_by_run`` suggests, by param name (it is
    run once on a throwaway in-memory trial: no data, no result)."""
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
        trial = study.ask()
        define_by_run(trial)
        return dict(trial.distributions)
    finally:
        optuna.logging.set_verbosity(verbosity)


def draw_from_prior(dist: BaseDistribution, rng: np.random.Generator) -> Any:
    """One draw of ``dist``'s prior, as Optuna's RandomSampler defines it."""
    if isinstance(dist, CategoricalDistribution):
        return dist.choices[int(rng.integers(len(dist.choices)))]
    if isinstance(dist, IntDistribution):
        if dist.log:
            value = math.exp(rng.uniform(math.log(dist.low - 0.5), math.log(dist.high + 0.5)))
            return int(min(dist.high, max(dist.low, round(value))))
        return int(dist.low + dist.step * rng.integers((dist.high - dist.low) // dist.step + 1))
    if isinstance(dist, FloatDistribution):
        if dist.log:
            return float(math.exp(rng.uniform(math.log(dist.low), math.log(dist.high))))
        if dist.step is not None:
            count = int(round((dist.high - dist.low) / dist.step))
            return float(min(dist.high, dist.low + dist.step * rng.integers(count + 1)))
        return float(rng.uniform(dist.low, dist.high))
    raise ConfigError(f"the dp-hypo sampler cannot draw from {type(dist).__name__}")


def _coordinate(dist: BaseDistribution, value: Any) -> float:
    """``value`` scaled to [0, 1] (log scale for log params); a choice's index."""
    if isinstance(dist, CategoricalDistribution):
        return float(dist.choices.index(value))
    assert isinstance(dist, (IntDistribution, FloatDistribution))
    low, high, x = float(dist.low), float(dist.high), float(value)
    if dist.log:
        low, high, x = math.log(low), math.log(high), math.log(x)
    return 0.0 if high == low else (x - low) / (high - low)


def project_to_ratio_box(proposal: np.ndarray, c: float) -> np.ndarray:
    """The weights ``clip(proposal + nu, lo, hi)`` summing to one (the Euclidean
    projection onto the box within the simplex), with
    ``lo = 1/(c m)`` and ``hi = c/m`` (shrunk by a relative 1e-9): every weight is
    within a factor c of the uniform 1/m. c = 1 gives the uniform weights exactly.

    Raises:
        PrivacyInvariantError: a weight left the box (never, by construction).
    """
    p = np.asarray(proposal, dtype=np.float64)
    m = p.size
    if c == 1:
        return np.full(m, 1.0 / m)
    if m == 0 or not np.all(np.isfinite(p)) or np.any(p < 0) or p.sum() <= 0:
        raise PrivacyInvariantError("the dp-hypo proposal must be finite, >= 0 and not all 0")
    slack = min(_BOX_SLACK, (c - 1) / (4 * c))
    lo, hi = (1 + slack) / (c * m), (1 - slack) * c / m
    low_nu, high_nu = -float(p.max()), hi  # sums m*lo <= 1 and m*hi >= 1
    for _ in range(200):
        nu = (low_nu + high_nu) / 2
        if np.clip(p + nu, lo, hi).sum() < 1:
            low_nu = nu
        else:
            high_nu = nu
    weights = np.clip(p + high_nu, lo, hi)
    weights = weights / weights.sum()
    ratio = weights * m
    if not (np.all(ratio >= 1 / c) and np.all(ratio <= c)):
        raise PrivacyInvariantError(f"dp-hypo weights left the ratio box [1/{c}, {c}]")
    return weights


class DPHyPOSampler(optuna.samplers.BaseSampler):
    """Optuna sampler ``dp-hypo`` (see the module docstring).

    Args:
        distributions: the space's distributions by param name
            (:func:`space_distributions`).
        density_ratio: c >= 1, the bound on every proposal's ratio to the prior.
        seed: an int or a list of ints (NumPy ``SeedSequence`` entropy); secret
            under random stopping.
        n_candidates: m, the size of the candidate set drawn from the prior.
        bandwidth: the Gaussian kernel's width on the [0, 1]-scaled params.
        temperature: the softmax temperature on standardised predicted scores.
    """

    def __init__(
        self,
        distributions: Mapping[str, BaseDistribution],
        *,
        density_ratio: float,
        seed: int | Sequence[int],
        n_candidates: int = 128,
        bandwidth: float = 0.2,
        temperature: float = 0.5,
    ) -> None:
        from raydp_synth.privacy.adaptive_tuning import validate_density_ratio

        self.density_ratio = validate_density_ratio(density_ratio)
        if not distributions:
            raise ConfigError("the dp-hypo sampler needs a search space with sampled params")
        if n_candidates < 1 or not bandwidth > 0 or not temperature > 0:
            raise ConfigError("dp-hypo needs n_candidates >= 1, bandwidth > 0, temperature > 0")
        self._distributions = dict(distributions)
        self._rng = np.random.default_rng(list(seed) if not isinstance(seed, int) else seed)
        self.candidates: list[dict[str, Any]] = [
            {name: draw_from_prior(d, self._rng) for name, d in self._distributions.items()}
            for _ in range(n_candidates)
        ]
        self._bandwidth = float(bandwidth)
        self._temperature = float(temperature)

    # -- the proposal --------------------------------------------------------------

    def _coords(self, params: Mapping[str, Any]) -> np.ndarray:
        return np.array([_coordinate(d, params[n]) for n, d in self._distributions.items()])

    def _distance2(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Squared distances between rows of ``a`` and of ``b`` (choices: 0/1)."""
        diff = a[:, None, :] - b[None, :, :]
        categorical = np.array([isinstance(d, CategoricalDistribution)
                                for d in self._distributions.values()])
        diff = np.where(categorical, (diff != 0).astype(np.float64), diff)
        return np.asarray((diff ** 2).sum(axis=-1))

    def proposal(self, history: Sequence[tuple[Mapping[str, Any], float]]) -> np.ndarray:
        """The weights over :attr:`candidates` after ``history`` ((params, score),
        higher is better); always within [1/c, c] times the uniform 1/m."""
        m = len(self.candidates)
        usable = [(p, s) for p, s in history
                  if math.isfinite(s) and all(n in p for n in self._distributions)]
        if not usable or self.density_ratio == 1:
            return project_to_ratio_box(np.full(m, 1.0 / m), self.density_ratio)
        cand = np.stack([self._coords(p) for p in self.candidates])
        seen = np.stack([self._coords(p) for p, _ in usable])
        scores = np.array([s for _, s in usable])
        kernel = np.exp(-self._distance2(cand, seen) / (2 * self._bandwidth ** 2))
        mass = kernel.sum(axis=1)
        predicted = np.where(mass > 1e-300, kernel @ scores / np.maximum(mass, 1e-300),
                             scores.mean())
        spread = scores.std() if scores.size > 1 and scores.std() > 0 else 1.0
        z = (predicted - scores.mean()) / spread / self._temperature
        p = np.exp(z - z.max())
        return project_to_ratio_box(p / p.sum(), self.density_ratio)

    # -- Optuna's sampler interface --------------------------------------------------

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return dict(self._distributions)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        if not search_space:
            return {}
        sign = 1.0 if study.direction == optuna.study.StudyDirection.MAXIMIZE else -1.0
        history = [
            (t.params, sign * float(t.value))
            for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if t.value is not None
        ]
        weights = self.proposal(history)
        index = int(self._rng.choice(len(self.candidates), p=weights))
        return dict(self.candidates[index])

    def sample_independent(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        raise ConfigError(
            f"the dp-hypo sampler draws whole configurations from its candidates; param "
            f"{param_name!r} ({param_distribution}) is not in the space it was built for "
            "(a conditional or changed search space): use --sampler random"
        )
