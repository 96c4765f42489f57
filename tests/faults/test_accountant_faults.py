"""Fault injection on the budget accountant (a real, detached Ray actor).

Each test breaks something while the accountant works (its process, its ledger's
storage) and checks two invariants (docs/architecture.md, invariants 2 and 7): the
ledger loses no grant that anyone received, and the study never spends beyond its
budget.
"""

from __future__ import annotations

import os
import secrets
import signal
from pathlib import Path

import pytest
import ray
from ray import tune
from ray.tune.search import Searcher
from ray.tune.search.optuna import OptunaSearch

from raydp_synth.accountant import LEDGER_NAME, Ledger, get_or_create_accountant
from raydp_synth.accountant.actor import REASON_LEDGER
from raydp_synth.accountant.core import REASON_BUDGET
from raydp_synth.tune.searcher import BudgetAwareSearch
from tests.accountant.test_actor import (
    DELTA,
    _compose,
    _epsilon,
    _grants,
    _name,
    _pid,
    _plan,
    _replay_check,
)

pytestmark = [pytest.mark.ray, pytest.mark.fault]


def _crash(handle) -> None:
    """SIGKILL the actor's process: a crash, not a polite ray.kill."""
    os.kill(_pid(handle), signal.SIGKILL)


def test_crashes_during_a_burst_of_requests_lose_no_grant_and_never_overspend(
        ray_local, tmp_path):
    """40 trials ask at once; the accountant's process is SIGKILLed twice mid-burst.
    Ray restarts it from the ledger and retries the calls in flight: every caller
    gets an answer, every grant that any caller received is in the ledger exactly
    once, every refusal could not have fit, and the total is within budget."""
    # Stated epsilon 0.46-0.96 each, 5.2 together: the budget of 2 fits about a third.
    # Short, noisy plans: every decision and each restart's replay prices its
    # composition by PLD, whose cost grows with the steps and falls with the noise.
    plans = {f"t{i:02d}": _plan(1.8 + 0.05 * i, 0.05 + 0.002 * i, 10 + i)
             for i in range(40)}
    budget = 2.0
    handle = get_or_create_accountant(tmp_path, _name("burst"), **_compose(budget, 40))
    try:
        attempts = {t: secrets.token_hex(8) for t in plans}
        refs = [handle.request.remote(t, plans[t], attempt=attempts[t]) for t in plans]
        crashes = 0
        for served in (3, 15):
            ray.wait(refs, num_returns=served, timeout=120)
            _crash(handle)
            crashes += 1
        replies = ray.get(refs, timeout=300)
        assert crashes == 2

        granted = {r["trial_id"] for r in replies if r["granted"]}
        refused = {r["trial_id"] for r in replies if not r["granted"]}
        assert granted and refused, "the burst should both fill and exceed the budget"
        assert all(r["reason"].startswith(REASON_BUDGET) for r in replies if not r["granted"])
        ledger_grants = [g["trial_id"] for g in _grants(tmp_path)]
        assert len(ledger_grants) == len(set(ledger_grants))  # nobody charged twice
        assert set(ledger_grants) == granted  # every received grant is durable, no more
        entries = Ledger(tmp_path / LEDGER_NAME).entries()
        replayed = _replay_check(entries, plans, budget)
        status = ray.get(handle.status.remote())
        assert status["spent_epsilon"] == pytest.approx(replayed.get_epsilon(DELTA), rel=1e-12)
        assert status["spent_epsilon"] <= budget
        assert status["trials_granted"] == len(granted)
    finally:
        ray.kill(handle, no_restart=True)


def _full_disk(ledger: Path, aside: Path) -> None:
    ledger.rename(aside)
    ledger.symlink_to("/dev/full")  # every write fails with ENOSPC


def _storage_gone(ledger: Path, aside: Path) -> None:
    ledger.rename(aside)  # as if the shared storage were unmounted


def _read_only(ledger: Path, aside: Path) -> None:
    os.chmod(ledger, 0o400)


def _undo(ledger: Path, aside: Path) -> None:
    if aside.exists():
        if ledger.is_symlink() or ledger.exists():
            ledger.unlink()
        aside.rename(ledger)
    os.chmod(ledger, 0o600)


FAULTS = {"full disk": (_full_disk, "No space left on device"),
          "storage gone": (_storage_gone, "No such file or directory")}
if os.geteuid() != 0:  # root writes a read-only file anyway
    FAULTS["read-only ledger"] = (_read_only, "Permission denied")


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_ledger_that_cannot_be_written_fails_closed(ray_local, tmp_path, fault):
    """The accountant refuses every grant it cannot make durable, says why and how
    to fix it, stops the search (``can_grant`` False, the searcher finishes), keeps
    the ledger as it was, and grants again once the ledger can be written."""
    plans = {t: _plan(1.5, 0.05, 100) for t in ("t0", "t1", "t2")}
    name = _name("ledger")
    handle = get_or_create_accountant(tmp_path, name, **_compose(20.0))
    ledger, aside = tmp_path / LEDGER_NAME, tmp_path / "ledger.aside"
    search = BudgetAwareSearch(
        OptunaSearch(space={"x": tune.uniform(0, 1)}, metric="score", mode="max"), name)
    try:
        assert ray.get(handle.request.remote("t0", plans["t0"], attempt="a0"))["granted"]
        spent = ray.get(handle.status.remote())["spent_epsilon"]
        before = ledger.read_bytes()

        breaks, strerror = FAULTS[fault]
        breaks(ledger, aside)
        try:
            reply = ray.get(handle.request.remote("t1", plans["t1"], attempt="a1"))
            assert not reply["granted"]
            reason = reply["reason"]
            assert reason.startswith(REASON_LEDGER) and strerror in reason
            assert "resume the study" in reason and "\n" not in reason
            status = ray.get(handle.status.remote())
            assert status["ledger_error"] == reason and not status["can_grant"]
            assert status["spent_epsilon"] == spent and status["trials_granted"] == 1
            # a retried call is refused the same way; a crash keeps failing closed
            assert not ray.get(handle.request.remote("t1", plans["t1"], attempt="a1"))["granted"]
            assert search.suggest("next") == Searcher.FINISHED
        finally:
            _undo(ledger, aside)
        assert ledger.read_bytes() == before  # nothing half-written, nothing lost

        assert ray.get(handle.request.remote("t1", plans["t1"], attempt="a1"))["granted"]
        status = ray.get(handle.status.remote())
        assert status["ledger_error"] is None and status["can_grant"]
        assert [g["trial_id"] for g in _grants(tmp_path)] == ["t0", "t1"]
        assert status["spent_epsilon"] == pytest.approx(_epsilon([plans["t0"], plans["t1"]]))
        assert search.suggest("next") is not Searcher.FINISHED
    finally:
        ray.kill(handle, no_restart=True)


def test_a_restarted_accountant_on_vanished_storage_grants_nothing(ray_local, tmp_path):
    """A crash while the study directory is gone (storage unmounted): the restarted
    accountant must not start a fresh ledger, which would forget every grant and
    let the study spend its budget twice. It fails to start; calls fail; nothing
    is created; the study can be resumed once the storage is back."""
    plans = {t: _plan(1.5, 0.05, 100) for t in ("t0", "t1")}
    study = tmp_path / "study"
    handle = get_or_create_accountant(study, _name("vanish"), **_compose(20.0))
    try:
        assert ray.get(handle.request.remote("t0", plans["t0"], attempt="a0"))["granted"]
        study.rename(tmp_path / "study.aside")  # storage unmounted
        _crash(handle)
        with pytest.raises(ray.exceptions.RayActorError, match="is gone"):
            ray.get(handle.request.remote("t1", plans["t1"], attempt="a1"), timeout=60)
        assert not study.exists()  # no fresh, empty ledger in its place
    finally:
        ray.kill(handle, no_restart=True)
