"""Scoring a trial's generator for selection: a classifier trained on its synthetic
images, scored on the validation split and released through the selection-score
mechanism (:mod:`raydp_synth.privacy.selection_score`, which states the privacy
argument)."""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING

import numpy as np

from raydp_synth.errors import ConfigError
from raydp_synth.evaluation.classifiers import CLASSIFIER_KINDS, fit_classifier
from raydp_synth.privacy.plan import PrivacyPlan
from raydp_synth.privacy.selection_score import SELECTION_SCORE, SelectionScore, release_score

if TYPE_CHECKING:
    from raydp_synth.data import ImageDataset
    from raydp_synth.release.generator import TrainedGenerator

__all__ = ["DEFAULT_SCORE_CLASSIFIER", "score_generator", "validate_score_settings"]

#: The classifier trained on synthetic data for the score (cheap: every trial
#: computes one). Any of ``evaluation.classifiers.CLASSIFIER_KINDS``.
DEFAULT_SCORE_CLASSIFIER = "logreg"


def validate_score_settings(share: float, classifier: str) -> None:
    """The user's score settings: a share in (0, 1) and a known classifier."""
    if classifier not in CLASSIFIER_KINDS:
        raise ConfigError(f"the score classifier {classifier!r} must be one of "
                          f"{', '.join(CLASSIFIER_KINDS)}")
    if not (math.isfinite(share) and 0 < share < 1):
        raise ConfigError(f"the selection score's budget share {share} must be in (0, 1), e.g. 0.2")


def score_generator(
    generator: TrainedGenerator,
    split: ImageDataset,
    *,
    plan: PrivacyPlan,
    noise_source: random.Random | None,
    classifier: str = DEFAULT_SCORE_CLASSIFIER,
    num_synthetic: int = 2000,
    seed: int = 0,
    divisor: int | None = None,
) -> SelectionScore:
    """Train ``classifier`` on the generator's samples, release its score on ``split``.

    ``split`` is the private validation split (noised with the plan's
    :data:`SELECTION_SCORE` mechanism) or a dataset the user declared public
    (``split.public``: no noise, no cost). ``noise_source``: the integers of the
    discrete noise (``secret_rng.secret_integers``). ``divisor``: a public count to
    divide by instead of ``len(split)``
    (:func:`~raydp_synth.privacy.selection_score.release_score`).
    """
    images, labels = generator.balanced(num_synthetic, seed=seed)
    model = fit_classifier(classifier, images, labels, num_classes=generator.data.num_classes,
                           seed=seed)
    mechanism = None
    if not split.public:
        names = [m.name for m in plan.mechanisms]
        mechanism = plan.mechanism(SELECTION_SCORE) if SELECTION_SCORE in names else None
    # A secret subset's validation part may be empty: its count is 0, plus the noise.
    predicted = model.predict(split.images) if len(split) else np.zeros(0, dtype=np.int64)
    return release_score(predicted, split.labels, mechanism=mechanism,
                         public=split.public, noise_source=noise_source,
                         classifier=classifier, divisor=divisor)
