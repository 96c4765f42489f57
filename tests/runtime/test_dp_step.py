"""The DP-SGD step: the records through the audited door on the mechanism's own
sample, the plan's noise once, the expected-batch divisor, then the optimiser."""

from __future__ import annotations

import pytest
import torch

from raydp_synth.privacy.dp_sgd import noised_release
from raydp_synth.privacy.plan import Mechanism
from raydp_synth.privacy.records import RecordBatch
from raydp_synth.runtime.dp_step import dp_sgd_step, step_with_gradient
from tests.runtime.conftest import RECORDS, plan_of

MECH = Mechanism(name="critic", noise_multiplier=1.5, sample_rate=0.25, num_steps=3,
                 sensitivity=0.7)


def _pre_noise(batch: RecordBatch) -> torch.Tensor:
    """Each record adds its label (a sum of per-record terms), over 3 coordinates."""
    return batch.labels.float().sum().repeat(3)


def test_the_step_is_the_plans_release_of_the_audited_sum(make_context) -> None:
    seen: list[tuple[str, RecordBatch]] = []
    ctx = make_context(plan_of(MECH), auditor=lambda name, fn, batch: seen.append((name, batch)))
    param = torch.nn.Parameter(torch.zeros(3))
    dp_sgd_step(ctx, "critic", _pre_noise, [param], torch.optim.SGD([param], lr=1.0))
    ((name, batch),) = seen
    assert name == "critic"
    # The same release by hand: the same noise draw, divided by qN (not the realised |B|).
    expected = noised_release(_pre_noise(batch), noise_std=1.5 * 0.7,
                              expected_batch_size=0.25 * RECORDS,
                              generator=torch.Generator().manual_seed(5))
    assert torch.allclose(param.detach(), -expected)
    assert param.grad is None


def test_each_step_draws_a_fresh_sample_of_the_mechanism(make_context) -> None:
    batches: list[RecordBatch] = []
    ctx = make_context(plan_of(MECH), auditor=lambda name, fn, batch: batches.append(batch))
    param = torch.nn.Parameter(torch.zeros(3))
    opt = torch.optim.SGD([param], lr=1.0)
    for _ in range(3):
        dp_sgd_step(ctx, "critic", _pre_noise, [param], opt)
    assert len({tuple(b.keys.tolist()) for b in batches}) == 3
    assert ctx.sampler("critic") is ctx.sampler("critic")


def test_post_processing_and_divisor_apply_after_the_noise(make_context) -> None:
    ctx = make_context(plan_of(MECH).without_noise())
    params = [torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(1))]
    dp_sgd_step(ctx, "critic", lambda batch: torch.ones(3), params,
                torch.optim.SGD(params, lr=1.0), expected_batch_size=2.0,
                post=lambda flat: flat * torch.tensor([1.0, 2.0, 3.0]))
    assert torch.equal(torch.cat([p.detach() for p in params]), -torch.tensor([0.5, 1.0, 1.5]))


def test_a_gradient_of_the_wrong_size_is_refused() -> None:
    param = torch.nn.Parameter(torch.zeros(3))
    with pytest.raises(ValueError, match="4 values"):
        step_with_gradient([param], torch.zeros(4), torch.optim.SGD([param], lr=1.0))
