"""Run a method's DP loop in-process on one worker and collect what it reports."""

from __future__ import annotations

from typing import Any

import torch

from raydp_synth.methods.base import Method
from raydp_synth.runtime.context import WorkerContext

_PLANS: dict[tuple[Any, ...], Any] = {}


def shared_plan(method: Any, config: Any, info: Any, *, target_epsilon: float = 3.0,
                delta: float = 1e-5) -> Any:
    """``method.plan(config, ...)``, calibrated once per schedule. Calibration takes
    seconds, and ``Method.plan`` (which no method overrides) reads only the schedule:
    configs that differ in what the schedule does not see (an aggregation mode, a
    seed, the image size of a GAN) share the plan, which is immutable."""
    assert type(method).plan is Method.plan, f"{method.name} overrides Method.plan"
    key = (method.name, tuple(method.schedule(config, info)), target_epsilon, delta)
    if key not in _PLANS:
        _PLANS[key] = method.plan(config, target_epsilon=target_epsilon, delta=delta, data=info)
    return _PLANS[key]


def run_loop(method: Any, config: Any, plan: Any, info: Any, train: Any,
             public: Any = None, *, auditor: Any = None, dp_seed: int = 1,
             compile_backend: str | None = None, contexts: list[WorkerContext] | None = None,
             ) -> tuple[list[dict[str, float]], list[dict[str, Any]]]:
    """``(reports, checkpoint states)`` of ``method.train`` on one CPU worker (the
    context it made appended to ``contexts``, where given, before the loop starts)."""
    reports: list[dict[str, float]] = []
    states: list[dict[str, Any]] = []

    def report(metrics, state) -> None:
        reports.append(dict(metrics))
        if state is not None:
            states.append(state)

    ctx = WorkerContext(config=config, plan=plan, data=info, train=train, rank=0, world_size=1,
                        device=torch.device("cpu"), noise_generator=torch.Generator().manual_seed(0),
                        report=report, log=lambda line: None, dp_seed=dp_seed, public=public,
                        auditor=auditor, compile_backend=compile_backend)
    if contexts is not None:
        contexts.append(ctx)
    method.train(ctx)
    return reports, states
