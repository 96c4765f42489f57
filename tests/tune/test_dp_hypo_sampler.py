"""The dp-hypo sampler: every proposal within [1/c, c] of its prior over its
candidates (uniform, or with the default's atom), whatever the score history; c = 1
draws are the prior's. No Ray."""

from __future__ import annotations

import math

import numpy as np
import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from raydp_synth.errors import ConfigError
from raydp_synth.tune.search_space import make_sampler
from raydp_synth.tune.search_space.dp_hypo import (
    DPHyPOSampler,
    project_to_ratio_box,
    space_distributions,
)

DISTS = {
    "lr": FloatDistribution(1e-5, 1e-1, log=True),
    "clip": FloatDistribution(0.1, 2.0),
    "batch": IntDistribution(16, 256, step=16),
    "arch": CategoricalDistribution(["small", "wide", "deep"]),
}


def _history(sampler: DPHyPOSampler, rng: np.random.Generator, n: int) -> list:
    picks = rng.integers(len(sampler.candidates), size=n)
    # scores: any reals, including ties and outliers
    return [(sampler.candidates[i], float(rng.standard_cauchy())) for i in picks]


@pytest.mark.parametrize("c", [1.0, 1.05, 2.0, 10.0])
def test_every_proposal_stays_in_the_ratio_box(c):
    rng = np.random.default_rng(0)
    sampler = DPHyPOSampler(DISTS, density_ratio=c, seed=[1, 2, 3, 4], n_candidates=64)
    m = len(sampler.candidates)
    for n in list(range(0, 12)) * 5:
        w = sampler.proposal(_history(sampler, rng, n))
        assert w.sum() == pytest.approx(1, abs=1e-12)
        assert np.all(w * m >= 1 / c) and np.all(w * m <= c)


def test_projection_of_extreme_proposals():
    rng = np.random.default_rng(1)
    for _ in range(200):
        c = float(rng.uniform(1, 20))
        m = int(rng.integers(1, 300))
        p = rng.dirichlet(np.full(m, float(rng.uniform(0.01, 5))))
        p[rng.random(m) < 0.3] = 0.0
        if p.sum() == 0:
            p[0] = 1.0
        w = project_to_ratio_box(p, c)
        assert w.sum() == pytest.approx(1, abs=1e-12)
        assert np.all(w * m >= 1 / c) and np.all(w * m <= c)


def test_adaptive_proposal_prefers_good_scores():
    sampler = DPHyPOSampler(DISTS, density_ratio=4.0, seed=7, n_candidates=32)
    good, bad = sampler.candidates[0], sampler.candidates[1]
    w = sampler.proposal([(good, 1.0), (bad, 0.0)])
    assert w[0] > 1 / 32 > w[1]


def test_c_one_draws_are_the_priors():
    """c = 1: the weights are uniform whatever the history, and the candidates are
    i.i.d. prior draws (log-uniform lr: its log is uniform on [ln 1e-5, ln 1e-1])."""
    sampler = DPHyPOSampler(DISTS, density_ratio=1, seed=3, n_candidates=2000)
    assert np.array_equal(sampler.proposal([(sampler.candidates[0], 5.0)]),
                          np.full(2000, 1 / 2000))
    logs = np.log10([c["lr"] for c in sampler.candidates])
    assert logs.min() >= -5 and logs.max() <= -1
    assert abs(logs.mean() + 3) < 0.1 and abs(np.mean(logs < -4) - 0.25) < 0.04
    assert {c["arch"] for c in sampler.candidates} == {"small", "wide", "deep"}
    assert {c["batch"] for c in sampler.candidates} <= set(range(16, 257, 16))


def test_runs_an_optuna_study_define_by_run():
    def define_by_run(trial: optuna.Trial) -> None:
        trial.suggest_float("lr", 1e-5, 1e-1, log=True)
        trial.suggest_categorical("arch", ["small", "wide", "deep"])

    dists = space_distributions(define_by_run)
    sampler = make_sampler("dp-hypo", [5, 6], density_ratio=2.0, distributions=dists)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.optimize(lambda t: (define_by_run(t), -abs(math.log10(t.params["lr"]) + 3))[1],
                   n_trials=6)
    allowed = [(c["lr"], c["arch"]) for c in sampler.candidates]
    assert all((t.params["lr"], t.params["arch"]) in allowed for t in study.trials)


def test_unknown_param_and_bad_c_are_refused():
    sampler = DPHyPOSampler(DISTS, density_ratio=2, seed=0)
    study = optuna.create_study(sampler=sampler)
    with pytest.raises(ConfigError, match="--sampler random"):
        study.optimize(lambda t: t.suggest_float("other", 0, 1), n_trials=1, catch=())
    with pytest.raises(ConfigError, match="--hypo-c"):
        DPHyPOSampler(DISTS, density_ratio=0.5, seed=0)


def test_projection_around_a_weighted_prior():
    """A prior with an atom (the default's share) and random proposals: every weight
    within a factor c of its own prior weight; c = 1 gives the prior."""
    rng = np.random.default_rng(2)
    for _ in range(200):
        c = float(rng.uniform(1, 20))
        m = int(rng.integers(2, 300))
        share = float(rng.uniform(0.01, 0.99))
        prior = np.concatenate([[share], np.full(m - 1, (1 - share) / (m - 1))])
        p = rng.dirichlet(np.full(m, float(rng.uniform(0.01, 5))))
        p[rng.random(m) < 0.3] = 0.0
        if p.sum() == 0:
            p[0] = 1.0
        w = project_to_ratio_box(p, c, prior)
        assert w.sum() == pytest.approx(1, abs=1e-12)
        assert np.all(w / prior >= 1 / c) and np.all(w / prior <= c)
    assert np.array_equal(project_to_ratio_box(np.full(3, 1 / 3), 1.0, np.array([0.5, 0.25, 0.25])),
                          [0.5, 0.25, 0.25])


@pytest.mark.parametrize("c", [1.0, 2.0, 10.0])
def test_the_atom_is_candidate_zero_and_every_proposal_stays_in_its_box(c):
    point = {"lr": 1e-3, "clip": 1.0, "batch": 64, "arch": "wide"}
    sampler = DPHyPOSampler(DISTS, density_ratio=c, seed=[1, 2], n_candidates=64,
                            default_point=point, default_share=0.5)
    assert sampler.candidates[0] == point and len(sampler.candidates) == 65
    # the uniform prior over 64 draws and 64 copies of the default
    assert sampler.prior[0] == 0.5 and np.allclose(sampler.prior[1:], 1 / 128)
    rng = np.random.default_rng(4)
    for n in list(range(0, 12)) * 5:
        w = sampler.proposal(_history(sampler, rng, n))
        assert w.sum() == pytest.approx(1, abs=1e-12)
        assert np.all(w / sampler.prior >= 1 / c) and np.all(w / sampler.prior <= c)
        # the same draw from the uniform prior over the multiset (64 copies of the
        # default, 64 draws), the atom's weight split equally: DP-HyPO's box on each entry
        entries = np.concatenate([np.full(64, w[0] / 64), w[1:]]) * 128
        assert np.all(entries >= 1 / c) and np.all(entries <= c)


def test_an_atom_outside_the_space_or_missing_is_refused():
    with pytest.raises(ConfigError, match="outside the space"):
        DPHyPOSampler(DISTS, density_ratio=2, seed=0, default_share=0.5,
                      default_point={"lr": 1.0})
    with pytest.raises(ConfigError, match="no value of the method's default"):
        DPHyPOSampler(DISTS, density_ratio=2, seed=0, default_share=0.5, default_point={})
    partial = DPHyPOSampler(DISTS, density_ratio=2, seed=0, default_share=0.5,
                            default_point={"lr": 1e-3})
    assert partial.candidates[0]["lr"] == 1e-3 and set(partial.candidates[0]) == set(DISTS)
