"""The classifiers of "classifier accuracy on synthetic data" (CAS).

Three classifiers, as in PrivImage's evaluation (Li et al. 2024, PrivImage, "CA";
App.: scikit-learn's LR and MLP with default hyperparameters, and a CNN):

* ``logreg``: ``sklearn.linear_model.LogisticRegression`` on the pixels;
* ``mlp``: ``sklearn.neural_network.MLPClassifier`` (one hidden layer of 100
  ReLU units, Adam; scikit-learn's defaults) on the pixels;
* ``cnn``: :class:`EvaluationCNN`, the evaluation classifier of the DP-GAN
  literature (GS-WGAN, G-PATE, DataLens; Lin et al., DPAF, journal version Fig. 8, the
  "Keras MNIST CNN"): conv 3x3 with 32 maps, ReLU, conv 3x3 with 64 maps, ReLU,
  2x2 max-pool, dropout 0.25, dense 128, ReLU, dropout 0.5, dense to the classes.

Each is trained with a fixed seed and no global random state (the CNN's initial
parameters, batch order and dropout masks come from generators of that seed), so
evaluations are reproducible.
"""

from __future__ import annotations

import math
import warnings
from typing import Protocol

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from raydp_synth.errors import ConfigError
from raydp_synth.runtime.seeding import seeded

__all__ = [
    "CLASSIFIER_KINDS",
    "CNNClassifier",
    "EvaluationCNN",
    "TrainedClassifier",
    "fit_classifier",
]

CLASSIFIER_KINDS = ("logreg", "mlp", "cnn")


class TrainedClassifier(Protocol):
    def predict(self, images: np.ndarray) -> np.ndarray:
        """Labels for float32 images [N, C, H, W] in [-1, 1]."""


class EvaluationCNN(nn.Module):
    """The DP-GAN literature's evaluation CNN (see the module docstring).

    Dropout masks are drawn from :attr:`dropout_rng` (a generator on the model's
    device), which training must set: the global RNG is never used.
    """

    dropout_rng: torch.Generator | None = None

    def __init__(self, *, channels: int, image_size: int, num_classes: int) -> None:
        super().__init__()
        if image_size < 6:
            raise ConfigError(f"the evaluation CNN needs images of at least 6x6, got {image_size}")
        self.conv1 = nn.Conv2d(channels, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        side = (image_size - 4) // 2
        self.fc1 = nn.Linear(64 * side * side, 128)
        self.fc2 = nn.Linear(128, num_classes)
        self.drop1, self.drop2 = nn.Dropout(0.25), nn.Dropout(0.5)

    def _dropout(self, x: torch.Tensor, layer: nn.Dropout) -> torch.Tensor:
        if not self.training or layer.p == 0:
            return x
        if self.dropout_rng is None:
            raise RuntimeError("training the evaluation CNN needs its dropout_rng")
        keep = torch.rand(x.shape, generator=self.dropout_rng, device=x.device) >= layer.p
        return x * keep / (1 - layer.p)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The 128 penultimate activations (before the last dropout)."""
        x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
        return F.relu(self.fc1(self._dropout(x, self.drop1).flatten(1)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self._dropout(self.features(x), self.drop2))


class CNNClassifier:
    """A trained :class:`EvaluationCNN` (eval mode, on its device; numpy in and out)."""

    def __init__(self, model: EvaluationCNN) -> None:
        self.model = model.eval()
        self.device = next(model.parameters()).device

    def _batches(self, images: np.ndarray, fn: str) -> np.ndarray:
        out = []
        with torch.no_grad():
            for i in range(0, len(images), 1024):
                x = torch.as_tensor(images[i : i + 1024], dtype=torch.float32).to(self.device)
                out.append(getattr(self.model, fn)(x).cpu().numpy())
        return np.concatenate(out) if out else np.zeros((0,), np.float32)

    def logits(self, images: np.ndarray) -> np.ndarray:
        return self._batches(images, "forward")

    def predict(self, images: np.ndarray) -> np.ndarray:
        return self.logits(images).argmax(axis=1)

    def probabilities(self, images: np.ndarray) -> np.ndarray:
        logits = torch.as_tensor(self.logits(images))
        return torch.softmax(logits.double(), dim=1).numpy()

    def features(self, images: np.ndarray) -> np.ndarray:
        return self._batches(images, "features").astype(np.float64)


def _fit_cnn(
    images: np.ndarray, labels: np.ndarray, *, num_classes: int, seed: int, steps: int,
    batch_size: int = 128, lr: float = 1e-3, device: str | torch.device = "cpu",
) -> CNNClassifier:
    x = torch.as_tensor(images, dtype=torch.float32).to(device)
    y = torch.as_tensor(labels, dtype=torch.long).to(device)
    model = seeded(lambda: EvaluationCNN(channels=x.shape[1], image_size=x.shape[2],
                                         num_classes=num_classes),
                   torch.Generator().manual_seed(seed)).to(device)
    model.dropout_rng = torch.Generator(device=device).manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    order = torch.Generator().manual_seed(seed)
    model.train()
    per_epoch = max(1, math.ceil(len(x) / batch_size))
    perm = torch.randperm(len(x), generator=order)
    for step in range(steps):
        k = step % per_epoch
        if k == 0 and step:
            perm = torch.randperm(len(x), generator=order)
        idx = perm[k * batch_size : (k + 1) * batch_size].to(device)
        loss = F.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return CNNClassifier(model)


class _SklearnClassifier:
    def __init__(self, model: object) -> None:
        self.model = model

    def predict(self, images: np.ndarray) -> np.ndarray:
        return self.model.predict(images.reshape(len(images), -1))  # type: ignore[attr-defined]


def fit_classifier(
    kind: str,
    images: np.ndarray,
    labels: np.ndarray,
    *,
    num_classes: int,
    seed: int = 0,
    cnn_steps: int = 400,
    device: str | torch.device = "cpu",
) -> TrainedClassifier:
    """Train one of :data:`CLASSIFIER_KINDS` on ``images`` (float32 [N, C, H, W]).

    Args:
        device: where the CNN trains and predicts (the others run on the CPU).
        cnn_steps: optimiser steps (batch 128, Adam 1e-3) of the CNN (400: 0.98 test accuracy on the real digits, ~8 s on 2 cores): a fixed
            compute budget whatever the size of the synthetic set.

    Raises:
        ConfigError: unknown kind, or training data with fewer than two classes.
    """
    if kind not in CLASSIFIER_KINDS:
        raise ConfigError(f"unknown classifier {kind!r}; choose one of {', '.join(CLASSIFIER_KINDS)}")
    labels = np.asarray(labels, dtype=np.int64)
    if len(np.unique(labels)) < 2:
        raise ConfigError("a classifier needs training images of at least two classes")
    if kind == "cnn":
        return _fit_cnn(images, labels, num_classes=num_classes, seed=seed, steps=cnn_steps,
                        device=device)
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier

    flat = np.asarray(images, dtype=np.float32).reshape(len(images), -1)
    model = (LogisticRegression(max_iter=1000) if kind == "logreg"
             else MLPClassifier(random_state=seed))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(flat, labels)
    return _SklearnClassifier(model)
