"""``dp-hypo``: an adaptive Optuna sampler whose every proposal stays within a factor
c of one fixed, data-independent prior (Wang, Gao, Zhang, Su and Shen, 2023, "DP-HyPO:
An Adaptive Private Hyperparameter Optimization Framework").

The prior. At construction the sampler draws ``n_candidates`` configurations i.i.d.
from the search space's own distributions (the prior of Optuna's RandomSampler:
uniform, log-uniform, a uniform grid, a uniform choice) with its seed, which under
random stopping is secret (:func:`raydp_synth.tune.optuna_searcher.optuna_search`). Given the
m candidates, pi_0 is the uniform distribution over them. With a default share P
(``--default-share``, :mod:`raydp_synth.tune.search_space.anchored`), pi_0 is the
uniform distribution over a multiset of M = m + r entries: the m draws and r copies
of the method's default configuration, r = round(P m / (1 - P)) (at least 1), so that
the default's prior weight r/M is P up to that rounding (exactly 1/2 at P = 1/2 and
m = 128: 128 copies). The sampler holds the r copies as one candidate (candidate 0)
of prior weight r/M; that is the same distribution, and the same constraint: the box
below bounds the copies' total weight by [r/(c M), c r/M], and every total in that
range splits equally into copies within their own boxes [1/(c M), c/M]. Either way
pi_0 is uniform over a finite (multi)set and depends neither on the data nor on any
trial's result (the default comes from the method's config and the space, P from the
command line, the draws from the seed).

The proposal. Before each trial, a kernel score model (Nadaraya-Watson, Gaussian
kernel on the params scaled to [0, 1], log scale for log params, 0/1 distance for
choices) predicts every candidate's score from the completed trials; the scores are
standardised and tilt the prior: ``p_i`` proportional to ``pi_0(i) exp(z_i)``. ``p``
is then projected onto the box ``[pi_0(i)/c, c pi_0(i)]`` of the simplex (the
Euclidean projection: ``w_i = clip(p_i + nu, lo_i, hi_i)`` with nu found by bisection
so that the weights sum to one, with a relative slack of 1e-9 inside the box so that
the final renormalisation cannot leave it). So ``w_i / pi_0(i)`` lies in [1/c, c] for
every candidate and every history: DP-HyPO's condition with c_low = 1/c and
c_high = c, priced by :mod:`raydp_synth.privacy.adaptive_tuning` (the bound depends
on c only, so the default's copies change nothing in the price). With c = 1 the
box is a point and every draw is pi_0's: the non-adaptive random search of Papernot &
Steinke (2022), anchored or not.

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
from raydp_synth.privacy.adaptive_tuning import validate_density_ratio
from raydp_synth.tune.search_space.anchored import (
    DP_HYPO_RESTARTS,
    check_default_point,
    default_value,
    validate_default_share,
)

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


def project_to_ratio_box(proposal: np.ndarray, c: float,
                         prior: np.ndarray | None = None) -> np.ndarray:
    """The weights ``clip(proposal + nu, lo, hi)`` summing to one (the Euclidean
    projection onto the box within the simplex), with ``lo = prior/c`` and
    ``hi = c prior`` (shrunk by a relative 1e-9): every weight is within a factor c
    of the prior's (None: the uniform 1/m). c = 1 gives the prior exactly.

    Raises:
        PrivacyInvariantError: a prior that is not a distribution with every weight
            above 0, or a weight that left the box (never, by construction).
    """
    p = np.asarray(proposal, dtype=np.float64)
    m = p.size
    pi0 = np.full(m, 1.0 / m) if prior is None else np.asarray(prior, dtype=np.float64)
    if m == 0 or pi0.shape != p.shape or not np.all(pi0 > 0) \
            or abs(float(pi0.sum()) - 1) > 1e-9:
        raise PrivacyInvariantError("the dp-hypo prior must give every candidate a weight "
                                    "above 0 and sum to one")
    if c == 1:
        return pi0.copy()
    if not np.all(np.isfinite(p)) or np.any(p < 0) or p.sum() <= 0:
        raise PrivacyInvariantError("the dp-hypo proposal must be finite, >= 0 and not all 0")
    slack = min(_BOX_SLACK, (c - 1) / (4 * c))
    lo, hi = (1 + slack) * pi0 / c, (1 - slack) * c * pi0
    low_nu, high_nu = -float(p.max()), float(hi.max())  # sums: sum(lo) <= 1 <= sum(hi)
    for _ in range(200):
        nu = (low_nu + high_nu) / 2
        if np.clip(p + nu, lo, hi).sum() < 1:
            low_nu = nu
        else:
            high_nu = nu
    weights = np.clip(p + high_nu, lo, hi)
    weights = weights / weights.sum()
    ratio = weights / pi0
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
        default_point, default_share: the default's atom (``--default-share``): a
            trial config of the space holding the method's defaults and P in [0, 1) (1, a
            prior of the default alone, leaves nothing to adapt and is refused);
            the point is candidate 0, of prior weight r/(m + r) with
            r = round(P m/(1 - P)) copies (a param it lacks is drawn from the prior
            once, with the candidates). P = 0: no atom.
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
        default_point: Mapping[str, Any] | None = None,
        default_share: float = 0.0,
    ) -> None:
        self.density_ratio = validate_density_ratio(density_ratio)
        if not distributions:
            raise ConfigError("the dp-hypo sampler needs a search space with sampled params")
        if n_candidates < 1 or not bandwidth > 0 or not temperature > 0:
            raise ConfigError("dp-hypo needs n_candidates >= 1, bandwidth > 0, temperature > 0")
        self._distributions = dict(distributions)
        self._rng = np.random.default_rng(list(seed) if not isinstance(seed, int) else seed)
        share = validate_default_share(default_share)
        if share == 1:
            raise ConfigError(DP_HYPO_RESTARTS)
        check_default_point(default_point, share)
        self.candidates: list[dict[str, Any]] = [
            {name: draw_from_prior(d, self._rng) for name, d in self._distributions.items()}
            for _ in range(n_candidates)
        ]
        #: pi_0 over :attr:`candidates` (see the module docstring).
        self.prior = np.full(n_candidates, 1.0 / n_candidates)
        #: the default's prior weight r/(m + r) (0: no atom).
        self.default_share = 0.0
        if share > 0:
            assert default_point is not None
            atom = {name: default_value(name, d, default_point[name]) if name in default_point
                    else draw_from_prior(d, self._rng)
                    for name, d in self._distributions.items()}
            copies = max(1, round(share * n_candidates / (1 - share)))
            entries = n_candidates + copies
            self.candidates.insert(0, atom)
            self.prior = np.concatenate([[copies / entries],
                                         np.full(n_candidates, 1.0 / entries)])
            self.default_share = copies / entries
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
        higher is better); always within [1/c, c] times :attr:`prior`."""
        usable = [(p, s) for p, s in history
                  if math.isfinite(s) and all(n in p for n in self._distributions)]
        if not usable or self.density_ratio == 1:
            return project_to_ratio_box(self.prior, self.density_ratio, self.prior)
        cand = np.stack([self._coords(p) for p in self.candidates])
        seen = np.stack([self._coords(p) for p, _ in usable])
        scores = np.array([s for _, s in usable])
        kernel = np.exp(-self._distance2(cand, seen) / (2 * self._bandwidth ** 2))
        mass = kernel.sum(axis=1)
        predicted = np.where(mass > 1e-300, kernel @ scores / np.maximum(mass, 1e-300),
                             scores.mean())
        spread = scores.std() if scores.size > 1 and scores.std() > 0 else 1.0
        z = (predicted - scores.mean()) / spread / self._temperature
        p = self.prior * np.exp(z - z.max())
        return project_to_ratio_box(p / p.sum(), self.density_ratio, self.prior)

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
