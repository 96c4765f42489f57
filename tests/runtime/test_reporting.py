"""The epoch reporter: one report per epoch of the clock, epsilon_spent from the plan
and the releases made, the checkpoint schema, and no release beyond the plan."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from raydp_synth.privacy.plan import Mechanism
from raydp_synth.privacy.pricing import REPORT, STATED
from raydp_synth.runtime.reporting import EpochReporter
from tests.runtime.conftest import plan_of

# 0.3: epochs of ceil(1 / 0.3) = 4 releases; 10 releases = epochs 1, 2 and a last part.
CLOCK = Mechanism(name="critic", noise_multiplier=1.2, sample_rate=0.3, num_steps=10,
                  sensitivity=1.0)
QUERY = Mechanism(name="query", noise_multiplier=3.0, sample_rate=None, num_steps=1,
                  sensitivity=1.0)
NETWORKS = {"generator": nn.Linear(2, 2), "critic": nn.Linear(2, 1)}


def _run(ctx, **kwargs) -> EpochReporter:
    reporter = EpochReporter(ctx, tag="test", networks=NETWORKS, **kwargs)
    for step in range(1, CLOCK.num_steps + 1):
        reporter.released("critic")
        reporter.track("g_loss", float(step))
        reporter.after_release("critic", phase=2)
    return reporter


def test_one_report_per_epoch_with_means_and_the_spent_epsilon(make_context) -> None:
    plan = plan_of(QUERY, CLOCK)
    ctx = make_context(plan)
    _run(ctx, steps={"query": 1})
    reports = ctx.outbox.reports
    assert [(r["epoch"], r["step"]) for r in reports] == [(1, 4), (2, 8), (3, 10)]
    assert [r["g_loss"] for r in reports] == [2.5, 6.5, 9.5]  # this epoch's mean
    assert all(r["phase"] == 2 for r in reports)
    for r in reports:  # the cheap report pricing before the last release, the stated at it
        how = STATED if r["step"] == CLOCK.num_steps else REPORT
        spent = plan.spent_epsilon({"query": 1, "critic": int(r["step"])}, pricing=how)
        assert r["epsilon_spent"] == spent
    assert reports[-1]["epsilon_spent"] == pytest.approx(plan.epsilon(), rel=1e-12)
    assert len(ctx.outbox.lines) == 3 and ctx.outbox.lines[0].startswith("[test] critic epoch 1/3:")


def test_checkpoints_follow_the_schema_on_rank_zero_only(make_context) -> None:
    ctx = make_context(plan_of(CLOCK))
    _run(ctx)
    states = [s for s in ctx.outbox.states if s is not None]
    assert len(states) == 3  # every epoch: fewer than ten epochs in the run
    assert set(states[-1]) == {"generator", "critic", "steps"}
    assert states[-1]["steps"] == {"critic": 10}
    assert states[-1]["generator"].keys() == NETWORKS["generator"].state_dict().keys()
    other = make_context(plan_of(CLOCK), rank=1)
    _run(other)
    assert all(s is None for s in other.outbox.states)
    assert len(other.outbox.reports) == 3


def test_a_checkpoint_about_ten_times_a_run(make_context) -> None:
    long = dataclasses.replace(CLOCK, sample_rate=0.5, num_steps=50)  # 25 epochs
    ctx = make_context(plan_of(long))
    reporter = EpochReporter(ctx, tag="test", networks=NETWORKS)
    for _ in range(50):
        reporter.released("critic")
        reporter.after_release("critic")
    saved = [int(r["epoch"]) for r, s in zip(ctx.outbox.reports, ctx.outbox.states, strict=True)
             if s is not None]
    assert saved == [3, 6, 9, 12, 15, 18, 21, 24, 25]


def test_a_non_private_run_reports_no_epsilon(make_context) -> None:
    ctx = make_context(plan_of(CLOCK).without_noise())
    _run(ctx)
    assert all("epsilon_spent" not in r for r in ctx.outbox.reports)


def test_no_release_beyond_the_plan(make_context) -> None:
    reporter = _run(make_context(plan_of(CLOCK)))
    with pytest.raises(RuntimeError, match="exceeds the plan's 10"):
        reporter.released("critic")
    with pytest.raises(KeyError):
        reporter.released("not-in-the-plan")


def test_the_checkpoint_must_hold_the_released_generator(make_context) -> None:
    with pytest.raises(ValueError, match="generator"):
        EpochReporter(make_context(plan_of(CLOCK)), tag="test", networks={"critic": nn.Linear(1, 1)})


def test_tensor_metrics_report_the_same_means_as_their_items(make_context) -> None:
    """A loop tracks scalar tensors (no GPU synchronisation per step): the reported
    means are exactly those of the same values tracked as floats, and plain floats."""
    values = torch.rand(CLOCK.num_steps, generator=torch.Generator().manual_seed(0))
    outboxes = []
    for as_tensor in (False, True):
        ctx = make_context(plan_of(CLOCK))
        reporter = EpochReporter(ctx, tag="test", networks=NETWORKS)
        for value in values:
            reporter.released("critic")
            reporter.track("g_loss", value if as_tensor else value.item())
            reporter.after_release("critic")
        outboxes.append([r["g_loss"] for r in ctx.outbox.reports])
    assert outboxes[0] == outboxes[1]
    assert all(type(v) is float for v in outboxes[1])
