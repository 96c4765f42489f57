"""The compiled step is the eager step: each ``torch.func`` method's loop (dpwgan, dpgan,
PrivImage's denoiser) runs with its per-record gradients compiled, and at audited
releases the auditor checks, with the loop's own state and draws, that the compiled
pre-noise sum equals the eager one to float tolerance and that it still moves by at
most the sensitivity when a record leaves (the contract suite's neighbour check).

The backend is ``aot_eager``: TorchDynamo's capture and AOTAutograd's graph, the
parts that could change what is computed, without the CPU's code generation (92 s
per shape here); a GPU runs ``inductor`` on the same graphs.
"""

from __future__ import annotations

from typing import Any

import pytest

from raydp_synth.data import data_info, load_training_data, parse_dataset_spec, parse_public_spec
from raydp_synth.methods import get_method
from raydp_synth.privacy.records import RecordBatch
from raydp_synth.runtime.context import WorkerContext
from tests.methods.loop_run import run_loop, shared_plan
from tests.methods.test_method_contract import NeighbourAuditor

BACKEND = "aot_eager"
RECORDS = 160


class CompiledAuditor(NeighbourAuditor):
    """The contract's neighbour check on the compiled function, and the eager
    function's sum beside the compiled one (the loop's context switched for the call)."""

    def __init__(self, plan: Any, contexts: list[WorkerContext]) -> None:
        super().__init__(plan)
        self.contexts = contexts
        self.compared = 0

    def __call__(self, mechanism: str, pre_noise: Any, batch: RecordBatch) -> None:
        if self.releases[mechanism] + 1 in (1, 2):
            (ctx,) = self.contexts
            compiled = pre_noise(batch)
            ctx.compile_backend = None
            try:
                eager = pre_noise(batch)
            finally:
                ctx.compile_backend = BACKEND
            scale = max(1.0, eager.abs().max().item())
            assert (compiled - eager).abs().max().item() <= 1e-5 * scale, mechanism
            self.compared += 1
        super().__call__(mechanism, pre_noise, batch)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["dpwgan", "dpgan", "privimage-d"])
def test_the_compiled_step_is_the_eager_step(name: str) -> None:
    splits, public = load_training_data(parse_dataset_spec("digits"), public=parse_public_spec("digits:fraction=0.3"))
    train = splits.train
    train = type(train)(images=train.images[:RECORDS], labels=train.labels[:RECORDS],
                        num_classes=train.num_classes, name="digits (compiled step)")
    method = get_method(name)
    public = public if method.requires_public else None
    info = data_info(train, public)
    config = method.make_config(dict(method.smoke_settings), info)
    plan = shared_plan(method, config, info)
    contexts: list[WorkerContext] = []
    auditor = CompiledAuditor(plan, contexts)
    run_loop(method, config, plan, info, train, public, auditor=auditor,
             compile_backend=BACKEND, contexts=contexts)
    poisson = [m.name for m in plan.mechanisms if m.sample_rate is not None]
    assert auditor.compared >= 2 * len(poisson)
    for mech in poisson:
        assert auditor.worst.get(mech), mech
