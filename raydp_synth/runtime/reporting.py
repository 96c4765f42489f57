"""What a training loop reports, once per epoch: the one owner of the checkpoint
schema and of ``epsilon_spent``.

An epoch of a mechanism is ``ceil(1 / q)`` of its releases (an expected pass over
the data). At the end of each epoch of the loop's *clock* (the mechanism whose passes
make the epochs) :class:`EpochReporter` reports the running means of the loop's
tracked metrics, the epoch and step counters and ``epsilon_spent``; about ten times a
run, and at the clock's last release, rank 0 also saves a checkpoint.

Checkpoint schema (read by the driver, the tuner and the evaluation)::

    {"generator": <the released network's state_dict>,
     <other network name>: <its state_dict>, ...,
     "steps": {<plan mechanism>: <releases made so far>}}

Privacy: ``epsilon_spent`` is ``plan.spent_epsilon(steps)``, arithmetic on the plan
and on public step counters (a non-private reference run reports none); the other
values are the loop's, checked against the method's allow-list by the worker. It is
priced as the plan is stated at a loop's last release (so a finished run reports the
plan's epsilon) and by the cheaper, coarser ``pricing.REPORT`` before it (an upper bound
at each epoch; about 0.1 s for DPAF's plan).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from raydp_synth.errors import PrivacyInvariantError
from raydp_synth.log import epoch_line_label
from raydp_synth.privacy.pricing import REPORT, STATED
from raydp_synth.runtime.context import WorkerContext

__all__ = ["GENERATOR", "STEPS", "EpochReporter"]

#: The checkpoint key of the released network.
GENERATOR = "generator"
#: The checkpoint key of the releases made so far, by plan mechanism.
STEPS = "steps"


class EpochReporter:
    """Per-epoch metrics, ``epsilon_spent`` and checkpoints of one loop.

    Args:
        ctx: the worker's context (plan, rank, ``report``, ``log``).
        tag: the method's name, for log lines.
        networks: the networks a checkpoint saves, by key; ``"generator"`` is the
            release. Their state is read when a checkpoint is taken.
        steps: releases made before this loop (e.g. PrivImage's semantic query).
        checkpoints: about how many checkpoints a run saves.
    """

    def __init__(self, ctx: WorkerContext, *, tag: str, networks: Mapping[str, nn.Module],
                 steps: Mapping[str, int] | None = None, checkpoints: int = 10) -> None:
        if GENERATOR not in networks:
            raise ValueError(f"a checkpoint saves the released network as {GENERATOR!r}")
        self._ctx, self._tag, self._networks = ctx, tag, dict(networks)
        self._checkpoints = checkpoints
        self._steps = dict(steps or {})
        self._sums: dict[str, float | torch.Tensor] = {}
        self._counts: dict[str, int] = {}

    @property
    def steps(self) -> dict[str, int]:
        """Releases made so far, by plan mechanism (a copy; those given and those
        counted by :meth:`released`)."""
        return dict(self._steps)

    def released(self, mechanism: str) -> int:
        """Count one release of ``mechanism``; returns how many it has made.

        Raises:
            RuntimeError: more releases than the plan (and the accountant) allow.
        """
        planned = self._ctx.plan.mechanism(mechanism).num_steps
        count = self._steps.get(mechanism, 0) + 1
        if count > planned:
            raise PrivacyInvariantError(f"{mechanism}: release {count} exceeds the plan's {planned}")
        self._steps[mechanism] = count
        return count

    def track(self, key: str, value: float | torch.Tensor) -> None:
        """Add one value to the running mean of metric ``key`` (this epoch's).

        A scalar tensor is summed where it lives, in float64 (the same sum as of its
        ``.item()``), and read once per epoch: no GPU synchronisation per step."""
        if isinstance(value, torch.Tensor):
            value = value.detach().to(torch.float64)
        self._sums[key] = self._sums.get(key, 0.0) + value
        self._counts[key] = self._counts.get(key, 0) + 1

    def epsilon_spent(self, *, final: bool = True) -> float | None:
        """The epsilon of the releases made so far; None in a non-private run.

        ``final``: priced as the plan is stated (:data:`~raydp_synth.privacy.pricing.STATED`);
        otherwise by the cheaper :data:`~raydp_synth.privacy.pricing.REPORT` (a coarser,
        still valid upper bound), which the reporter uses before a loop's last release.
        """
        plan = self._ctx.plan
        if not plan.private:
            return None
        return plan.spent_epsilon(self._steps, pricing=STATED if final else REPORT)

    def checkpoint_state(self) -> dict[str, Any]:
        """The checkpoint of this moment (see the module docstring)."""
        state: dict[str, Any] = {name: net.state_dict() for name, net in self._networks.items()}
        state[STEPS] = self.steps
        return state

    def after_release(self, clock: str, *, checkpoint: bool = True, **fixed: float) -> None:
        """Call after each release of ``clock``: at the end of one of its epochs
        (or at its last release) report, log, and maybe checkpoint.

        Args:
            clock: the mechanism whose epochs these are.
            checkpoint: whether this phase of the loop saves checkpoints.
            fixed: constant metrics reported with each epoch (e.g. ``phase=2``).
        """
        mech = self._ctx.plan.mechanism(clock)
        step = self._steps.get(clock, 0)
        per_epoch = max(1, math.ceil(1 / mech.sample_rate)) if mech.sample_rate else 1
        last = step == mech.num_steps
        if step % per_epoch and not last:
            return
        epoch, epochs = math.ceil(step / per_epoch), math.ceil(mech.num_steps / per_epoch)
        metrics: dict[str, float] = {k: float(self._sums[k]) / self._counts[k] for k in self._sums}
        self._sums.clear()
        self._counts.clear()
        metrics.update(fixed)
        metrics.update(epoch=epoch, step=step)
        spent = self.epsilon_spent(final=last)
        if spent is not None:
            metrics["epsilon_spent"] = spent
        every = max(1, math.ceil(epochs / self._checkpoints))
        save = checkpoint and self._ctx.rank == 0 and (epoch % every == 0 or last)
        self._ctx.report(metrics, self.checkpoint_state() if save else None)
        self._ctx.log(f"[{self._tag}] {clock} epoch {epoch}/{epochs}: " + ", ".join(
            f"{epoch_line_label(k)}={v:.4g}" for k, v in sorted(metrics.items()) if k != "epoch"))
