"""The classifiers of "classifier accuracy on synthetic data" (CAS).

The default three (:data:`DEFAULT_CLASSIFIERS`), as in PrivImage's evaluation (Li et
al. 2024, PrivImage, "CA"; App.: scikit-learn's LR and MLP with default
hyperparameters, and a CNN):

* ``logreg``: ``sklearn.linear_model.LogisticRegression`` on the pixels;
* ``mlp``: ``sklearn.neural_network.MLPClassifier`` (one hidden layer of 100
  ReLU units, Adam; scikit-learn's defaults) on the pixels;
* ``cnn``: :class:`EvaluationCNN`, the evaluation classifier of the DP-GAN
  literature (GS-WGAN, G-PATE, DataLens; Lin et al., DPAF, journal version Fig. 8, the
  "Keras MNIST CNN"): conv 3x3 with 32 maps, ReLU, conv 3x3 with 64 maps, ReLU,
  2x2 max-pool, dropout 0.25, dense 128, ReLU, dropout 0.5, dense to the classes.

And an option (in :data:`CLASSIFIER_KINDS`, not in the default set):

* ``resnet9``: :class:`ResNet9`, D. Page's fast CIFAR-10 ResNet-9 (2018, "How to
  train your ResNet"): a prep conv of 64 maps, layer 1 of 128 maps with a residual
  pair, layer 2 of 256, layer 3 of 512 with a residual pair, a global max-pool and
  a linear layer (logits scaled by 1/8); every conv 3x3, BatchNorm, ReLU. It is the
  ResNet-style CAS of DPImageBench (Gong et al. 2025, "DPImageBench: A Unified
  Benchmark for Differentially Private Image Synthesis"), whose classifiers train
  on 60,000 synthetic images (``--num-synthetic 60000``) and are scored on the real
  test split. A GPU network: on a CPU, train it on a few thousand images at most.

Each is trained with a fixed seed and no global random state (the CNN's initial
parameters, batch order and dropout masks come from generators of that seed), so
evaluations are reproducible.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Protocol

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from raydp_synth.errors import ConfigError
from raydp_synth.runtime.resources import one_blas_thread
from raydp_synth.runtime.seeding import seeded

__all__ = [
    "CLASSIFIER_STEPS",
    "CLASSIFIER_KINDS",
    "CNNClassifier",
    "DEFAULT_CLASSIFIERS",
    "EvaluationCNN",
    "ResNet9",
    "TrainedClassifier",
    "fit_classifier",
    "fit_resnet9",
]

#: The optimiser steps of the classifiers that train by steps (fit_classifier's
#: defaults): what a progress bar of their training counts.
CLASSIFIER_STEPS = {"cnn": 400, "resnet9": 2000}

#: Every classifier :func:`fit_classifier` trains.
CLASSIFIER_KINDS = ("logreg", "mlp", "cnn", "resnet9")
#: The CAS classifiers of an evaluation unless the user chooses.
DEFAULT_CLASSIFIERS = ("logreg", "mlp", "cnn")


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


def _conv_bn(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1, bias=False),
                         nn.BatchNorm2d(c_out), nn.ReLU())


class _Residual(nn.Module):
    """``x + f(x)``, ``f`` two conv-BN-ReLU blocks of ``channels`` maps."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.body = nn.Sequential(_conv_bn(channels, channels), _conv_bn(channels, channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


class ResNet9(nn.Module):
    """Page's ResNet-9 (see the module docstring), for 1- or 3-channel images.

    Three 2x2 max-pools halve the image three times (16 px: 2x2 maps before the
    global max-pool; 32 px: 4x4, Page's CIFAR-10 shape; 64 px: 8x8), so any size
    from 8 px works. ``width`` scales every layer (64: the published network).
    """

    def __init__(self, *, channels: int, image_size: int, num_classes: int,
                 width: int = 64) -> None:
        super().__init__()
        if image_size < 8:
            raise ConfigError(f"ResNet-9 needs images of at least 8x8, got {image_size}")
        w = width
        self.prep = _conv_bn(channels, w)
        self.layer1 = nn.Sequential(_conv_bn(w, 2 * w), nn.MaxPool2d(2), _Residual(2 * w))
        self.layer2 = nn.Sequential(_conv_bn(2 * w, 4 * w), nn.MaxPool2d(2))
        self.layer3 = nn.Sequential(_conv_bn(4 * w, 8 * w), nn.MaxPool2d(2), _Residual(8 * w))
        self.linear = nn.Linear(8 * w, num_classes, bias=False)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The pooled 8 * width activations before the linear layer."""
        x = self.layer3(self.layer2(self.layer1(self.prep(x))))
        return torch.amax(x, dim=(2, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.features(x)) * 0.125


class CNNClassifier:
    """A trained :class:`EvaluationCNN` or :class:`ResNet9` (eval mode, on its device;
    numpy in and out)."""

    def __init__(self, model: EvaluationCNN | ResNet9) -> None:
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
    on_step: Callable[[], None] | None = None,
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
        if on_step is not None:
            on_step()
    return CNNClassifier(model)


def fit_resnet9(
    images: np.ndarray, labels: np.ndarray, *, num_classes: int, seed: int, steps: int,
    batch_size: int = 256, max_lr: float = 2e-3, width: int = 64,
    device: str | torch.device = "cpu", on_step: Callable[[], None] | None = None,
) -> CNNClassifier:
    """Train :class:`ResNet9` (``fit_classifier("resnet9")``; ``width`` < 64 only
    for quick tests of the procedure).

    Adam under a one-cycle learning rate (warm-up to ``max_lr``, then annealing
    to ~0: the last steps settle the weights, so the final network is the one
    scored; no checkpoint is picked by its test accuracy). Initial parameters and
    batch order come from generators of ``seed``; BatchNorm draws nothing, so the
    global RNG is neither read nor changed.
    """
    x = torch.as_tensor(images, dtype=torch.float32).to(device)
    y = torch.as_tensor(labels, dtype=torch.long).to(device)
    model = seeded(lambda: ResNet9(channels=x.shape[1], image_size=x.shape[2],
                                   num_classes=num_classes, width=width),
                   torch.Generator().manual_seed(seed)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=max_lr)
    schedule = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=max_lr, total_steps=max(steps, 1))
    order = torch.Generator().manual_seed(seed)
    model.train()
    batch_size = min(batch_size, len(x))
    per_epoch = max(1, len(x) // batch_size)  # full batches only: BatchNorm needs > 1 record
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
        schedule.step()
        if on_step is not None:
            on_step()
    return CNNClassifier(model)


class _SklearnClassifier:
    def __init__(self, model: object) -> None:
        self.model = model

    def predict(self, images: np.ndarray) -> np.ndarray:
        with one_blas_thread():
            return self.model.predict(images.reshape(len(images), -1))  # type: ignore[attr-defined]


def fit_classifier(
    kind: str,
    images: np.ndarray,
    labels: np.ndarray,
    *,
    num_classes: int,
    seed: int = 0,
    cnn_steps: int = 400,  # CLASSIFIER_STEPS["cnn"]
    resnet9_steps: int = 2000,  # CLASSIFIER_STEPS["resnet9"]
    device: str | torch.device = "cpu",
    on_step: Callable[[], None] | None = None,
) -> TrainedClassifier:
    """Train one of :data:`CLASSIFIER_KINDS` on ``images`` (float32 [N, C, H, W]).

    Args:
        device: where the CNN and ResNet-9 train and predict (the others run on the CPU).
        cnn_steps: optimiser steps (batch 128, Adam 1e-3) of the CNN (400: 0.98 test accuracy on the real digits, ~8 s on 2 cores): a fixed
            compute budget whatever the size of the synthetic set.
        on_step: called after each optimiser step of the CNN and ResNet-9 (a
            progress bar's ``update``); the scikit-learn fits have no steps to count.
        resnet9_steps: optimiser steps (batch 256, one-cycle Adam) of ResNet-9:
            2,000 are ~8.5 epochs of 60,000 synthetic images, a fixed budget
            whatever their number.

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
                        device=device, on_step=on_step)
    if kind == "resnet9":
        return fit_resnet9(images, labels, num_classes=num_classes, seed=seed,
                            steps=resnet9_steps, device=device, on_step=on_step)
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier

    flat = np.asarray(images, dtype=np.float32).reshape(len(images), -1)
    model = (LogisticRegression(max_iter=1000) if kind == "logreg"
             else MLPClassifier(random_state=seed))
    with warnings.catch_warnings(), one_blas_thread():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(flat, labels)
    return _SklearnClassifier(model)
