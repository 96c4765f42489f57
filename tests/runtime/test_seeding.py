"""Networks initialised from an explicit generator: reproducible, PyTorch's default
laws, and the global RNG neither read nor changed."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from raydp_synth.runtime.seeding import init_parameters_, seeded


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.up = nn.ConvTranspose2d(8, 4, 4, 2, 1)
        self.norm = nn.BatchNorm2d(4)
        self.group = nn.GroupNorm(2, 4)
        self.fc = nn.Linear(400, 10)
        self.embed = nn.Embedding(5, 6)


def _flat(module: nn.Module) -> torch.Tensor:
    return torch.cat([t.detach().float().flatten() for t in module.state_dict().values()])


def test_the_same_generator_state_gives_the_same_network() -> None:
    a = seeded(_Net, torch.Generator().manual_seed(7))
    torch.randn(100)  # global draws in between change nothing
    b = seeded(_Net, torch.Generator().manual_seed(7))
    c = seeded(_Net, torch.Generator().manual_seed(8))
    assert torch.equal(_flat(a), _flat(b))
    assert not torch.equal(_flat(a), _flat(c))


def test_the_global_rng_is_left_alone() -> None:
    before = torch.random.get_rng_state()
    seeded(_Net, torch.Generator().manual_seed(0))
    assert torch.equal(torch.random.get_rng_state(), before)


def test_pytorchs_default_laws() -> None:
    net = seeded(_Net, torch.Generator().manual_seed(0))
    for layer, fan_in in ((net.conv, 3 * 9), (net.fc, 400)):
        bound = 1 / math.sqrt(fan_in)  # Kaiming-uniform with a = sqrt(5)
        assert layer.weight.abs().max() <= bound
        assert layer.weight.std().item() == pytest.approx(bound / math.sqrt(3), rel=0.1)
        assert layer.bias.abs().max() <= bound
    assert net.embed.weight.std().item() == pytest.approx(1.0, rel=0.4)
    assert torch.equal(net.norm.weight, torch.ones(4)) and torch.equal(net.norm.bias, torch.zeros(4))
    assert torch.equal(net.norm.running_var, torch.ones(4))
    assert net.norm.num_batches_tracked.item() == 0
    assert torch.equal(net.group.weight, torch.ones(4))


def test_an_unknown_layer_is_refused() -> None:
    class Scale(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.factor = nn.Parameter(torch.ones(1))

    with pytest.raises(TypeError, match="Scale"):
        init_parameters_(nn.Sequential(nn.Linear(2, 2), Scale()), torch.Generator())
