"""The private selection score's mechanism: the one number a trial reports for
selection, and its release.

The score is the accuracy, on the **private validation split**, of a classifier
trained only on the trial's synthetic data, released with discrete Gaussian noise::

    score = (#correct predictions on the validation split + N_Z(0, sigma_score^2)) / n_val

Privacy argument (docs/budget-pricing.md, section 5):

* The classifier is a function of the generator (a DP release of the training
  mechanisms) and of public randomness only, so it is post-processing.
* Given the classifier, adding or removing one validation record changes the
  integer count of correct predictions by at most 1 (sensitivity 1 under
  add/remove), and ``count + Y`` with Y ~ N_Z(0, sigma^2), the discrete Gaussian
  (:mod:`~raydp_synth.privacy.discrete_gaussian`), is the discrete Gaussian
  mechanism (Canonne, Kamath & Steinke 2020). It is (1/(2 sigma^2))-zCDP, the
  continuous Gaussian's RDP curve (their Theorem 4); it enters the trial's plan as
  ``DiscreteGaussianDpEvent(sigma)`` (mechanism :data:`SELECTION_SCORE`), priced by
  RDP as ``GaussianDpEvent(sigma)`` and by PLD with the discrete Gaussian's own
  privacy loss, whose (epsilon, delta) profile is slightly above the continuous
  one's at some epsilons (docs/budget-pricing.md, section 5). It is calibrated
  jointly with the training mechanisms, so the plan's epsilon covers it.
* The release is exact: the noise is an integer sampled exactly from uniform
  integers, so ``score * n_val - count`` is the noise itself and holds no
  floating-point trace of the count (Mironov 2012), and its source is
  ``secrets.SystemRandom`` (the OS's generator at every draw), not a seeded float
  generator whose 2**32 streams an attacker can enumerate against the released
  number (architecture invariant 14). A run with a user's ``--dp-seed`` draws from a
  reproducible source derived from it instead (no DP release: its seed is known).
* Dividing by n_val is post-processing (split sizes are treated as public, as in
  ``q = B / n``).

A validation set that the user declares public is scored without noise and costs
nothing; the plan then has no score mechanism. Never select on an un-noised
private metric.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from raydp_synth.errors import ConfigError
from raydp_synth.privacy.calibration import MechanismSpec
from raydp_synth.privacy.discrete_gaussian import discrete_gaussian
from raydp_synth.privacy.plan import SELECTION_SCORE, Mechanism, PrivacyPlan
from raydp_synth.privacy.secret_rng import derive_secret, secret_integers

__all__ = [
    "DEFAULT_SCORE_SHARE",
    "NOISY_SCORE_STD",
    "SELECTION_SCORE",
    "SelectionScore",
    "correct_count",
    "release_score",
    "score_noise_source",
    "score_noise_std",
    "with_score_mechanism",
]

#: Default budget weight of a trial's score. The score is one release, the training
#: mechanisms hundreds of steps, so under RDP composition a weight that makes the
#: score precise costs training little. Measured on digits (165 validation records,
#: dpwgan's default plan at a trial epsilon of 3.1, a study's 8-trial share of 10):
#: weight 0.05 -> score noise std 0.139 (selection among trials nearly random:
#: trials differ by 0.1-0.3), critic sigma 1.613; 0.2 -> std ~0.03, critic sigma
#: ~1.66 (+3%); at epsilon 1: 0.38 -> ~0.09.
DEFAULT_SCORE_SHARE = 0.2

#: A score noise std above which a study says that its trials cannot be ranked: the
#: measurement above found selection nearly random at std 0.139, where trials differed
#: by 0.1-0.3 in accuracy.
NOISY_SCORE_STD = 0.1


def with_score_mechanism(specs: Sequence[MechanismSpec], share: float) -> list[MechanismSpec]:
    """The training schedule plus the score's one-shot Gaussian release.

    Args:
        specs: the method's mechanisms (their shares are relative weights).
        share: fraction of the whole budget weight given to the score, in [0, 1);
            0 adds nothing (public validation data, or no score).
    """
    if not (math.isfinite(share) and 0 <= share < 1):
        raise ConfigError(f"the selection score's budget share {share} must be in [0, 1), e.g. 0.2")
    specs = list(specs)
    if share == 0:
        return specs
    if any(s.name == SELECTION_SCORE for s in specs):
        raise ConfigError(f"a method may not name a mechanism {SELECTION_SCORE!r}")
    total = sum(s.share for s in specs)
    return [
        *specs,
        MechanismSpec(name=SELECTION_SCORE, sample_rate=None, num_steps=1, sensitivity=1.0,
                      share=share / (1 - share) * total),
    ]


def score_noise_std(plan: PrivacyPlan, divisor: int) -> float | None:
    """The std of the noise of the score that ``plan`` releases on ``divisor``
    validation records (the number :func:`release_score` divides by), in accuracy
    units; None if the plan has no score mechanism (a public or no validation split)."""
    try:
        mechanism = plan.mechanism(SELECTION_SCORE)
    except KeyError:
        return None
    return mechanism.noise_std / max(1, int(divisor))


def score_noise_source(user_seed: int | None) -> random.Random:
    """The integers of the score's discrete noise: ``secrets.SystemRandom`` (every DP
    release: a trial, a run without ``--dp-seed``), or, for a user's reproducibility
    seed (no DP release: the seed is known), a ``random.Random`` whose whole state is
    derived from it (:func:`~raydp_synth.privacy.secret_rng.secret_integers`)."""
    if user_seed is None:
        return secret_integers(None)
    return secret_integers(derive_secret(user_seed, SELECTION_SCORE))


def correct_count(predicted: np.ndarray, labels: np.ndarray) -> int:
    """The pre-noise quantity of the score: correct predictions (sensitivity 1)."""
    predicted, labels = np.asarray(predicted), np.asarray(labels)
    if predicted.shape != labels.shape:
        raise ValueError(f"{predicted.shape} predictions for {labels.shape} labels")
    return int((predicted == labels).sum())


@dataclass(frozen=True, kw_only=True)
class SelectionScore:
    """A released score.

    Attributes:
        value: the (noisy, if private) accuracy in "accuracy units" (may fall
            outside [0, 1] by noise; clipping would be post-processing but biases
            the comparison of trials, so it is left as is).
        private: True when it is a DP release in the plan (private split, noise);
            False on a public split, or in a non-private reference run.
        noise_std: the noise's scale sigma / num_records (0 if public): the
            discrete Gaussian's parameter, at least its standard deviation (equal
            to it within 2e-7 relative from sigma = 1 on, 7% below it at 0.5).
        num_records: size of the scored split.
        classifier: which classifier was trained on the synthetic data.
    """

    value: float
    private: bool
    noise_std: float
    num_records: int
    classifier: str

    def to_dict(self) -> dict[str, float | bool | int | str]:
        return {"value": self.value, "private": self.private, "noise_std": self.noise_std,
                "num_records": self.num_records, "classifier": self.classifier}


def release_score(
    predicted: np.ndarray,
    labels: np.ndarray,
    *,
    mechanism: Mechanism | None,
    public: bool,
    noise_source: random.Random | None,
    classifier: str,
    divisor: int | None = None,
) -> SelectionScore:
    """Release the score of ``predicted`` against a validation split's labels.

    Args:
        predicted, labels: the synthetic-trained classifier's predictions and the
            split's true labels.
        mechanism: the plan's :data:`SELECTION_SCORE` mechanism (required unless the
            split is public): the noise is N_Z(0, noise_std^2), noise_std = ``sigma * 1``.
        public: True only for a split the user declared public (no noise, no cost).
        noise_source: uniform integers for the noise: ``secret_integers(None)``
            (``secrets.SystemRandom``) for a DP release; a seeded source from
            :func:`~raydp_synth.privacy.secret_rng.secret_integers` only in a
            reproducibility run.
        divisor: a public count to divide the noisy count by instead of the split's
            size (a secret subset's realised size is data-dependent: dividing by it
            would release it; any fixed number keeps the division post-processing).

    Raises:
        ConfigError: a private split scored without a planned mechanism.
    """
    n = len(labels) if divisor is None else int(divisor)
    if n <= 0:
        raise ConfigError("the validation split is empty; the score needs records to score on")
    count = correct_count(predicted, labels)
    if public:
        return SelectionScore(value=count / n, private=False, noise_std=0.0, num_records=n,
                              classifier=classifier)
    if mechanism is None or mechanism.name != SELECTION_SCORE:
        raise ConfigError(
            "scoring on the private validation split needs the plan's selection_score "
            "mechanism; plan with a score share > 0 or declare a public validation set"
        )
    if noise_source is None:
        raise ConfigError("a private score needs the run's secret integer source "
                          "(privacy.secret_rng.secret_integers)")
    noise = 0  # a non-private reference plan: noise_std 0
    if mechanism.noise_std > 0:
        # The exact square of the float sigma the plan prices: the law is exactly
        # N_Z(0, sigma^2) for that sigma. Sensitive, discard immediately after use.
        noise = discrete_gaussian(Fraction(mechanism.noise_std) ** 2, noise_source)
    return SelectionScore(value=(count + noise) / n, private=mechanism.private,
                          noise_std=mechanism.noise_std / n, num_records=n, classifier=classifier)
