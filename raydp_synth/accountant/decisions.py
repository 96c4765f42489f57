"""What the accountant answers a trial: a :class:`Decision`, and the reasons a
refusal gives (the start of its ``reason``; the rest says what was asked)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

__all__ = [
    "FINAL_PHASE",
    "REASON_BUDGET",
    "REASON_CHANGED",
    "REASON_FINAL_DONE",
    "REASON_INVALID",
    "REASON_NOT_DOMINATED",
    "REASON_NOT_DRAWN",
    "REASON_RERUN",
    "REASON_TRIAL_COUNT",
    "REASON_TUNING_UNFINISHED",
    "Decision",
    "now",
]

#: A grant entry's ``phase`` for the final run after a search (subsampled tuning's).
FINAL_PHASE = "final"

REASON_BUDGET = "budget exhausted"
REASON_TRIAL_COUNT = "the study's trial count is reached"
REASON_NOT_DRAWN = "the trial is not one of the study's K draws"
REASON_NOT_DOMINATED = "plan is not dominated by the study's reference plan"
REASON_INVALID = "not a valid plan"
REASON_CHANGED = "plan differs from the one already granted to this trial"
REASON_RERUN = "trial already ran"
REASON_TUNING_UNFINISHED = "the tuning phase has not finished"
REASON_FINAL_DONE = "the final run was already granted"


def now() -> str:
    """A ledger entry's time: UTC, ISO 8601, microseconds."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


@dataclass(frozen=True, kw_only=True)
class Decision:
    """:meth:`~raydp_synth.accountant.core.StudyBudget.decide`'s answer to one request.

    Attributes:
        trial_id: who asked.
        granted: whether the plan is granted.
        reason: why it was refused (None if granted).
        entry: the ledger entry to append before anyone learns of the decision, then
            to record; None for a retried request of a grant that is already recorded
            (nothing to append, nothing to record).
    """

    trial_id: str
    granted: bool
    reason: str | None
    entry: dict[str, Any] | None
    #: A grant's pricing state after it (compose: the composition with it), taken
    #: into the pricing strategy when the grant is recorded.
    _state: Any = field(default=None, repr=False, compare=False)
    _basis: int = field(default=-1, repr=False, compare=False)
