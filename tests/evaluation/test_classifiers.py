"""The CAS classifiers: good on real digits, at chance on noise."""

from __future__ import annotations

import numpy as np
import pytest

from raydp_synth.data import load_dataset
from raydp_synth.errors import ConfigError
from raydp_synth.evaluation.classifiers import (
    CLASSIFIER_KINDS,
    DEFAULT_CLASSIFIERS,
    EvaluationCNN,
    ResNet9,
    fit_classifier,
    fit_resnet9,
)


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits", image_size=16)


#: The CNN's optimiser steps in the two tests below (the default, 400, is ~4x the time).
#: Measured over seeds 0-4 at 100 steps (2026-11-28): real digits 0.953-0.963 test
#: accuracy (threshold 0.9; at 400 steps 0.98), uniform noise 0.026-0.100 (threshold
#: 0.284). logreg and mlp ignore it.
CNN_STEPS = 100


def _accuracy(model, split) -> float:
    return float((model.predict(split.images) == split.labels).mean())


@pytest.mark.slow
@pytest.mark.parametrize("kind", DEFAULT_CLASSIFIERS)
def test_trained_on_real_digits_scores_at_least_0_9(kind, digits) -> None:
    model = fit_classifier(kind, digits.train.images, digits.train.labels, num_classes=10,
                           cnn_steps=CNN_STEPS)
    assert _accuracy(model, digits.test) >= 0.9


@pytest.mark.slow
@pytest.mark.parametrize("kind", DEFAULT_CLASSIFIERS)
def test_trained_on_uniform_noise_scores_near_chance(kind, digits) -> None:
    rng = np.random.default_rng(0)
    n = len(digits.train)
    noise = rng.uniform(-1, 1, size=(n, 1, 16, 16)).astype(np.float32)
    labels = np.arange(n) % 10
    acc = _accuracy(fit_classifier(kind, noise, labels, num_classes=10, cnn_steps=CNN_STEPS),
                    digits.test)
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


def _quadrants(n: int, *, size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Four separable classes: class c brightens quadrant c of noisy images."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % 4
    images = rng.normal(0, 0.3, size=(n, 1, size, size)).astype(np.float32)
    h = size // 2
    for c in range(4):
        images[labels == c, :, (c // 2) * h : (c // 2 + 1) * h, (c % 2) * h : (c % 2 + 1) * h] += 1
    return images, labels


def test_resnet9_is_an_option_beside_the_default_three() -> None:
    assert DEFAULT_CLASSIFIERS == ("logreg", "mlp", "cnn")
    assert set(CLASSIFIER_KINDS) == {*DEFAULT_CLASSIFIERS, "resnet9"}


@pytest.mark.parametrize(("channels", "size", "pooled"), [(1, 16, 2), (3, 32, 4), (3, 64, 8)])
def test_resnet9_has_pages_shape(channels, size, pooled) -> None:
    import torch

    net = ResNet9(channels=channels, image_size=size, num_classes=10).eval()
    convs = [m for m in net.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [c.out_channels for c in convs] == [64, 128, 128, 128, 256, 512, 512, 512]
    assert all(c.kernel_size == (3, 3) for c in convs) and convs[0].in_channels == channels
    assert sum(isinstance(m, torch.nn.BatchNorm2d) for m in net.modules()) == len(convs)
    assert net.linear.in_features == 512 and net.linear.out_features == 10
    with torch.no_grad():
        x = torch.zeros(1, channels, size, size)
        maps = net.layer3(net.layer2(net.layer1(net.prep(x))))
        assert tuple(maps.shape) == (1, 512, pooled, pooled)
        assert tuple(net(x).shape) == (1, 10)


def test_resnet9_fits_separable_classes_reproducibly_and_leaves_global_rng_alone() -> None:
    import torch

    train, train_labels = _quadrants(96, size=16, seed=0)
    test, test_labels = _quadrants(100, size=16, seed=1)
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    fits = [fit_resnet9(train, train_labels, num_classes=4, seed=5, steps=12, batch_size=32,
                        width=8) for _ in range(2)]
    assert torch.equal(torch.random.get_rng_state(), before)
    assert (fits[0].predict(test) == test_labels).mean() >= 0.9  # chance: 0.25
    assert np.array_equal(fits[0].logits(test), fits[1].logits(test))
    other = fit_resnet9(train, train_labels, num_classes=4, seed=6, steps=12, batch_size=32,
                        width=8)
    assert not np.array_equal(fits[0].logits(test), other.logits(test))


@pytest.mark.slow
def test_fit_classifier_trains_the_published_resnet9() -> None:
    train, train_labels = _quadrants(64, size=8, seed=0)
    test, test_labels = _quadrants(100, size=8, seed=1)
    model = fit_classifier("resnet9", train, train_labels, num_classes=4, resnet9_steps=8)
    assert isinstance(model.model, ResNet9) and model.model.linear.in_features == 512
    assert (model.predict(test) == test_labels).mean() >= 0.6
