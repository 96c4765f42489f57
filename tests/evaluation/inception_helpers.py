"""A randomly initialised FID Inception-v3 saved as a weights file (no download).

Tests read it through the same path as the real weights. ``small_inputs`` makes the
network resize to 75x75 (Inception-v3's smallest input) instead of 299x299, about 16
times less compute on CPU: with random weights the resolution is as arbitrary as the
weights, and one slow test runs the real 299x299 path.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import pytest
import torch

from raydp_synth.evaluation.inception import extractor_class


def write_random_inception_weights(path: Path, *, seed: int = 0) -> Path:
    """A state dict of the Inception network with He-initialised convolutions (so the
    activations keep their scale through its ~95 layers), saved to ``path``."""
    cls = extractor_class()
    module = sys.modules[cls.__module__]
    torch.manual_seed(seed)
    # The constructor loads weights (from a URL when given no path): skip that load.
    with mock.patch.object(cls, "load_state_dict", lambda self, state: None), \
            mock.patch.object(module, "load_state_dict_from_url", lambda *a, **k: {}):
        network = cls("inception-v3-compat", ["2048"])
    for layer in network.modules():
        if isinstance(layer, torch.nn.Conv2d):
            torch.nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
    torch.save(network.state_dict(), path)
    return path


@contextmanager
def small_inputs(size: int = 75) -> Iterator[None]:
    """The Inception network resizes its inputs to ``size`` instead of 299."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(extractor_class(), "INPUT_IMAGE_SIZE", size)
        yield
