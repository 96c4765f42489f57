"""A small in-process worker context for the runtime's helpers."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

from raydp_synth.data import DataInfo, ImageDataset
from raydp_synth.privacy.plan import Mechanism, PrivacyPlan
from raydp_synth.runtime.context import WorkerContext

RECORDS = 40


def plan_of(*mechanisms: Mechanism) -> PrivacyPlan:
    return PrivacyPlan(mechanisms=mechanisms, delta=1e-5, target_epsilon=10.0)


@pytest.fixture
def make_context():
    """``make_context(plan, rank=0, auditor=None)``: a worker context on 40 noise
    records; its reports and log lines are collected on ``ctx.outbox``."""

    def make(plan: PrivacyPlan, *, rank: int = 0, auditor: Any = None) -> WorkerContext:
        rng = np.random.default_rng(0)
        train = ImageDataset(images=rng.uniform(-1, 1, (RECORDS, 1, 8, 8)).astype(np.float32),
                             labels=np.arange(RECORDS) % 4, num_classes=4, name="noise")
        outbox = SimpleNamespace(reports=[], states=[], lines=[])

        def report(metrics, state) -> None:
            outbox.reports.append(dict(metrics))
            outbox.states.append(state)

        ctx = WorkerContext(config=SimpleNamespace(seed=0), plan=plan,
                            data=DataInfo(num_records=RECORDS, image_size=8, channels=1,
                                          num_classes=4),
                            train=train, rank=rank, world_size=1, device=torch.device("cpu"),
                            noise_generator=torch.Generator().manual_seed(5), report=report,
                            log=outbox.lines.append, dp_seed=3, auditor=auditor)
        ctx.outbox = outbox  # type: ignore[attr-defined]
        return ctx

    return make
