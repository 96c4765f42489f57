"""DPAF's typed configuration (the search space's keys are these field names)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from raydp_synth.config import (
    ARCHITECTURE,
    BUDGET_WEIGHTS,
    CLIP_NORM,
    EPOCHS,
    LEARNING_RATE,
    SCHEDULE,
    SENSITIVE_BATCH,
    MethodConfig,
    require_positive,
)
from raydp_synth.errors import ConfigError
from raydp_synth.methods.dpaf.networks import Architecture, LayerSplit

__all__ = ["DPAFConfig"]


@dataclass(frozen=True, kw_only=True)
class DPAFConfig(MethodConfig):
    """Hyperparameters of one privacy-corrected DPAF run.

    The defaults are the best private configuration measured on the embedded digits
    (n=1442, epsilon=10; bench/results/utility/NOTES.md section 4.1): few, narrow feature maps (a
    small sqrt(m)*p) at 4x4 resolution (``C1-C1-x``) and large DPAGG batches give the
    aggregates a usable signal-to-noise ratio; G is wide (its width costs no
    privacy), takes several (free) steps per release, is trained on the synthetic
    aggregate (``generator_loss="aggregate"``) and with a smoothness prior: a batch
    mean of features cannot see pixel noise that is independent across records, so
    without the prior G's samples keep it. The paper's canonical MNIST values (60,000
    records) are batch_size=24, mu=8, base widths of cDCGAN and G trained through
    D-hat; the tuner searches these.

    Attributes:
        image_size: side of the images the networks are built for (power of two).
        layer_split: ``Cx1-Cx2-Cx3``, conv layers of conv1 | conv2* | conv3*.
        base_width: channels of D's first conv layer (doubling per layer); it sets
            m and so DPAGG's sensitivity sqrt(m)*p.
        g_base_width: G's base width (G mirrors D; None: base_width). G only sees
            synthetic data, so its capacity costs no privacy.
        latent_dim: dimension of G's Gaussian latent vector (paper: 100).
        batch_size: expected DPAGG batch size B; DPAGG samples at rate q3 = B / n.
        mu: asymmetry multiplier; conv2* takes a DP-SGD step every mu iterations
            on its own Poisson sample of rate q2 = mu * q3 (the virtual batch mu*B).
        n_critic: G is updated every n_critic iterations.
        g_steps: G steps each time it is updated (post-processing: free of privacy
            cost; more G steps per DPAGG release when releases are few).
        epochs: length of the GAN phase, in expected passes of DPAGG over the data.
        classifier_epochs: length of phase 1 (classifier C), in expected passes.
        classifier_batch_size: expected batch size of phase 1.
        budget_split: relative budget weights (classifier, conv2*, DPAGG), e.g.
            the paper's canonical (0.01, 0.98, 0.01) for epsilon 10.
        lr_classifier, lr_d, lr_g: Adam learning rates (C; conv3*/FC*; G).
        lr_conv2: Adam learning rate of conv2*'s DP-SGD steps (default: lr_d).
        clip_classifier: per-record clip norm of phase 1's DP-SGD.
        clip_conv2: per-record clip norm of conv2*'s DP-SGD.
        topk_fraction: fraction of each per-record gradient kept (by magnitude)
            before clipping (gradient compression; paper: 0.9).
        aggregation: ``"batch"`` (the paper: DPAGG sums the whole batch) or
            ``"class"`` (DPAGG releases the per-class sums; a record is in exactly
            one class block, so the sensitivity and the privacy cost are the same,
            and the head learns class-conditional aggregates).
        generator_loss: ``"aggregate"`` (G's BCE through the head on the synthetic
            batch's aggregate, with DPAGG's noise law: the head's own input) or
            ``"d_hat"`` (the paper: G's BCE through D without aggregation, per
            synthetic record, an input the head never saw in training).
            Both see synthetic records only.
        g_smoothness: weight of a total-variation penalty on G's synthetic images
            (the mean absolute difference of neighbouring pixels), added to G's
            loss: a data-independent prior against the pixel noise that batch
            aggregates cannot see (0: off). Post-processing: no privacy cost.
        seed: public seed of initialisation and synthetic draws (Poisson sampling
            and noise use the run's secret seed, never this one).
    """

    KINDS: ClassVar[Mapping[str, str]] = {
        "layer_split": ARCHITECTURE, "base_width": ARCHITECTURE, "g_base_width": ARCHITECTURE,
        "latent_dim": ARCHITECTURE, "aggregation": ARCHITECTURE, "generator_loss": ARCHITECTURE,
        "g_smoothness": ARCHITECTURE, "batch_size": SENSITIVE_BATCH,
        "classifier_batch_size": SENSITIVE_BATCH, "mu": SCHEDULE, "n_critic": SCHEDULE,
        "g_steps": SCHEDULE, "epochs": EPOCHS, "classifier_epochs": EPOCHS,
        "budget_split": BUDGET_WEIGHTS, "lr_classifier": LEARNING_RATE, "lr_d": LEARNING_RATE,
        "lr_g": LEARNING_RATE, "lr_conv2": LEARNING_RATE, "clip_classifier": CLIP_NORM,
        "clip_conv2": CLIP_NORM, "topk_fraction": CLIP_NORM}

    layer_split: str = "C1-C1-x"
    base_width: int = 4
    g_base_width: int | None = 32
    latent_dim: int = 100
    batch_size: int = 512
    mu: int = 1
    n_critic: int = 1
    g_steps: int = 4
    epochs: float = 100.0
    classifier_epochs: float = 3.0
    classifier_batch_size: int = 64
    budget_split: tuple[float, ...] = (0.05, 0.25, 0.7)
    lr_classifier: float = 1e-3
    lr_d: float = 1e-3
    lr_g: float = 5e-4
    lr_conv2: float | None = None
    clip_classifier: float = 1.0
    clip_conv2: float = 1.0
    topk_fraction: float = 0.9
    aggregation: str = "class"
    generator_loss: str = "aggregate"
    g_smoothness: float = 1.0

    def __post_init__(self) -> None:
        LayerSplit.parse(self.layer_split)
        require_positive(
            self,
            integers=("base_width", "latent_dim", "batch_size", "mu", "n_critic", "g_steps",
                      "classifier_batch_size"),
            floats=("epochs", "classifier_epochs", "lr_classifier", "lr_d", "lr_g",
                    "clip_classifier", "clip_conv2"),
        )
        if not (math.isfinite(self.g_smoothness) and self.g_smoothness >= 0):
            raise ConfigError(f"Expected g_smoothness={self.g_smoothness} >= 0.")
        if self.g_base_width is not None and self.g_base_width < 1:
            raise ConfigError(f"Expected g_base_width={self.g_base_width} >= 1.")
        if self.lr_conv2 is not None and not (math.isfinite(self.lr_conv2) and self.lr_conv2 > 0):
            raise ConfigError(f"Expected lr_conv2={self.lr_conv2} > 0.")
        if not 0 < self.topk_fraction <= 1:
            raise ConfigError(f"Expected 0 < topk_fraction={self.topk_fraction} <= 1.")
        if self.aggregation not in ("batch", "class"):
            raise ConfigError(f"aggregation={self.aggregation!r} must be 'batch' or 'class'")
        if self.generator_loss not in ("d_hat", "aggregate"):
            raise ConfigError(
                f"generator_loss={self.generator_loss!r} must be 'd_hat' or 'aggregate'"
            )
        if len(self.budget_split) != 3 or not all(
            math.isfinite(s) and s > 0 for s in self.budget_split
        ):
            raise ConfigError(
                f"budget_split={self.budget_split} must be three positive weights "
                "(classifier, conv2*, DPAGG), e.g. 0.05,0.6,0.35"
            )

    def architecture(self, *, channels: int, num_classes: int) -> Architecture:
        return Architecture(
            image_size=self.image_size,
            channels=channels,
            num_classes=num_classes,
            split=LayerSplit.parse(self.layer_split),
            base_width=self.base_width,
            latent_dim=self.latent_dim,
            generator_width=self.g_base_width,
        )
