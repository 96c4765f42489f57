"""Networks initialised from an explicit generator, never from the global RNG.

:func:`seeded` builds a network on the meta device (no draw at all) and then sets
every parameter and buffer with PyTorch's default laws, drawn from a given
``torch.Generator``: Kaiming-uniform weights (a = sqrt(5)) and U(-1/sqrt(fan_in),
1/sqrt(fan_in)) biases for linear and convolution layers, N(0, 1) embeddings, ones
and zeros (and fresh running statistics) for normalisation layers. The same
generator state gives the same parameters, on every rank, whatever else the process
drew before; nothing global is read or changed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar

import torch
from torch import nn
from torch.nn import init

__all__ = ["init_parameters_", "seeded"]

ModuleT = TypeVar("ModuleT", bound=nn.Module)

_NORMS = (nn.modules.batchnorm._NormBase, nn.GroupNorm, nn.LayerNorm)


def seeded(build: Callable[[], ModuleT], generator: torch.Generator) -> ModuleT:
    """``build()``'s network on the CPU, initialised from ``generator`` alone."""
    with torch.device("meta"):
        module = build()
    module.to_empty(device="cpu")
    init_parameters_(module, generator)
    return module


def init_parameters_(module: nn.Module, generator: torch.Generator) -> None:
    """(Re)initialise every parameter and buffer of ``module`` in place, in the
    order of ``module.modules()``, from ``generator`` (a CPU generator; the module
    on the CPU).

    Raises:
        TypeError: a layer that holds parameters or buffers of a kind this
            function does not know (it would otherwise keep a global-RNG draw).
    """
    with torch.no_grad():
        for layer in module.modules():
            if not any(True for _ in layer.parameters(recurse=False)) and not any(
                    True for _ in layer.buffers(recurse=False)):
                continue
            if isinstance(layer, (nn.Linear, nn.modules.conv._ConvNd)):
                init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
                if layer.bias is not None:
                    fan_in, _ = init._calculate_fan_in_and_fan_out(layer.weight)
                    bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
                    init.uniform_(layer.bias, -bound, bound, generator=generator)
            elif isinstance(layer, nn.Embedding):
                init.normal_(layer.weight, generator=generator)
                layer._fill_padding_idx_with_zero()
            elif isinstance(layer, _NORMS):
                layer.reset_parameters()  # ones, zeros, running statistics: no draw
            else:
                raise TypeError(f"no seeded initialisation for {type(layer).__name__}")
