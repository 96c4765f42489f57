"""The private selection score's mechanism: the one number a trial reports for
selection, and its release.

The score is the accuracy, on the **private validation split**, of a classifier
trained only on the trial's synthetic data, released with Gaussian noise::

    score = (#correct predictions on the validation split + N(0, sigma_score^2)) / n_val

Privacy argument (docs/budget-pricing.md, section 5):

* The classifier is a function of the generator (a DP release of the training
  mechanisms) and of public randomness only, so it is post-processing.
* Given the classifier, adding or removing one validation record changes the count
  of correct predictions by at most 1: the count has L2 sensitivity 1 under
  add/remove, and ``count + N(0, sigma^2)`` is the Gaussian mechanism with noise
  multiplier ``sigma``. It enters the trial's plan as ``GaussianDpEvent(sigma)``
  (mechanism :data:`SELECTION_SCORE`), calibrated jointly with the training
  mechanisms, so the plan's epsilon covers it.
* Dividing by n_val is post-processing (split sizes are treated as public, as in
  ``q = B / n``).
* The noise comes from the run's secret DP seed.

A validation set that the user declares public is scored without noise and costs
nothing; the plan then has no score mechanism. Never select on an un-noised
private metric.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from raydp_synth.errors import ConfigError
from raydp_synth.privacy.calibration import MechanismSpec
from raydp_synth.privacy.plan import Mechanism, PrivacyPlan

__all__ = [
    "DEFAULT_SCORE_SHARE",
    "NOISY_SCORE_STD",
    "SELECTION_SCORE",
    "SelectionScore",
    "correct_count",
    "release_score",
    "score_noise_std",
    "with_score_mechanism",
]

#: Name of the score's mechanism in a plan.
SELECTION_SCORE = "selection_score"

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
        noise_std: standard deviation of ``value``'s noise (0 if public).
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
    noise_generator: torch.Generator | None,
    classifier: str,
    divisor: int | None = None,
) -> SelectionScore:
    """Release the score of ``predicted`` against a validation split's labels.

    Args:
        predicted, labels: the synthetic-trained classifier's predictions and the
            split's true labels.
        mechanism: the plan's :data:`SELECTION_SCORE` mechanism (required unless the
            split is public): its noise std is ``sigma * 1``.
        public: True only for a split the user declared public (no noise, no cost).
        noise_generator: source of the noise, seeded from the run's secret seed.
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
    if noise_generator is None:
        raise ConfigError("a private score needs the run's secret noise generator")
    noise = torch.randn((), generator=noise_generator, dtype=torch.float64).item() * mechanism.noise_std
    return SelectionScore(value=(count + noise) / n, private=mechanism.private,
                          noise_std=mechanism.noise_std / n, num_records=n, classifier=classifier)
