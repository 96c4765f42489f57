"""The study's searcher: Optuna's proposals, gated by the accountant.

Imported only when a study starts (it needs Ray Tune).
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import ray
from ray.tune.search import Searcher

from raydp_synth.accountant import get_accountant

_LOG = logging.getLogger(__name__)

__all__ = ["MANY_NO_OPS", "MAX_UNGRANTED_IN_A_ROW", "WAIT_SECONDS", "BudgetAwareSearch"]

#: Consecutive trials that end without a grant (invalid configs, planning errors)
#: after which the search gives up: they read no data, but something is wrong.
#: Under random stopping a draw that cannot run is granted a no-op instead (one of
#: the K runs): :data:`MANY_NO_OPS` warns about those.
MAX_UNGRANTED_IN_A_ROW = 10

#: Under random stopping, the share of the finished trials (from the fourth on)
#: granted a no-op (draws that cannot run) at which the search warns, once: each such
#: draw spends one of the K runs on nothing.
MANY_NO_OPS = 0.5

#: While K draws are made and some trial is still out, how long the search waits
#: before it asks the accountant again (Tune asks for a trial at every step).
WAIT_SECONDS = 1.0


class BudgetAwareSearch(Searcher):
    """Wraps a Tune searcher: each proposal is first a draw the accountant records
    (random stopping grants the first K draws only); stops suggesting once the
    accountant draws no more, so the study ends without killing trials already
    granted; and
    stops after :data:`MAX_UNGRANTED_IN_A_ROW` trials in a row end without a grant.
    Per-epoch results are not forwarded (no pruning: FIFO).

    Args:
        inner: the Optuna search that proposes.
        study_name: the study (its accountant).
        failures_are_runs: a trial that ends before it asks keeps its draw as a no-op
            run instead of giving it back (DP-HyPO: an adaptive proposal redrawn after
            a configuration-dependent failure could exceed its density bound;
            :meth:`~raydp_synth.accountant.actor.BudgetAccountant.undraw`).
    """

    def __init__(self, inner: Searcher, study_name: str, *,
                 failures_are_runs: bool = False) -> None:
        super().__init__(metric=inner.metric, mode=inner.mode)
        self.inner = inner
        self.study_name = study_name
        self.failures_are_runs = failures_are_runs
        self.ungranted_in_a_row = 0
        self.finished = 0
        self.no_ops = 0  # granted, but invalid: a draw that could not run
        self.warned_no_ops = False
        self.out: set[str] = set()  # proposed, not complete
        self.waiting_until = 0.0  # time.monotonic() before which suggest waits unasked

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict,
                              **spec: Any) -> bool:
        return self.inner.set_search_properties(metric, mode, config, **spec)

    # Ray's Searcher.suggest may return Searcher.FINISHED (a str), though its
    # annotation says dict | None.
    def suggest(self, trial_id: str) -> dict | str | None:  # type: ignore[override]
        """The inner searcher's proposal for ``trial_id``, once the accountant has
        recorded the draw; None (not now) while K draws are made but a trial this search
        proposed is still out (it may end before it asks, and be drawn again); FINISHED
        when the accountant draws no more (random stopping: K draws, each granted or
        refused; compose: the budget is spent) or too many trials in a row went
        ungranted.

        The draw is recorded before the inner searcher proposes, so the j-th recorded
        draw is the j-th proposal, and under random stopping the trials granted are the
        first K proposals, whatever order their trials then ask in (several run at once
        under ``--max-concurrent``)."""
        if self.ungranted_in_a_row >= MAX_UNGRANTED_IN_A_ROW:
            _LOG.warning(f"{self.ungranted_in_a_row} trials in a row ended without a "
                  "grant (see their errors, or the 'reason' in their results); stopping "
                  "the search")
            return Searcher.FINISHED
        if self.out and time.monotonic() < self.waiting_until:
            return None  # Tune asks at every step: ask the accountant once a second
        accountant = get_accountant(self.study_name)
        answer = ray.get(accountant.draw.remote(trial_id))
        if answer == "wait" and self.out:
            self.waiting_until = time.monotonic() + WAIT_SECONDS
            return None
        if answer != "drawn":
            status = ray.get(accountant.status.remote())
            if status.get("ledger_error"):
                _LOG.warning(f"stopping the search: {status['ledger_error']}")
            # "wait" with nothing of ours out: the drawn trials still out are those a
            # --resume restored; they finish the draws, and a study whose draws never
            # all ask releases nothing (it says so, and how to resume).
            return Searcher.FINISHED
        try:
            proposal = self.inner.suggest(trial_id)
        except BaseException:
            # No trial: no run (under DP-HyPO a no-op run: whether the proposal raises
            # may depend on the history it adapts to).
            self._end_draw(trial_id)
            raise
        if proposal is None or proposal == Searcher.FINISHED:
            self._end_draw(trial_id)
        else:
            self.out.add(trial_id)
        return proposal

    def _end_draw(self, trial_id: str) -> None:
        """``trial_id``'s draw, if neither granted nor refused, is given back (the
        search draws again in its place) or, with ``failures_are_runs``, granted as a
        no-op run (:meth:`~raydp_synth.accountant.actor.BudgetAccountant.undraw`)."""
        ray.get(get_accountant(self.study_name).undraw.remote(
            [trial_id], None, self.failures_are_runs))

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        pass  # per-epoch training metrics: no pruning on them (FIFO)

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        granted = bool(result and result.get("granted")) and not error
        if trial_id in self.out:
            self.out.discard(trial_id)
            self.waiting_until = 0.0
            # A trial that ended before it asked for a grant (it failed, or Tune stopped
            # it) read nothing: its draw is taken back and the search draws again in its
            # place (under DP-HyPO it is granted a no-op instead: one of the K runs). A
            # trial that was granted or refused keeps its draw (one of the K runs): the
            # accountant takes back only draws that were neither.
            self._end_draw(trial_id)
        self.ungranted_in_a_row = 0 if granted else self.ungranted_in_a_row + 1
        self.finished += 1
        self.no_ops += int(granted and bool(result and result.get("invalid")))
        if (not self.warned_no_ops and self.finished >= 4
                and self.no_ops >= MANY_NO_OPS * self.finished):
            self.warned_no_ops = True
            _LOG.warning(f"{self.no_ops} of the {self.finished} trials so far drew a "
                         "configuration that cannot run at this budget (see the 'reason' "
                         "in their results); each still spends one of random stopping's "
                         "trials: narrow the search space (e.g. its batch sizes) or raise "
                         "--epsilon")
        if result is not None and not granted and not result.get("invalid"):
            # Refused (budget, a rerun after a crash, the ledger): says nothing about
            # the configuration, so Optuna records a failed trial, which TPE ignores.
            result, error = None, True
        elif result is not None and not math.isfinite(result.get("score", 0.0)):
            result = {**result, "score": -1.0}  # an invalid config; Optuna wants finite values
        self.inner.on_trial_complete(trial_id, result=result, error=error)

    def save(self, checkpoint_path: str) -> None:
        self.inner.save(checkpoint_path)

    def restore(self, checkpoint_path: str) -> None:
        self.inner.restore(checkpoint_path)
