"""SIN, the layer split and DPAF's shapes."""

from __future__ import annotations

import math

import pytest
import torch

from raydp_synth.errors import ConfigError
from raydp_synth.methods.dpaf.networks import (
    Architecture,
    DiscriminatorParts,
    Generator,
    LayerSplit,
    sin,
)
from raydp_synth.runtime.seeding import seeded


@pytest.mark.parametrize("p", [2, 4, 8])
def test_sin_gives_each_map_norm_p(p: int) -> None:
    rng = torch.Generator().manual_seed(0)
    x = torch.randn(5, 7, p, p, generator=rng) * torch.logspace(-2, 3, 7)[None, :, None, None] + 11.0
    norms = sin(x).flatten(2).norm(dim=2)
    # Never above p (the privacy bound); exactly p once the variance dwarfs SIN's eps.
    assert torch.all(norms <= p * (1 + 1e-6))
    assert torch.allclose(norms[:, 3:], torch.full_like(norms[:, 3:], float(p)), rtol=1e-4)


def test_sin_of_a_constant_map_stays_bounded() -> None:
    out = sin(torch.full((1, 3, 4, 4), 5.0))
    assert out.flatten(2).norm(dim=2).max() <= 4.0


@pytest.mark.parametrize(("text", "expected"), [
    ("C2-C1-x", LayerSplit(2, 1, 0)), ("C2-C2-C1", LayerSplit(2, 2, 1)), ("1-1-1", LayerSplit(1, 1, 1)),
])
def test_layer_split_parse(text: str, expected: LayerSplit) -> None:
    assert LayerSplit.parse(text) == expected


@pytest.mark.parametrize("text", ["C0-C1-x", "C1-C0-x", "C2-C1", "two-one-none", "C2-C1-C-1"])
def test_layer_split_rejects(text: str) -> None:
    with pytest.raises(ConfigError, match="layer_split"):
        LayerSplit.parse(text)


def test_split_must_fit_the_image_size() -> None:
    Architecture(image_size=16, channels=1, num_classes=10, split=LayerSplit(2, 1, 0), base_width=8, latent_dim=4)
    with pytest.raises(ConfigError, match="at most 3"):
        Architecture(image_size=16, channels=1, num_classes=10, split=LayerSplit(2, 1, 1), base_width=8, latent_dim=4)
    Architecture(image_size=32, channels=1, num_classes=10, split=LayerSplit(2, 1, 1), base_width=8, latent_dim=4)


@pytest.mark.parametrize(("size", "split"), [(16, "C2-C1-x"), (16, "C1-C1-C1"), (32, "C2-C1-C1"), (32, "C1-C2-x")])
def test_shapes_and_sensitivity(size: int, split: str) -> None:
    arch = Architecture(image_size=size, channels=3, num_classes=4, split=LayerSplit.parse(split),
                        base_width=8, latent_dim=16)
    rng = torch.Generator().manual_seed(0)
    parts, gen = seeded(lambda: DiscriminatorParts(arch), rng), seeded(lambda: Generator(arch), rng)
    labels = torch.tensor([0, 1, 2, 3, 0])
    images = gen(torch.randn(5, 16, generator=rng), labels)
    assert images.shape == (5, 3, size, size)
    assert images.min() >= -1 and images.max() <= 1
    feats = parts.features(images, labels)
    m, p = arch.agg_maps, arch.agg_map_size
    assert feats.shape == (5, m, p, p)
    assert arch.agg_sensitivity == pytest.approx(math.sqrt(m) * p)
    record_norms = feats.flatten(1).norm(dim=1)
    assert torch.all(record_norms <= arch.agg_sensitivity * (1 + 1e-6))
    assert torch.all(record_norms >= 0.8 * arch.agg_sensitivity)
    assert parts.head(feats.mean(0, keepdim=True)).shape == (1,)
    assert parts.d_hat(images, labels).shape == (5,)


def test_discriminator_has_no_batch_statistics() -> None:
    arch = Architecture(image_size=16, channels=1, num_classes=10, split=LayerSplit(2, 1, 0), base_width=8, latent_dim=4)
    norms = [m for m in DiscriminatorParts(arch).modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    assert norms == []
