"""DPAF's privacy schedule: three Poisson-subsampled Gaussian mechanisms.

``classifier`` (phase 1, DP-SGD on all of C), ``conv2`` (DP-SGD on conv2* every
mu iterations: the plan carries mu as the mechanism's cadence ``every``, which the
loop reads) and ``dpagg`` (the noisy sum of SIN features) each draw their own
independent Poisson samples, so the plan is their adaptive composition
(Lin et al. 2023, DPAF Theorem 5, with the corrections of docs/privacy.md).
Every other update (conv3*, FC*, G) is post-processing of these releases.
:meth:`raydp_synth.methods.base.Method.plan` calibrates the schedule (with the
run's selection score) into the plan.
"""

from __future__ import annotations

import math

from raydp_synth.data import DataInfo
from raydp_synth.errors import ConfigError
from raydp_synth.methods.dpaf.config import DPAFConfig
from raydp_synth.privacy.calibration import MechanismSpec

__all__ = ["CLASSIFIER", "CONV2", "DPAGG", "MECHANISMS", "dpaf_schedule"]

CLASSIFIER, CONV2, DPAGG = "classifier", "conv2", "dpagg"
MECHANISMS = (CLASSIFIER, CONV2, DPAGG)


def _rate(batch_size: float, n: int, name: str) -> float:
    q = batch_size / n
    if q > 1:
        raise ConfigError(
            f"{name}={batch_size:g} exceeds the {n} training records; use a smaller {name}"
        )
    return q


def dpaf_schedule(config: DPAFConfig, data: DataInfo) -> list[MechanismSpec]:
    """Sample rates, step counts and sensitivities of the three mechanisms."""
    n = data.num_records
    arch = config.architecture(channels=data.channels, num_classes=data.num_classes)
    q1 = _rate(config.classifier_batch_size, n, "classifier_batch_size")
    q3 = _rate(config.batch_size, n, "batch_size")
    q2 = min(1.0, config.mu * q3)
    t1 = math.ceil(config.classifier_epochs / q1)
    t3 = math.ceil(config.epochs / q3)
    t2 = t3 // config.mu
    if t2 < 1:
        raise ConfigError(
            f"mu={config.mu} exceeds the {t3} GAN iterations, so conv2* would never be "
            "trained; use a smaller mu or more epochs"
        )
    w1, w2, w3 = config.budget_split
    return [
        MechanismSpec(name=CLASSIFIER, sample_rate=q1, num_steps=t1,
                      sensitivity=config.clip_classifier, share=w1),
        MechanismSpec(name=CONV2, sample_rate=q2, num_steps=t2,
                      sensitivity=config.clip_conv2, share=w2, every=config.mu),
        MechanismSpec(name=DPAGG, sample_rate=q3, num_steps=t3,
                      sensitivity=arch.agg_sensitivity, share=w3),
    ]

