"""The budget accountant as a real, detached Ray actor (no mocks): its replies,
concurrency and restarts. The decisions themselves are the core's
(tests/accountant/test_core.py, without Ray)."""

from __future__ import annotations

import copy
import uuid
from pathlib import Path

import pytest
import ray
from dp_accounting import NeighboringRelation, dp_event
from dp_accounting.pld.pld_privacy_accountant import PLDAccountant
from dp_accounting.rdp import RdpAccountant
from hypothesis import given, settings
from hypothesis import strategies as st

from raydp_synth.accountant import (
    LEDGER_NAME,
    BudgetAccountant,
    Ledger,
    get_accountant,
    get_or_create_accountant,
)
from raydp_synth.accountant.core import REASON_BUDGET, REASON_RERUN
from raydp_synth.errors import ConfigError
from raydp_synth.privacy.events import event_from_json, event_to_json, subsampled_gaussian_event
from raydp_synth.privacy.pricing import PLD_INTERVAL

pytestmark = pytest.mark.ray

DELTA = 1e-5


def _plan(sigma: float, q: float, steps: int) -> dict:
    return event_to_json(
        subsampled_gaussian_event(noise_multiplier=sigma, sample_rate=q, num_steps=steps)
    )


class _Stated:
    """The stated pricing straight from dp-accounting: the smaller of RdpAccountant's and
    PLDAccountant's (pessimistic, add-or-remove-one) epsilon of everything composed."""

    def __init__(self) -> None:
        self.rdp = RdpAccountant()
        self.pld = PLDAccountant(NeighboringRelation.ADD_OR_REMOVE_ONE, PLD_INTERVAL)

    def compose(self, event) -> None:
        self.rdp.compose(event)
        self.pld.compose(event)

    def get_epsilon(self, delta: float) -> float:
        return min(self.rdp.get_epsilon(delta), self.pld.get_epsilon(delta))


def _epsilon(events: list[dict]) -> float:
    """The composition of serialised events, straight from dp-accounting."""
    accountant = _Stated()
    for event in events:
        accountant.compose(event_from_json(event))
    return accountant.get_epsilon(DELTA)


def _name(prefix: str) -> str:
    return f"test-{prefix}-{uuid.uuid4().hex[:10]}"


def _compose(budget: float, trials: int = 10) -> dict:
    return {"epsilon": budget, "delta": DELTA, "mode": "compose", "trials": trials}


def _grants(study_dir: Path) -> list[dict]:
    return [e for e in Ledger(study_dir / LEDGER_NAME).entries() if e["kind"] == "grant"]


def _pid(handle) -> int:
    import os

    return ray.get(handle.__ray_call__.remote(lambda self: os.getpid()))


def _restarted(handle, old_pid: int, timeout_s: float = 60.0) -> int:
    """The pid of the restarted actor. ``ray.kill`` is asynchronous: a call made just
    after it may still be served by the old process, so wait for the new one."""
    import time

    deadline = time.monotonic() + timeout_s
    while (pid := _pid(handle)) == old_pid:
        assert time.monotonic() < deadline, "Ray did not restart the accountant"
        time.sleep(0.1)
    return pid


def _epsilon_with(accountant: _Stated, plan: dict) -> float:
    """The stated epsilon of ``accountant``'s composition plus ``plan``, leaving
    ``accountant`` as it is."""
    probe = copy.deepcopy(accountant)
    probe.compose(event_from_json(plan))
    return probe.get_epsilon(DELTA)


def _replay_check(entries: list[dict], plans: dict[str, dict], budget: float) -> _Stated:
    """Replay the ledger in order with dp-accounting: every grant fits, every refusal
    could not have fit at the time it was made, and nothing is granted twice."""
    assert entries[0]["kind"] == "study"
    accountant = _Stated()
    granted: set[str] = set()
    for entry in entries[1:]:
        trial = entry["trial_id"]
        if entry["kind"] == "grant":
            assert trial not in granted, f"{trial} charged twice"
            assert entry["event"] == plans[trial]
            accountant.compose(event_from_json(entry["event"]))
            assert accountant.get_epsilon(DELTA) <= budget
            granted.add(trial)
        else:
            assert entry["kind"] == "refusal"
            assert entry["reason"].startswith(REASON_BUDGET), entry["reason"]
            assert trial not in granted  # the same plan is never refused after a grant
            assert _epsilon_with(accountant, plans[trial]) > budget
    return accountant


# Plans of stated epsilon 0.07 (sigma 2, q 0.01, 10 steps) to 3.5 (sigma 1, q 0.05, 100
# steps) each, so a budget of 0.5-4 grants some and refuses others. The PLD pricing of every decision
# (the actor's and the replay's) grows with noise and steps: wider plans cost the
# suite minutes without another interleaving.
@settings(max_examples=5, deadline=None)
@given(
    plans=st.lists(
        st.tuples(
            st.floats(1.0, 2.0),
            st.floats(0.01, 0.05),
            st.integers(10, 100),
            st.booleans(),  # also sent a second time, as a retry would
        ),
        min_size=2,
        max_size=8,
    ),
    budget=st.floats(0.5, 4.0),
)
def test_never_overspends_under_concurrent_requests(ray_local, tmp_path_factory, plans, budget):
    study_dir = tmp_path_factory.mktemp("study")
    handle = get_or_create_accountant(study_dir, _name("concurrent"), **_compose(budget))
    try:
        by_trial = {f"t{i}": _plan(s, q, n) for i, (s, q, n, _) in enumerate(plans)}
        calls = list(by_trial.items()) + [
            (f"t{i}", by_trial[f"t{i}"]) for i, p in enumerate(plans) if p[3]
        ]

        @ray.remote(num_cpus=1)  # the pooled workers: no process start-up per example
        def ask(accountant, batch):
            return ray.get([accountant.request.remote(t, e) for t, e in batch])

        batches = [calls[0::2], calls[1::2]]
        replies = [r for rs in ray.get([ask.remote(handle, b) for b in batches]) for r in rs]

        entries = Ledger(study_dir / LEDGER_NAME).entries()
        accountant = _replay_check(entries, by_trial, budget)
        granted = {e["trial_id"] for e in entries if e["kind"] == "grant"}
        spent = accountant.get_epsilon(DELTA) if granted else 0.0
        assert spent <= budget
        for reply in replies:
            assert reply["granted"] == (reply["trial_id"] in granted)
        # at least: the final state plus any refused plan exceeds the budget (the
        # replay's final state is the composition of every grant)
        for trial in set(by_trial) - granted:
            assert _epsilon_with(accountant, by_trial[trial]) > budget
        statement = ray.get(handle.statement.remote())
        assert statement["epsilon"] == spent
        assert statement["trials_granted"] == len(granted)
        status = ray.get(handle.status.remote())
        assert status["trials_refused"] == len(by_trial) - len(granted)
        assert status["unspent_epsilon"] == pytest.approx(budget - spent)
    finally:
        ray.kill(handle, no_restart=True)


def test_refuses_at_exhaustion_with_a_clear_reason(ray_local, tmp_path):
    """The actor's replies, status and lookup by name."""
    plan = _plan(1.0, 0.05, 100)
    budget = _epsilon([plan, plan])  # exactly two copies fit
    name = _name("exhaust")
    handle = get_or_create_accountant(tmp_path, name, **_compose(budget, trials=2))
    try:
        assert get_accountant(name) == handle
        first = ray.get(handle.request.remote("a", plan))
        assert first == {
            "granted": True,
            "reason": None,
            "trial_id": "a",
            "spent_epsilon": _epsilon([plan]),
        }
        assert ray.get(handle.request.remote("b", plan))["granted"]
        third = ray.get(handle.request.remote("c", plan))
        assert not third["granted"]
        assert third["reason"].startswith(f"{REASON_BUDGET}: granting this plan")
        assert third["spent_epsilon"] == budget
        status = ray.get(handle.status.remote())
        assert status["spent_epsilon"] == budget and status["unspent_epsilon"] == 0.0
        assert status["trials_granted"] == 2 and status["trials_refused"] == 1
        assert not status["can_grant"]
        tiny = _plan(50.0, 0.001, 1)  # the budget is used up exactly: nothing fits
        assert not ray.get(handle.request.remote("d", tiny))["granted"]
        assert [g["trial_id"] for g in _grants(tmp_path)] == ["a", "b"]
    finally:
        ray.kill(handle, no_restart=True)
    with pytest.raises(ConfigError, match="no budget accountant"):
        get_accountant(name)


def test_a_granted_trial_is_never_rerun_under_another_attempt(ray_local, tmp_path):
    """A retried call (same attempt nonce) gets its grant back; a rerun of the trial
    (a new attempt) is refused, also after the actor restarts from the ledger."""
    plan = _plan(1.0, 0.05, 100)
    handle = get_or_create_accountant(tmp_path, _name("rerun"), **_compose(10.0))
    try:
        assert ray.get(handle.request.remote("t1", plan, attempt="a1"))["granted"]
        assert ray.get(handle.request.remote("t1", plan, attempt="a1"))["granted"]
        rerun = ray.get(handle.request.remote("t1", plan, attempt="a2"))
        assert not rerun["granted"] and rerun["reason"].startswith(REASON_RERUN)
        ray.kill(handle, no_restart=False)
        rerun = ray.get(handle.request.remote("t1", plan, attempt="a3"))
        assert not rerun["granted"] and rerun["reason"].startswith(REASON_RERUN)
        assert ray.get(handle.granted_events.remote()) == [plan]
        assert [g["trial_id"] for g in _grants(tmp_path)] == ["t1"]
    finally:
        ray.kill(handle, no_restart=True)


def test_rebuilds_from_the_ledger_after_a_crash(ray_local, tmp_path):
    # Stated epsilon 0.62-0.34 each (sigma 2-3.1, 30 steps), a budget of five t0's:
    # t0-t4 fit, later plans partly; cheap to price at each decision and replay.
    plans = {f"t{i}": _plan(2.0 + 0.1 * i, 0.05, 30) for i in range(12)}
    budget = _epsilon([plans["t0"]] * 5)
    handle = get_or_create_accountant(tmp_path, _name("crash"), **_compose(budget))
    try:
        assert ray.get(handle.request.remote("t0", plans["t0"]))["granted"]
        assert ray.get(handle.request.remote("t1", plans["t1"]))["granted"]
        before = ray.get(handle.status.remote())
        pid = _pid(handle)

        ray.kill(handle, no_restart=False)  # a crash: Ray restarts it (max_restarts=-1)
        _restarted(handle, pid)
        after = ray.get(handle.status.remote())
        assert after == before  # nothing lost: the grants before the crash still count

        # a crash while requests are in flight: they are retried (max_task_retries=-1)
        pending = [handle.request.remote(t, plans[t]) for t in ("t2", "t3", "t4")]
        ray.kill(handle, no_restart=False)
        pending += [handle.request.remote(t, plans[t]) for t in ("t2", "t3", "t4")]
        replies = ray.get(pending)
        for t in ("t2", "t3", "t4"):
            assert len({r["granted"] for r in replies if r["trial_id"] == t}) == 1
        for t in list(plans)[5:]:
            ray.get(handle.request.remote(t, plans[t]))

        entries = Ledger(tmp_path / LEDGER_NAME).entries()
        accountant = _replay_check(entries, plans, budget)
        granted = [g["trial_id"] for g in _grants(tmp_path)]
        assert granted[:2] == ["t0", "t1"] and len(granted) == len(set(granted))
        status = ray.get(handle.status.remote())
        assert status["trials_granted"] == len(granted)
        assert status["spent_epsilon"] == accountant.get_epsilon(DELTA) <= budget
        assert ray.get(handle.statement.remote())["epsilon"] == status["spent_epsilon"]
    finally:
        ray.kill(handle, no_restart=True)


def test_header_mismatch_on_resume(ray_local, tmp_path):
    plan = _plan(1.0, 0.05, 100)
    name = _name("resume")
    handle = get_or_create_accountant(tmp_path, name, **_compose(10.0))
    try:
        assert ray.get(handle.request.remote("t0", plan))["granted"]
        # the live actor refuses to serve another study under its name
        with pytest.raises(ConfigError, match="belongs to another study"):
            get_or_create_accountant(tmp_path, name, **_compose(11.0))
        with pytest.raises(ConfigError, match="runs the study in"):
            get_or_create_accountant(tmp_path / "other", name, **_compose(10.0))
    finally:
        ray.kill(handle, no_restart=True)

    # the driver-side check, before any actor starts
    with pytest.raises(ConfigError,
                       match=r"belongs to another study.*new study name.*resume the study"):
        get_or_create_accountant(tmp_path, _name("resume2"), **_compose(11.0))
    with pytest.raises(ConfigError, match="trials"):
        BudgetAccountant(str(tmp_path), **_compose(10.0, trials=11))
    reference = _plan(2.0, 0.01, 50)
    with pytest.raises(ConfigError, match="started with mode='compose'"):
        BudgetAccountant(
            str(tmp_path),
            **_compose(10.0) | {"mode": "random-stopping", "reference_event": reference},
        )

    # resuming with the same settings continues the same ledger
    resumed = get_or_create_accountant(tmp_path, _name("resume3"), **_compose(10.0))
    try:
        assert ray.get(resumed.status.remote())["trials_granted"] == 1
        assert ray.get(resumed.request.remote("t0", plan))["granted"]
        assert len(_grants(tmp_path)) == 1
    finally:
        ray.kill(resumed, no_restart=True)




def random_stopping_accountant(study_dir: Path, prefix: str, *,
                               trial_count: int) -> tuple:
    """A random-stopping study's accountant actor whose K is ``trial_count`` (its
    ledger's header, written here, says so): (handle, study name, reference plan)."""
    from raydp_synth.accountant.core import StudySettings, new_study_header

    reference = _plan(2.0, 0.01, 50)
    settings = {"epsilon": 50.0, "delta": DELTA, "mode": "random-stopping", "trials": 2,
                "distribution": "geometric", "reference_event": reference}
    name = _name(prefix)
    header = new_study_header(StudySettings(**settings), name=name) | {"trial_count": trial_count}
    Ledger(study_dir / LEDGER_NAME).append(header, create=True)
    return get_or_create_accountant(study_dir, name, **settings), name, reference


def test_random_stopping_draws_are_atomic_and_only_drawn_trials_are_granted(ray_local,
                                                                             tmp_path):
    """K = 3 (the ledger's header says so). One trial is drawn and never asks; then
    two tasks draw seven more at once: the actor records exactly two of them, and only
    those are granted, though all seven ask, in reverse order. ``undraw`` takes back
    the draw that never asked, and the search draws in its place."""
    from raydp_synth.accountant.core import REASON_NOT_DRAWN

    handle, _, reference = random_stopping_accountant(tmp_path, "draws", trial_count=3)
    try:
        @ray.remote(num_cpus=1)
        def draw(accountant, trial_ids):
            return [t for t in trial_ids if ray.get(accountant.draw.remote(t)) == "drawn"]

        assert ray.get(handle.draw.remote("lost")) == "drawn"  # its trial never asks
        ids = [f"t{i}" for i in range(7)]
        drawn = [t for ts in ray.get([draw.remote(handle, ids[0::2]),
                                      draw.remote(handle, ids[1::2])]) for t in ts]
        entries = Ledger(tmp_path / LEDGER_NAME).entries()
        assert len(drawn) == 2
        assert [e["trial_id"] for e in entries if e["kind"] == "draw"][0] == "lost"
        assert sorted(e["trial_id"] for e in entries if e["kind"] == "draw")[1:] == sorted(drawn)
        replies = {t: ray.get(handle.request.remote(t, reference)) for t in reversed(ids)}
        assert {t for t, r in replies.items() if r["granted"]} == set(drawn)
        assert all(r["reason"].startswith(REASON_NOT_DRAWN)
                   for t, r in replies.items() if t not in drawn)
        assert ray.get(handle.status.remote())["can_grant"]  # "lost" is still out
        assert ray.get(handle.draw.remote("new")) == "wait"  # K draws made, "lost" is out
        assert ray.get(handle.undraw.remote(None, ["lost"])) == 0  # restored: it keeps it
        assert ray.get(handle.undraw.remote()) == 1  # --resume, "lost" not restored
        assert ray.get(handle.draw.remote("new")) == "drawn"
        assert ray.get(handle.request.remote("new", reference))["granted"]
        assert not ray.get(handle.status.remote())["can_grant"]
        assert ray.get(handle.draw.remote("late")) == "finished"
    finally:
        ray.kill(handle, no_restart=True)


def test_dp_hypo_draws_that_end_before_asking_are_no_op_runs(ray_local, tmp_path):
    """Under DP-HyPO (``as_no_ops``) a draw whose trial ended before it asked is not
    given back: it is granted a no-op plan, one of the K runs, so the search draws no
    more than K configurations and none is drawn again after a failure. Replaying the
    ledger gives the same state; the no-op adds nothing to the statement."""
    from raydp_synth.accountant.actor import ENDED_BEFORE_ASKING

    handle, _, reference = random_stopping_accountant(tmp_path, "hypo", trial_count=2)
    try:
        before = ray.get(handle.statement.remote())
        assert ray.get(handle.draw.remote("failed")) == "drawn"
        assert ray.get(handle.draw.remote("ok")) == "drawn"
        assert ray.get(handle.undraw.remote(["failed"], None, True)) == 1
        assert ray.get(handle.undraw.remote(["failed"], None, True)) == 0  # decided now
        assert ray.get(handle.draw.remote("again")) == "wait"  # no redraw: "ok" is out
        assert ray.get(handle.request.remote("ok", reference))["granted"]
        assert ray.get(handle.draw.remote("again")) == "finished"
        grants = _grants(tmp_path)
        assert [g["trial_id"] for g in grants] == ["failed", "ok"]
        assert grants[0]["attempt"] == ENDED_BEFORE_ASKING
        assert event_from_json(grants[0]["event"]) == event_from_json(
            event_to_json(dp_event.NoOpDpEvent()))
        assert not [e for e in Ledger(tmp_path / LEDGER_NAME).entries() if e["kind"] == "undraw"]
        after = ray.get(handle.statement.remote())
        assert after["epsilon"] == before["epsilon"]  # priced by E_ref and K, not by runs
        # A no-op'd trial that comes back (a retried process) is refused: never rerun.
        assert not ray.get(handle.request.remote("failed", reference))["granted"]
    finally:
        ray.kill(handle, no_restart=True)
