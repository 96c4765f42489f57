"""Pricing of tuning on a Poisson subset (Koskela & Kulkarni, 2023)."""

from __future__ import annotations

import math

import dp_accounting as dpa
import numpy as np
import pytest

from raydp_synth.errors import ConfigError
from raydp_synth.privacy.accounting import (
    ORDERS,
    epsilon_of,
    random_stopping_epsilon,
    rdp_curve,
)
from raydp_synth.privacy.subsampled_tuning import (
    MAX_INTEGER_ORDER,
    amplified_tuning_rdp,
    epsilon_from_rdp,
    poisson_subsampled_rdp_bound,
    unamplified_tuning_rdp,
    variant1_rdp,
    variant2_rdp,
)
from raydp_synth.tune.subsampled_search import check_tune_share
from tests.fixed_schedule import FixedSchedule, gaussian_spec, subsampled_plans

DELTA = 1e-5
INTEGERS = [float(a) for a in range(2, MAX_INTEGER_ORDER + 1)]
GEOMETRIC = 1.0


def _dpaf_like(sigma: float, n: float = 1442.0) -> dpa.DpEvent:
    """DPAF's default plan on digits, one noise scale: the classifier's DP-SGD (B=64,
    3 epochs, 4x the noise), conv2* and DPAGG (B=512, 30 epochs each). On a tuning
    subset of fraction q, a trial keeps these rates (B scaled by q), so w.r.t. X1 its
    event is the same."""

    def sg(rate: float, noise: float, epochs: float) -> dpa.DpEvent:
        return dpa.SelfComposedDpEvent(
            dpa.PoissonSampledDpEvent(rate, dpa.GaussianDpEvent(noise)), int(epochs / rate)
        )

    return dpa.ComposedDpEvent(
        [sg(64 / n, 4 * sigma, 3), sg(512 / n, sigma, 30), sg(512 / n, sigma, 30)]
    )


def _one_run(sigma: float) -> dpa.DpEvent:
    """A single DP-SGD mechanism (cheaper to price than the DPAF-like plan)."""
    return dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.3, dpa.GaussianDpEvent(sigma)), 100)


# (a) the amplification theorem on one Gaussian against dp-accounting's exact curve
@pytest.mark.parametrize("sigma", [0.7, 1.0, 2.0, 5.0])
@pytest.mark.parametrize("q", [0.01, 0.1, 0.5])
def test_zhu_wang_bound_is_above_the_exact_subsampled_gaussian_and_close_to_it(sigma, q):
    base = rdp_curve(dpa.GaussianDpEvent(sigma), orders=INTEGERS)
    bound = poisson_subsampled_rdp_bound(base, q)
    exact = rdp_curve(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma)), orders=INTEGERS)
    assert np.all(bound >= exact * (1 - 1e-12))
    # Zhu & Wang: tight up to a factor 1 + O(q) and the additive log(3) / (alpha - 1)
    alphas = np.asarray(INTEGERS)
    assert np.all(bound <= 2 * exact + math.log(3) / (alphas - 1))
    # what matters: the stated epsilon is within 2x of the exact one
    grid = list(INTEGERS)
    eps_bound, _ = dpa.rdp.rdp_privacy_accountant.compute_epsilon(grid, list(bound), DELTA)
    eps_exact, _ = dpa.rdp.rdp_privacy_accountant.compute_epsilon(grid, list(exact), DELTA)
    assert eps_exact <= eps_bound <= 2 * eps_exact


def _renyi(p: np.ndarray, r: np.ndarray, alpha: float) -> float:
    """D_alpha(p || r) of two discrete distributions."""
    return float(np.log(np.sum(p**alpha * r ** (1 - alpha))) / (alpha - 1))


@pytest.mark.parametrize("eps", [0.5, 2.0, 5.0])
@pytest.mark.parametrize("q", [0.01, 0.1, 0.5, 0.9])
def test_zhu_wang_bound_covers_both_neighbour_directions_of_randomized_response(eps, q):
    """A non-Gaussian mechanism with an exact answer: randomized response. Adding a
    record gives the mixture (1-q) P0 + q P1 against P0; removing it, the reverse
    pair. The bound must cover both (add-or-remove-one neighbours)."""
    p = math.exp(eps) / (1 + math.exp(eps))
    p0, p1 = np.array([p, 1 - p]), np.array([1 - p, p])
    alphas = range(2, 65)
    base = np.array([max(_renyi(p1, p0, a), _renyi(p0, p1, a)) for a in alphas])
    mixture = (1 - q) * p0 + q * p1
    exact = np.array([max(_renyi(mixture, p0, a), _renyi(p0, mixture, a)) for a in alphas])
    assert np.all(poisson_subsampled_rdp_bound(base, q) >= exact - 1e-12)


# (d) hand computation of the theorem at alpha = 2 and 3
def test_zhu_wang_bound_by_hand():
    q, eps2, eps3 = 0.1, 1.0, 1.5  # a Gaussian with sigma = 1: eps(l) = l / 2
    bound = poisson_subsampled_rdp_bound(np.array([eps2, eps3]), q)
    # alpha = 2: log((1-q)(2q - q + 1) + q^2 e^{eps(2)}) = log(1 + q^2 (e - 1))
    assert bound[0] == pytest.approx(math.log(0.9 * 1.1 + 0.01 * math.e), rel=1e-12)
    assert bound[0] == pytest.approx(math.log1p(0.01 * (math.e - 1)), rel=1e-12)  # exact (Mironov)
    # alpha = 3: (1/2) log((1-q)^2 (3q - q + 1) + 3 q^2 (1-q) e^{eps(2)} + 3 q^3 e^{2 eps(3)})
    by_hand = 0.81 * 1.2 + 3 * 0.01 * 0.9 * math.e + 3 * 0.001 * math.exp(3.0)
    assert by_hand == pytest.approx(1.105651, abs=1e-6)
    assert bound[1] == pytest.approx(0.5 * math.log(by_hand), rel=1e-12)


def test_infinite_base_rdp_stays_infinite_and_bad_fractions_are_refused():
    bound = poisson_subsampled_rdp_bound(np.array([1.0, np.inf, 2.0]), 0.1)
    assert math.isfinite(bound[0]) and np.isinf(bound[1:]).all()
    for bad in (0.0, -0.1, 1.5, math.nan):
        with pytest.raises(ConfigError, match="tuning fraction"):
            poisson_subsampled_rdp_bound(np.array([1.0]), bad)


# (b) q = 1 gives back the unamplified curve; (c) monotone in q
def test_full_fraction_is_plain_random_stopping_and_cost_grows_with_q():
    reference = _one_run(4.0)  # one trial: epsilon 3.59
    plain = unamplified_tuning_rdp(reference, mean=8, shape=GEOMETRIC)
    at_one = amplified_tuning_rdp(reference, mean=8, shape=GEOMETRIC, tune_fraction=1.0)
    np.testing.assert_array_equal(at_one, plain)
    assert epsilon_from_rdp(plain, DELTA) == pytest.approx(
        random_stopping_epsilon(reference, mean=8, shape=GEOMETRIC, delta=DELTA), rel=1e-9
    )
    curves = [
        *(amplified_tuning_rdp(reference, mean=8, shape=GEOMETRIC, tune_fraction=q)
          for q in (0.02, 0.1, 0.5)),
        at_one,
    ]
    for lower, higher in zip(curves, curves[1:], strict=False):
        assert np.all(lower <= higher + 1e-12)
    epsilons = [epsilon_from_rdp(c, DELTA) for c in curves]
    assert epsilons == sorted(epsilons) and epsilons[0] < 0.5 * epsilons[-1]  # 2.26 against 6.52


def test_non_integer_orders_take_the_next_integer_bound():
    reference = _one_run(2.0)
    curve = amplified_tuning_rdp(reference, mean=8, shape=GEOMETRIC, tune_fraction=0.1)
    at = dict(zip(ORDERS, curve, strict=True))
    assert at[2.5] <= at[3.0] and at[1.1] <= at[2.0]
    assert np.all(np.isfinite(curve))


def test_variant2_mixes_unamplified_tuning_and_final_run():
    reference, final = _one_run(2.0), _one_run(1.5)
    tune = unamplified_tuning_rdp(reference, mean=8, shape=GEOMETRIC)
    final_curve = rdp_curve(final)
    v2 = variant2_rdp(tune, final, tune_fraction=0.1)
    assert np.all(v2 <= np.maximum(tune, final_curve) + 1e-12)
    assert np.all(v2 >= np.minimum(tune, final_curve) - 1e-12)
    np.testing.assert_array_equal(variant2_rdp(tune, final, tune_fraction=1.0), tune)
    # variant 1 composes: more than the final run alone
    v1 = variant1_rdp(amplified_tuning_rdp(reference, mean=8, shape=GEOMETRIC,
                                           tune_fraction=0.1), final)
    assert epsilon_from_rdp(v1, DELTA) > epsilon_of(final, delta=DELTA)


def test_epsilon_from_rdp_is_dp_accountings_conversion():
    event = _one_run(1.5)
    assert epsilon_from_rdp(rdp_curve(event), DELTA) == epsilon_of(event, delta=DELTA)
    assert epsilon_from_rdp(np.full(len(ORDERS), np.nan), DELTA) == math.inf
    with pytest.raises(ConfigError, match="ORDERS"):
        epsilon_from_rdp(np.zeros(3), DELTA)


# (e) end to end on a DPAF-like plan at q = 0.1, E[K] = 8
def test_subsampled_tuning_is_cheaper_than_random_stopping_on_a_dpaf_like_plan():
    reference = _dpaf_like(3.92)  # plain random stopping at E[K] = 8 costs ~10
    plain = random_stopping_epsilon(reference, mean=8, shape=GEOMETRIC, delta=DELTA)
    subsampled = epsilon_from_rdp(
        amplified_tuning_rdp(reference, mean=8, shape=GEOMETRIC, tune_fraction=0.1), DELTA
    )
    assert plain == pytest.approx(10.0, abs=0.05)
    assert subsampled < 0.8 * plain  # measured 7.39 against 9.99


def _dpaf_like_schedule(n: float = 1442.0) -> FixedSchedule:
    """:func:`_dpaf_like`'s mechanisms (the same rates and step counts) as a schedule
    the study's calibration sets the noise of; the classifier gets a small share of
    the budget (a fixed 4x noise ratio is not something a schedule states)."""
    return FixedSchedule(
        gaussian_spec("classifier", sample_rate=64 / n, num_steps=int(3 / (64 / n)), share=0.02),
        gaussian_spec("conv2", sample_rate=512 / n, num_steps=int(30 / (512 / n))),
        gaussian_spec("dpagg", sample_rate=512 / n, num_steps=int(30 / (512 / n))),
    )


@pytest.mark.slow
def test_the_study_plans_on_a_dpaf_like_plan_leave_the_final_run_most_of_the_budget():
    schedule = _dpaf_like_schedule()
    plans = subsampled_plans(
        epsilon=10.0, delta=DELTA, tune_fraction=0.1, mean=8, shape=GEOMETRIC,
        tuning_share=0.1, trial=schedule, final=schedule,
    )
    assert plans.total_epsilon <= 10.0
    assert plans.total_epsilon > 9.9
    assert plans.tuning_epsilon <= 1.0
    assert plans.final_epsilon > 9.5  # the final run keeps most of it
    for trial, final in zip(plans.reference.mechanisms, plans.final.mechanisms, strict=True):
        assert trial.noise_multiplier > final.noise_multiplier


def test_the_study_plans_never_overshoot_and_give_the_rest_to_the_final_run():
    run = FixedSchedule(gaussian_spec("run", sample_rate=0.05, num_steps=200))
    plans = subsampled_plans(
        epsilon=4.0, delta=DELTA, tune_fraction=0.1, mean=8, shape=GEOMETRIC,
        tuning_share=0.2, trial=run, final=run,
    )
    assert 3.9 < plans.total_epsilon <= 4.0
    assert plans.tuning_epsilon <= 0.8
    assert plans.final_epsilon > 0.8 * 4.0


def test_the_study_refuses_a_tuning_share_outside_the_unit_interval():
    for share in (0.0, 1.0, -0.5, math.nan):
        with pytest.raises(ConfigError, match="tune-share"):
            check_tune_share(share)


@pytest.mark.parametrize("shape", [math.inf, 0.0, 0.5])  # Poisson, logarithmic, TNB
def test_other_trial_count_distributions_are_amplified_too(shape):
    reference = dpa.SelfComposedDpEvent(
        dpa.PoissonSampledDpEvent(0.05, dpa.GaussianDpEvent(1.5)), 200
    )
    plain = random_stopping_epsilon(reference, mean=8, shape=shape, delta=DELTA)
    curve = amplified_tuning_rdp(reference, mean=8, shape=shape, tune_fraction=0.1)
    assert 0 < epsilon_from_rdp(curve, DELTA) < plain
