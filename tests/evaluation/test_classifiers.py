"""The CAS classifiers: good on real digits, at chance on noise."""

from __future__ import annotations

import numpy as np
import pytest

from raydp_synth.data import load_dataset
from raydp_synth.errors import ConfigError
from raydp_synth.evaluation.classifiers import CLASSIFIER_KINDS, EvaluationCNN, fit_classifier


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits", image_size=16)


def _accuracy(model, split) -> float:
    return float((model.predict(split.images) == split.labels).mean())


@pytest.mark.slow
@pytest.mark.parametrize("kind", CLASSIFIER_KINDS)
def test_trained_on_real_digits_scores_at_least_0_9(kind, digits) -> None:
    model = fit_classifier(kind, digits.train.images, digits.train.labels, num_classes=10)
    assert _accuracy(model, digits.test) >= 0.9


@pytest.mark.slow
@pytest.mark.parametrize("kind", CLASSIFIER_KINDS)
def test_trained_on_uniform_noise_scores_near_chance(kind, digits) -> None:
    rng = np.random.default_rng(0)
    n = len(digits.train)
    noise = rng.uniform(-1, 1, size=(n, 1, 16, 16)).astype(np.float32)
    labels = np.arange(n) % 10
    acc = _accuracy(fit_classifier(kind, noise, labels, num_classes=10), digits.test)
    # Chance is at most the largest class share of the test split; allow 4
    # binomial standard deviations above it (the classifier is fixed given the
    # noise, so its hits are a sum of independent test records).
    top_share = np.bincount(digits.test.labels).max() / len(digits.test)
    assert acc <= top_share + 4 * np.sqrt(top_share * (1 - top_share) / len(digits.test))


@pytest.mark.slow
def test_training_is_reproducible_and_leaves_global_rng_alone(digits) -> None:
    import torch

    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    a = fit_classifier("cnn", digits.val.images, digits.val.labels, num_classes=10, seed=3,
                       cnn_steps=20)
    assert torch.equal(torch.random.get_rng_state(), before)
    b = fit_classifier("cnn", digits.val.images, digits.val.labels, num_classes=10, seed=3,
                       cnn_steps=20)
    assert np.array_equal(a.predict(digits.test.images), b.predict(digits.test.images))


def test_evaluation_cnn_has_the_literature_shape() -> None:
    net = EvaluationCNN(channels=1, image_size=28, num_classes=10)
    assert (net.conv1.out_channels, net.conv2.out_channels) == (32, 64)
    assert net.conv1.kernel_size == net.conv2.kernel_size == (3, 3)
    assert net.fc1.in_features == 64 * 12 * 12 and net.fc1.out_features == 128
    assert (net.drop1.p, net.drop2.p) == (0.25, 0.5)


def test_bad_classifier_input_is_a_clear_error(digits) -> None:
    with pytest.raises(ConfigError, match="unknown classifier"):
        fit_classifier("svm", digits.val.images, digits.val.labels, num_classes=10)
    with pytest.raises(ConfigError, match="two classes"):
        fit_classifier("logreg", digits.val.images, np.zeros(len(digits.val), int), num_classes=10)
