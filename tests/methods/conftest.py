"""The methods' tests run their loops on one torch thread.

Their tensors are small (batches of 8 to 24 images of 16x16 to 64x64), and a
second intra-op thread on CI's two cores costs more than it gains: tests/methods
took 162 s with two threads and 145 s with one on a quiet two-core machine, and
several times longer with two on a busy one. (tests/evaluation, whose CNNs are
larger, is faster with two when run alone. Under the suite's two xdist workers every
test computes on one thread: tests/conftest.py.)
"""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True, scope="package")
def _one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
