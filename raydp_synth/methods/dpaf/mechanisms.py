"""The pre-noise computations of DPAF's three mechanisms.

``*_pre_noise`` return what each mechanism noises, from a
:class:`~raydp_synth.privacy.records.RecordBatch` and the loop's current state; the
loop hands them to ``WorkerContext.pre_noise_sum``, where the neighbouring-dataset
contract test calls the very same functions with the loop's state.
"""

from __future__ import annotations

import torch
from opacus import GradSampleModule
from torch.nn import functional as F

from raydp_synth.methods.dpaf.networks import DiscriminatorParts, sin
from raydp_synth.privacy.dp_sgd import clipped_sum, per_record_gradients
from raydp_synth.privacy.noise import noisy_sum
from raydp_synth.privacy.records import RecordBatch

__all__ = ["classifier_pre_noise", "classifier_record_grads", "conv2_pre_noise",
           "conv2_record_grads", "dpagg", "dpagg_pre_noise", "feature_sum"]


def classifier_record_grads(
    classifier: GradSampleModule, images: torch.Tensor, labels: torch.Tensor
) -> list[torch.Tensor]:
    """Phase 1: per-record gradients of C's cross-entropy on record i alone.

    C sees no label input (the label it predicts would make the task trivial and
    conv1 would learn nothing about images); no aggregation couples records.
    """
    return per_record_gradients(
        classifier,
        lambda: F.cross_entropy(classifier(images), labels, reduction="sum"),
        batch_size=len(labels),
    )


def conv2_record_grads(
    conv2: GradSampleModule,
    parts: DiscriminatorParts,
    images: torch.Tensor,
    labels: torch.Tensor,
    direction: torch.Tensor,
) -> list[torch.Tensor]:
    """conv2*'s per-record gradients ``J_i^T v``.

    ``J_i`` is the Jacobian of record i's SIN features with respect to conv2*, and
    ``v = dL/dS`` the loss gradient at the latest *released* (noisy) aggregate, a
    function of released quantities only (``[K, m, p, p]`` for class-wise
    aggregation: record i uses its own class's block). Record i's term depends on
    record i and on released values alone: no un-noised aggregate couples the
    records (the correction of Lin et al. 2023, DPAF Algorithm 1, line 12).
    """

    # With class-wise aggregation, record i's direction is its own class's block.
    per_record = direction[labels] if direction.dim() == 4 else direction

    def loss() -> torch.Tensor:
        with torch.no_grad():
            h = parts.conv1(images)  # frozen, DP (phase 1)
        return (sin(conv2(h, labels)) * per_record).sum()

    return per_record_gradients(conv2, loss, batch_size=len(labels))


def feature_sum(
    parts: DiscriminatorParts, images: torch.Tensor, labels: torch.Tensor, *, by_class: bool = False,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """AGG: the sum over the batch of the records' SIN features.

    Returns ``[m, p, p]``, or with ``by_class`` the per-class sums ``[K, m, p, p]``.
    Each record contributes at most ``sqrt(m) * p`` in L2 norm (SIN) to exactly one
    block (its own label's), so either way adding or removing a record moves the
    released tensor by at most ``sqrt(m) * p``: the sensitivity DPAGG's noise is
    scaled to, and the same Gaussian event. ``weights`` (1 a record, 0 a padding
    row) multiply each row's features: a padding row adds exactly zero.
    """
    arch = parts.arch
    p = arch.agg_map_size
    shape = (arch.num_classes, arch.agg_maps, p, p) if by_class else (arch.agg_maps, p, p)
    if len(labels) == 0:
        return torch.zeros(shape, device=images.device)
    feats = parts.features(images, labels)
    if weights is not None:
        feats = feats * weights.to(feats).view(-1, *([1] * (feats.dim() - 1)))
    if not by_class:
        return feats.sum(dim=0)
    return torch.zeros(shape, device=feats.device, dtype=feats.dtype).index_add_(0, labels, feats)


def dpagg(
    parts: DiscriminatorParts,
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    noise_std: float,
    generator: torch.Generator | None,
    by_class: bool = False,
) -> torch.Tensor:
    """DPAGG: the feature sum(s) over all workers' batches plus N(0, noise_std^2), once.

    ``noise_std`` is the plan's ``sigma3 * sqrt(m) * p``, on every coordinate (every
    class block). Applied to a synthetic batch it costs no privacy; DPAF does so with
    the same noise_std so that real and synthetic aggregates are equally noisy.
    """
    with torch.no_grad():
        return noisy_sum(
            feature_sum(parts, images, labels, by_class=by_class),
            noise_std=noise_std,
            generator=generator,
        )


def classifier_pre_noise(classifier: GradSampleModule, batch: RecordBatch, *, clip: float,
                         topk_fraction: float) -> torch.Tensor:
    """Phase 1's pre-noise sum: ``sum_i clip_C(topk(g_i))`` of C's per-record
    cross-entropy gradients (record i's term from record i alone: sensitivity C)."""
    return clipped_sum(classifier_record_grads(classifier, batch.images, batch.labels),
                       max_grad_norm=clip, topk_fraction=topk_fraction,
                       shapes=[p.shape for p in classifier.parameters() if p.requires_grad],
                       weights=batch.weights)


def conv2_pre_noise(conv2: GradSampleModule, parts: DiscriminatorParts, direction: torch.Tensor,
                    batch: RecordBatch, *, clip: float, topk_fraction: float) -> torch.Tensor:
    """conv2*'s pre-noise sum: ``sum_i clip_C(topk(J_i^T v))`` with ``v`` the loss
    direction at the latest released aggregate (sensitivity C). Opacus' hooks are
    on only for this computation."""
    conv2.enable_hooks()
    try:
        grads = conv2_record_grads(conv2, parts, batch.images, batch.labels, direction)
    finally:
        conv2.disable_hooks()
    return clipped_sum(grads, max_grad_norm=clip, topk_fraction=topk_fraction,
                       shapes=[p.shape for p in conv2.parameters()], weights=batch.weights)


def dpagg_pre_noise(parts: DiscriminatorParts, batch: RecordBatch, *, by_class: bool
                    ) -> torch.Tensor:
    """DPAGG's pre-noise sum: the records' SIN feature sum(s) (sensitivity sqrt(m) p)."""
    with torch.no_grad():
        return feature_sum(parts, batch.images, batch.labels, by_class=by_class,
                           weights=batch.weights)
